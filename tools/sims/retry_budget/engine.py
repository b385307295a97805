"""Retry budgets (Chapter 11): how retries multiply the load on a backend
that fails, and how a budget stops them, as in chapter 21 of Google's Site
Reliability Engineering book ("Handling Overload"): at most ATTEMPTS
attempts for any request, and, per client, retries only while they stay
under BUDGET (10%) of that client's requests. Unlike the other engines, it
drives none of the course's code.

Two models, each on a virtual clock with seeded dice (nothing sleeps):

amplification(failing): clients make requests to a backend that fails the
fraction `failing` of the calls it gets, at random. A failed call is tried
again, up to ATTEMPTS attempts, and, with a budget, only while the client's
retries stay under BUDGET times its requests so far. The load on the
backend is its calls as a multiple of the requests (the offered load).

Recovery: requests arrive at `load` times the backend's capacity (at random
moments, a Poisson stream). The backend answers them in order, CAPACITY a
second, and stalls, answering nothing, for `stall` seconds from STALL_AT. A
client that has no answer TIMEOUT_SECONDS after a call gives up on it (the
backend will still answer it later, for nobody: wasted work) and tries
again, after a backoff with or without full jitter, within ATTEMPTS and,
with a budget, within its budget. After the stall the backend's queue is
long, so calls wait past their timeout and are tried again: without a
budget, the retries alone can keep the backend overloaded long after the
stall ended (a metastable failure).

Run it in a terminal:
    python3 -m tools.sims retry-budget [--load F] [--stall S] [--seed N]
Or from Python:
    sim = RetryBudget(budget=True); sim.state()["recovered_at"]
"""
import collections
import functools
import heapq
import math
import random

from ..engine import Rerun, program

ATTEMPTS = 3                     # per request, the first included (SRE book, chapter 21)
BUDGET = 0.1                     # retries per request, at most, per client
CAPACITY = 100                   # calls the backend answers in a second
TIMEOUT_SECONDS = 1.0            # a call unanswered this long is given up
BACKOFF_BASE = 0.1               # seconds: the first retry's wait (its ceiling, with jitter)
BACKOFF_CAP = 2.0
STALL_AT = 10.0                  # seconds into the run
SECONDS = 60                     # the run's length
HEALTHY = 0.9                    # recovered: at least this share of requests answered in time


class Client:
    """A client's two limits: ATTEMPTS per request, and with a budget,
    retries under BUDGET times its requests so far."""

    def __init__(self, budget):
        self.budget = budget
        self.requests = self.retries = 0

    def may_retry(self, attempt):
        """After failed attempt number `attempt`: may it try again?"""
        if attempt >= ATTEMPTS:
            return False
        if self.budget and self.retries >= BUDGET * self.requests:
            return False
        self.retries += 1
        return True

    def spare(self):
        """The retries the budget would still allow, were no more requests
        to come: while the retries stay under BUDGET times the requests.
        (Rounded first, so that 0.1 × 30 is 3, not 3.0000000000000004.)"""
        return max(0, math.ceil(round(BUDGET * self.requests, 9)) - self.retries)


def amplification(failing, budget, requests=10_000, seed=1):
    """The backend's calls as a multiple of the requests, when it fails the
    fraction `failing` of them at random."""
    dice = random.Random(seed)
    client = Client(budget)
    calls = 0
    for _ in range(requests):
        client.requests += 1
        attempt = 1
        while True:
            calls += 1
            if dice.random() >= failing or not client.may_retry(attempt):
                break
            attempt += 1
    return calls / requests


def recovery(budget, jitter, load=0.6, stall=5.0, seed=1):
    """Each second of the run: {"offered": new requests, "calls": calls sent,
    "answered": requests answered in time, "spare": with a budget, the
    retries it would still allow at the second's end, else None}."""
    dice = random.Random(seed)
    client = Client(budget)
    events = []                          # (time, order, what, request, attempt)
    counter = 0

    def at(time, what, request=None, attempt=None):
        nonlocal counter
        counter += 1
        heapq.heappush(events, (time, counter, what, request, attempt))

    arrival = dice.expovariate(load * CAPACITY)
    while arrival < SECONDS:
        at(arrival, "request")
        arrival += dice.expovariate(load * CAPACITY)
    at(0.0, "answer")
    waiting = collections.deque()        # calls the backend has not answered: (sent, request)
    answered = set()
    seconds = [{"offered": 0, "calls": 0, "answered": 0, "spare": None}
               for _ in range(SECONDS)]

    def call(now, request, attempt):
        seconds[int(now)]["calls"] += 1
        waiting.append((now, request))
        at(now + TIMEOUT_SECONDS, "timeout", request, attempt)

    while events:
        now, _, what, request, attempt = heapq.heappop(events)
        if now >= SECONDS:
            break
        if what == "request":
            client.requests += 1
            seconds[int(now)]["offered"] += 1
            call(now, client.requests, 1)
        elif what == "answer":           # the backend answers its oldest call
            if STALL_AT <= now < STALL_AT + stall:
                at(STALL_AT + stall, "answer")
                continue
            if waiting:
                sent, request = waiting.popleft()
                if now - sent < TIMEOUT_SECONDS and request not in answered:
                    answered.add(request)
                    seconds[int(now)]["answered"] += 1
            at(now + 1 / CAPACITY, "answer")
        elif what == "timeout":
            if request not in answered and client.may_retry(attempt):
                ceiling = min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1))
                at(now + (dice.uniform(0, ceiling) if jitter else ceiling),
                   "retry", request, attempt + 1)
        else:                            # a retry's time has come
            call(now, request, attempt)
        if budget:                       # the last event of a second sets its spare
            seconds[int(now)]["spare"] = client.spare()
    if budget:                           # a second without events keeps the one before's
        for second in range(1, SECONDS):
            if seconds[second]["spare"] is None:
                seconds[second]["spare"] = seconds[second - 1]["spare"]
    return seconds


@functools.lru_cache(maxsize=8)
def amplification_table(seed):
    """The load at each tenth of calls failing, from 0 to all, without a
    budget and with one (the same for every setting but the seed)."""
    return tuple({"failing": tenths / 10,
                  "without": amplification(tenths / 10, False, seed=seed),
                  "with": amplification(tenths / 10, True, seed=seed)}
                 for tenths in range(11))


def recovered_at(seconds, stall):
    """The first second after the stall from which, to the end, every second
    answered at least HEALTHY of its requests in time; None if none did."""
    start = int(STALL_AT + stall)
    healthy = [each["answered"] >= HEALTHY * each["offered"] for each in seconds]
    for second in range(start, SECONDS):
        if all(healthy[second:]):
            return second
    return None


class RetryBudget(Rerun):
    TASKS = {
        "stuck": "without a budget, try jitter: does it bring the backend back?",
        "back": "with a stall that keeps it down, bring it back within 15 s of the stall's end",
        "light": "with a stall of 5 s or more, find the highest load at which it comes back "
                 "without a budget",
    }
    SETTINGS = {
        "budget": (bool,),
        "jitter": (bool,),
        "load": (float, 0.1, 1.0),    # of the capacity
        "stall": (float, 0.0, 30.0),  # seconds
        "seed": (int, 0, 2**63),
    }

    def __init__(self, budget=False, jitter=False, load=0.6, stall=5.0, seed=1):
        super().__init__(budget=budget, jitter=jitter, load=load, stall=stall, seed=seed)

    def _run(self):
        s = self.settings
        self.seconds = recovery(s["budget"], s["jitter"], s["load"], s["stall"], s["seed"])
        self.recovered_at = recovered_at(self.seconds, s["stall"])

    def _earn(self):
        s = self.settings
        end = STALL_AT + s["stall"]
        if self.recovered_at is None:
            if s["jitter"] and not s["budget"]:
                self.earned.add("stuck")
        elif s["budget"]:
            down = recovered_at(recovery(False, s["jitter"], s["load"], s["stall"], s["seed"]),
                                s["stall"]) is None
            if down and self.recovered_at - end <= 15:
                self.earned.add("back")
        elif s["load"] >= 0.3 and s["stall"] >= 5:
            self.earned.add("light")

    def state(self):
        s = self.settings
        return {
            "settings": dict(s),
            "seconds": [dict(each) for each in self.seconds],
            "stall_at": STALL_AT,
            "recovered_at": self.recovered_at,
            "capacity": CAPACITY,
            "healthy": HEALTHY,
            "attempts": ATTEMPTS,
            "budget_share": BUDGET,
            "amplification": [dict(row) for row in amplification_table(s["seed"])],
            "tasks": self.tasks(),
        }


# ---- the text program

def print_amplification(state):
    print(f"Load on a failing backend, as a multiple of the requests: at most {ATTEMPTS} "
          f"attempts a request,")
    print(f"and with a budget, retries at most {BUDGET:.0%} of a client's requests.")
    print()
    print(f" {'fails':>6} {'no budget':>10} {'budget':>8}")
    for row in state["amplification"]:
        print(f" {row['failing']:6.0%} {row['without']:9.2f}× {row['with']:7.2f}×")


def print_recovery(state):
    s = state["settings"]
    end = STALL_AT + s["stall"]
    print(f"Requests at {s['load']:.0%} of what the backend answers ({CAPACITY} a second); "
          f"it stalls from {STALL_AT:g} s to {end:g} s;")
    print(f"a call unanswered after {TIMEOUT_SECONDS:g} s is tried again "
          f"({'full jitter' if s['jitter'] else 'no jitter'}, "
          f"{'a retry budget' if s['budget'] else 'no retry budget'}). Per second:")
    # With a budget, also the retries it still allows at each second's end.
    print(f" {'s':>3} {'load':>6} {'answered':>9}" + (f" {'spare':>6}" if s["budget"] else ""))
    for second, each in enumerate(state["seconds"]):
        load = each["calls"] / max(1, each["offered"])
        share = each["answered"] / max(1, each["offered"])
        spare = f" {each['spare']:6}" if s["budget"] else ""
        mark = " stalled" if STALL_AT <= second < end else ""
        print(f" {second:3} {load:5.1f}× {share:8.0%}{spare}  {'█' * round(10 * load)}{mark}")
    recovered = state["recovered_at"]
    print("recovered at " + (f"{recovered} s" if recovered is not None else
                             "no point: the retries keep the backend overloaded"))


def print_both(sim):
    state = sim.state()
    print_amplification(state)
    print()
    print_recovery(state)


main = program(RetryBudget, "Retries that multiply an outage, and a budget that stops them.",
               print_both, budget="retry within a 10%% budget", jitter="wait with full jitter",
               load="of the backend's capacity", stall="seconds the backend stalls",
               seed="repeat the same dice")


if __name__ == "__main__":
    main()
