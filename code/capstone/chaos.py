# chaos.py: the chaos monkey. Signs up customers, sets worker processes on
# their jobs while shop.maybe_crash() kills them at random, has the given
# world's supervisor restart every worker that dies, then audits: every
# customer has exactly one welcome email, paid exactly $5, and holds
# exactly 10 points, except where a job is dead: that customer waits for a
# person, and must not have been served twice meanwhile.
#
# Run it:   python3 chaos.py                      (prints a new seed each run)
#           python3 chaos.py --seed 7             (replays run 7)
#           python3 chaos.py --seed 7 --chaos 0.3
#           TINYQ_NO_KEYS=1 python3 chaos.py      (Break It)

import argparse
import os
import random
import sqlite3
import sys
import time

import shop
import world_given

POLL_SECONDS = 0.05              # an idle worker's longest wait between looks


def work(seed, chaos):
    """One worker process: work until no job is queued or running."""
    queue = shop.open_shop(chaos, seed)
    while True:
        if queue.work_one():
            continue
        counts = queue.counts()
        if counts["queued"] + counts["running"] == 0:
            return
        queue.wait(POLL_SECONDS)  # jobs waiting for their backoff or a lease


def counted(number, thing):                  # 1 worker, 3 workers
    return f"{number} {thing}{'' if number == 1 else 's'}"


def start_afresh():
    """The shop's queue, empty: the last run's files are removed first."""
    for name in (shop.SHOP_DB, shop.WORLD_DB):
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(name + suffix):
                os.remove(name + suffix)
    return shop.open_shop()


def audit(queue, world):
    """Two lists of lines. Problems: an effect that happened twice, or not at
    all although its job is done. Parked: a customer whose job is dead, left
    for a person; the effect may be missing, but must not be doubled. The
    world is another database, as a bank's books are not the shop's."""
    dead = {(job["args"]["customer"], job["kind"]): job["attempts"]
            for job in queue.jobs() if job["status"] == "dead"}
    emails = dict(world.execute(
        "SELECT address, count(*) FROM emails GROUP BY address"))
    paid = dict(world.execute(
        "SELECT customer, sum(cents) FROM charges GROUP BY customer"))
    problems, parked = [], []
    for customer, email, points in queue.db.execute(
            "SELECT id, email, points FROM customers ORDER BY id"):
        emails_got, cents = emails.get(email, 0), paid.get(customer, 0)
        # kind: (what the customer got, what a done job owes, in words)
        effects = {
            "welcome_email": (emails_got, 1,
                              f"got {counted(emails_got, 'welcome email')}"),
            "signup_fee": (cents, shop.FEE_CENTS, f"paid ${cents / 100:.2f}"),
            "loyalty_points": (points, shop.POINTS, f"holds {points} points"),
        }
        for kind, (got, owed, words) in effects.items():
            if (customer, kind) in dead:
                attempts = dead[customer, kind]
                parked.append(f"{email}: {kind}, {attempts} attempts; {words}")
                if got > owed:
                    problems.append(f"{email} {words}")
            elif got != owed:
                problems.append(f"{email} {words}")
    return problems, parked


def report(queue, world, customers, crashes, elapsed):
    jobs = queue.counts()
    retried = sum(job["attempts"] > 1 for job in queue.jobs())
    repeats = [world.execute("SELECT coalesce(sum(repeats), 0) "
                             f"FROM {table}").fetchone()[0]
               for table in ("emails", "charges")]
    print(f"finished in {elapsed:.1f} s")
    print(f"worker crashes: {crashes}")
    print(f"jobs: {jobs['done']} done, {jobs['dead']} dead,"
          f" {retried} needed more than one attempt")
    print(f"duplicates absorbed by keys: {counted(repeats[0], 'email')},"
          f" {counted(repeats[1], 'charge')}")
    problems, parked = audit(queue, world)
    if problems:
        print("AUDIT FAILED")
        for problem in problems:
            print(f"  {problem}")
    elif parked:
        print("AUDIT PASSED: nothing done twice, "
              "nothing missing from a done job")
    else:
        each = "with" if customers == 1 else "each with"
        print(f"AUDIT PASSED: {counted(customers, 'customer')}, "
              f"{each} 1 email, $5.00 paid and 10 points")
    if parked:
        print(f"parked for a person: {counted(len(parked), 'dead job')};"
              f" each one's last_error says why")
        for line in parked:
            print(f"  {line}")
    return 1 if problems else 0


def main():
    parser = argparse.ArgumentParser(
        description="Crash tinyq's workers at random, then audit.")
    parser.add_argument("--seed", type=int, default=random.randrange(1000))
    parser.add_argument("--chaos", type=float, default=0.1,
                        help="chance of a crash at each crash point "
                             "(default 0.1)")
    parser.add_argument("--customers", type=int, default=20)
    parser.add_argument("--workers", type=int, default=3)
    args = parser.parse_args()
    print(f"seed {args.seed}: {counted(args.customers, 'customer')},"
          f" {counted(args.workers, 'worker')}, crash chance {args.chaos}")

    queue = start_afresh()
    for number in range(1, args.customers + 1):
        shop.signup(queue, f"customer{number}@example.com")
    queue.close()               # workers open their own connections

    started = time.monotonic()
    crashes = world_given.supervise(work, (args.seed, args.chaos),
                                    args.workers, shop.CRASHED)
    elapsed = time.monotonic() - started

    queue = shop.open_queue()
    world = sqlite3.connect(shop.WORLD_DB)
    return report(queue, world, args.customers, crashes, elapsed)


if __name__ == "__main__":
    sys.exit(main())
