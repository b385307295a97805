# chaos.py: the chaos monkey. Signs up customers, sets worker processes on
# their jobs while shop.maybe_crash() kills them at random, restarts every
# worker that dies (as systemd or Kubernetes would), then audits: every
# customer has exactly one welcome email, paid exactly $5, and holds
# exactly 10 points.
#
# Run it:   python3 chaos.py                      (a new seed each run, printed)
#           python3 chaos.py --seed 7             (replays run 7)
#           python3 chaos.py --seed 7 --chaos 0.3
#           TINYQ_NO_KEYS=1 python3 chaos.py      (Break It)

import argparse
import multiprocessing
import multiprocessing.connection
import os
import random
import sqlite3
import sys
import time

import shop
import tinyq

TIME_LIMIT_SECONDS = 60          # a run that takes longer than this is stuck
POLL_SECONDS = 0.05            # how often an idle worker looks again


def work(seed, chaos):
    """One worker process: work until no job is queued or running."""
    queue = shop.open_shop(chaos, seed)
    while True:
        try:
            if queue.work_one():
                continue
        except tinyq.LeaseLost:
            continue             # our lease ran out and another worker has the job
        counts = queue.counts()
        if counts["queued"] + counts["running"] == 0:
            return
        time.sleep(POLL_SECONDS)  # jobs waiting for their backoff or a lease


def start_worker(seed, chaos):
    worker = multiprocessing.Process(target=work, args=(seed, chaos))
    worker.start()
    return worker


def supervise(seed, chaos, workers):
    """Run the workers, restarting each one that crashes, until all are done.
    Returns the number of crashes."""
    running = [start_worker(seed, chaos) for _ in range(workers)]
    crashes = 0
    deadline = time.monotonic() + TIME_LIMIT_SECONDS
    while running:
        sentinels = [worker.sentinel for worker in running]
        multiprocessing.connection.wait(sentinels, timeout=deadline - time.monotonic())
        if time.monotonic() > deadline:
            give_up(running, f"stuck: jobs still unfinished after {TIME_LIMIT_SECONDS} s")
        for worker in [worker for worker in running if worker.exitcode is not None]:
            running.remove(worker)
            if worker.exitcode == shop.CRASHED:
                crashes += 1
                running.append(start_worker(seed, chaos))
            elif worker.exitcode != 0:      # a bug: its traceback is above
                give_up(running, f"a worker failed with exit status {worker.exitcode}")
    return crashes


def give_up(running, reason):
    """Stop every worker and end with exit status 2: no audit, no verdict."""
    for worker in running:
        worker.kill()
    print(reason, file=sys.stderr)
    sys.exit(2)


def audit(db):
    """One line per thing that went wrong; none if all is well."""
    problems = []
    for email, points, emails, cents in db.execute("""
        SELECT email, points,
               (SELECT count(*) FROM world.emails WHERE address = email),
               (SELECT coalesce(sum(cents), 0) FROM world.charges WHERE customer = customers.id)
        FROM customers ORDER BY id
    """):
        if emails != 1:
            problems.append(f"{email} got {emails} welcome emails")
        if cents != shop.FEE_CENTS:
            problems.append(f"{email} paid ${cents / 100:.2f}")
        if points != shop.POINTS:
            problems.append(f"{email} holds {points} points")
    return problems


def report(db, customers, crashes, elapsed):
    jobs = dict(db.execute("SELECT status, count(*) FROM jobs GROUP BY status"))
    retried = db.execute("SELECT count(*) FROM jobs WHERE attempts > 1").fetchone()[0]
    repeats = [db.execute(f"SELECT coalesce(sum(repeats), 0) FROM world.{table}").fetchone()[0]
               for table in ("emails", "charges")]
    print(f"finished in {elapsed:.1f} s")
    print(f"worker crashes: {crashes}")
    print(f"jobs: {jobs.get('done', 0)} done, {jobs.get('dead', 0)} dead,"
          f" {retried} needed more than one attempt")
    print(f"duplicates absorbed by keys: {repeats[0]} emails, {repeats[1]} charges")
    problems = audit(db)
    if problems:
        print("AUDIT FAILED")
        for problem in problems:
            print(f"  {problem}")
        return 1
    print(f"AUDIT PASSED: {customers} customers, each with 1 email, $5.00 paid and 10 points")
    return 0


def main():
    parser = argparse.ArgumentParser(description="Crash tinyq's workers at random, then audit.")
    parser.add_argument("--seed", type=int, default=random.randrange(1000))
    parser.add_argument("--chaos", type=float, default=0.1,
                        help="chance of a crash at each crash point (default 0.1)")
    parser.add_argument("--customers", type=int, default=20)
    parser.add_argument("--workers", type=int, default=3)
    args = parser.parse_args()
    print(f"seed {args.seed}: {args.customers} customers, {args.workers} workers,"
          f" crash chance {args.chaos}")

    for name in (shop.SHOP_DB, shop.WORLD_DB):       # start from nothing
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(name + suffix):
                os.remove(name + suffix)
    queue = shop.open_shop()
    for number in range(1, args.customers + 1):
        shop.signup(queue, f"customer{number}@example.com")
    queue.close()               # workers open their own connections

    started = time.monotonic()
    crashes = supervise(args.seed, args.chaos, args.workers)
    elapsed = time.monotonic() - started

    db = sqlite3.connect(shop.SHOP_DB)
    db.execute("ATTACH DATABASE ? AS world", (shop.WORLD_DB,))
    return report(db, args.customers, crashes, elapsed)


if __name__ == "__main__":
    sys.exit(main())
