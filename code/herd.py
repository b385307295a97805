# herd.py: a thundering herd, and the jitter that breaks it up, after
# Marc Brooker's simulation. 100 clients each change one shared record
# once: a client reads the record, and its write, a round trip later, is
# taken only if nobody else's write was taken since that read. A client
# turned away waits as its policy says, then reads and writes again.
# Time is simulated: the program runs in a blink, and a seed repeats it.
#
# Run it:   python3 herd.py                (every policy, 100 clients)
#           python3 herd.py --cap 0.05     (a smaller cap)
#           python3 herd.py --clients 20 --seed 7

import argparse
import collections
import heapq
import random

ROUND_TRIP_SECONDS = 0.020       # a message there and back, 10 ms each way
POLICIES = {"none": "no backoff", "exponential": "exponential, no jitter",
            "full": "full jitter", "equal": "equal jitter",
            "decorrelated": "decorrelated jitter"}


def wait(policy, failures, last, base, cap, dice):
    """Seconds to wait after a client's `failures`-th refusal. `last` is its
    previous wait, which decorrelated jitter grows from."""
    ceiling = min(cap, base * 2 ** (failures - 1))
    if policy == "none":
        return 0.0
    if policy == "exponential":
        return ceiling
    if policy == "full":
        return dice.uniform(0, ceiling)
    if policy == "equal":
        return ceiling / 2 + dice.uniform(0, ceiling / 2)
    return min(cap, dice.uniform(base, last * 3))        # decorrelated


def contend(policy, clients=100, base=0.005, cap=2.0, seed=1):
    """Every write, in the order it arrived: (time, client, taken)."""
    dice = random.Random(seed)
    due = [(0.0, client) for client in range(clients)]   # all start at once
    failures = [0] * clients
    last = [base] * clients
    written_at = -1.0            # when a write was last taken: none yet
    calls = []
    while due:
        now, client = heapq.heappop(due)                 # the earliest write
        read_at = now - ROUND_TRIP_SECONDS               # when the client read
        taken = written_at < read_at                     # nobody wrote since
        calls.append((now, client, taken))
        if taken:
            written_at = now
        else:
            failures[client] += 1
            last[client] = wait(policy, failures[client], last[client],
                                base, cap, dice)
            # half a round trip to hear no, the wait, half to read again,
            # and a whole round trip more until the next write arrives
            next_write = now + last[client] + 2 * ROUND_TRIP_SECONDS
            heapq.heappush(due, (next_write, client))
    return calls


def summary(calls):
    """How many writes were sent; when the last was taken; and in step: the
    most sent at one instant after the first."""
    at_once = collections.Counter(time for time, _, _ in calls if time > 0)
    end = max(time for time, _, taken in calls if taken)
    return {"calls": len(calls), "seconds": end,
            "in_step": max(at_once.values(), default=0)}


def shown(seconds):
    if seconds < 10:
        return f"{seconds:.3f} s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    return f"{int(seconds // 60)} m {seconds % 60:02.0f} s"


def print_table(runs):
    """A line for each policy's run: {policy: its summary()}."""
    print(f" {'policy':24} {'calls':>7} {'time':>10}  {'in step':>7}")
    for policy, run in runs.items():
        print(f" {POLICIES[policy]:24} {run['calls']:7,} "
              f"{shown(run['seconds']):>10}  {run['in_step']:7}")


def main():
    parser = argparse.ArgumentParser(
        description="Clients that back off, with and without jitter.")
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--base", type=float, default=0.005,
                        help="first wait, in seconds")
    parser.add_argument("--cap", type=float, default=2.0,
                        help="longest wait, in seconds")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    print_table({policy: summary(contend(policy, args.clients, args.base,
                                         args.cap, args.seed))
                 for policy in POLICIES})


if __name__ == "__main__":
    main()
