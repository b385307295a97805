# Exercise 7: Retry: Trying Again, Politely. A worker charges Alice's card
# through a flaky bank; a failed job waits (run_at, backoff, jitter) and is
# tried again, until done or dead. No leases, to stay short: after a Ctrl-C,
# run setup again.
#
# Run it:   python3 ex07_retries.py setup
#           python3 ex07_retries.py work --seed 1
#           python3 ex07_retries.py report

import argparse
import json
import random
import sqlite3
import time

DATABASE = "ex07.db"
MAX_ATTEMPTS = 5
BACKOFF_BASE = 0.5               # the longest first wait, in seconds
BACKOFF_CAP = 8.0                # no wait is ever longer than this
BANK_SECONDS = 0.4               # each call to the bank takes this long
LOST_REQUEST = 0.3               # chance a request never reaches the bank
LOST_REPLY = 0.3                 # chance the reply is lost after a charge
dice = random.Random()           # all chance: work seeds it for each attempt

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id          INTEGER PRIMARY KEY,
    status      TEXT NOT NULL DEFAULT 'queued',  -- queued, running, done, dead
    kind        TEXT NOT NULL,
    args        TEXT NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    run_at      REAL NOT NULL DEFAULT 0,         -- not to be tried before this
    last_error  TEXT
);
CREATE TABLE IF NOT EXISTS accounts (name TEXT PRIMARY KEY,
                                     balance_cents INTEGER NOT NULL);
"""


def connect():
    db = sqlite3.connect(DATABASE, isolation_level=None)
    db.executescript(SCHEMA)
    return db


def dollars(cents):
    return f"${cents / 100:.2f}"


def bank_charge(db, account, amount_cents):
    """The bank: not our code. It is in our database only so that you can
    see Alice's balance."""
    time.sleep(BANK_SECONDS)
    roll = dice.random()
    if roll < LOST_REQUEST:
        raise ConnectionError("could not reach the bank")
    db.execute("UPDATE accounts SET balance_cents = balance_cents - ? "
               "WHERE name = ?", (amount_cents, account))
    if roll < LOST_REQUEST + LOST_REPLY:
        raise TimeoutError("no reply from the bank")    # but the money is gone
    return "approved"


def charge_card(db, order_id, account, amount_cents):
    bank_charge(db, account, amount_cents)


def backoff(attempt, fraction):
    """The wait after failed attempt 1, 2, ...: a fraction (0 to 1) of
    its ceiling."""
    return fraction * min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1))


def claim(db):
    """The job that has been due longest, if any job is due."""
    return db.execute("""UPDATE jobs
        SET status = 'running', attempts = attempts + 1
        WHERE id = (SELECT id FROM jobs WHERE status = 'queued' AND run_at <= ?
                    ORDER BY run_at, id LIMIT 1)
        RETURNING id, kind, args, attempts""", (time.time(),)).fetchone()


def fail(db, job_id, attempts, error):
    """Put the job back to wait, or bury it: the wait in seconds, or None."""
    message = f"{type(error).__name__}: {error}"
    if attempts >= MAX_ATTEMPTS:
        db.execute("UPDATE jobs SET last_error = ?, status = 'dead' "
                   "WHERE id = ?", (message, job_id))
        return None
    wait = backoff(attempts, dice.random())  # full jitter: 0 up to the ceiling
    db.execute("UPDATE jobs SET status = 'queued', run_at = ?, last_error = ? "
               "WHERE id = ?", (time.time() + wait, message, job_id))
    return wait


def work(db, seed):
    """Work until no job is queued, sleeping until the next one is due."""
    while True:
        job = claim(db)
        if job is None:
            (due,) = db.execute("SELECT min(run_at) FROM jobs "
                                "WHERE status = 'queued'").fetchone()
            if due is None:
                return
            time.sleep(max(0.0, due - time.time()))
            continue
        job_id, kind, args, attempts = job
        dice.seed(f"{seed} {job_id} {attempts}")  # fresh luck: see the text
        args = json.loads(args)
        amount = dollars(args["amount_cents"])
        what = f"job {job_id}, attempt {attempts}: {kind} {amount}"
        try:
            charge_card(db, **args)
        except (ConnectionError, TimeoutError) as error:
            wait = fail(db, job_id, attempts, error)
            then = ("dead, giving up" if wait is None
                    else f"retry in {wait:.2f} s")
            print(f"{what}: {type(error).__name__}: {error}; {then}")
        else:
            db.execute("UPDATE jobs SET status = 'done' WHERE id = ?",
                       (job_id,))
            print(f"{what}: done")


def setup(db):
    db.executescript("DELETE FROM jobs; DELETE FROM accounts")
    db.execute("INSERT INTO accounts VALUES ('alice', 10000)")
    for order_id in (1, 2, 3, 4, 5):
        args = {"order_id": order_id, "account": "alice", "amount_cents": 1000}
        db.execute("INSERT INTO jobs (args, kind) VALUES (?, 'charge')",
                   (json.dumps(args),))
    print("alice has $100.00; five $10.00 charges are queued")


def report(db):
    counts = dict(db.execute(
        "SELECT status, count(*) FROM jobs GROUP BY status"))
    print(f"jobs: {counts.get('done', 0)} done, {counts.get('dead', 0)} dead")
    for job_id, error in db.execute(
            "SELECT id, last_error FROM jobs WHERE status = 'dead'"):
        print(f"  job {job_id} is dead; its last error: {error}")
    (balance,) = db.execute("SELECT balance_cents FROM accounts").fetchone()
    paid, owed = 10000 - balance, 1000 * counts.get("done", 0)
    print(f"alice paid {dollars(paid)} for orders worth {dollars(owed)}")
    if paid != owed:
        print(f"alice was charged {dollars(paid - owed)} too much")


def main():
    parser = argparse.ArgumentParser(
        description="Charging a card through a flaky bank.")
    parser.add_argument("command", choices=["setup", "work", "report"])
    parser.add_argument("--seed", type=int, default=random.randrange(10**9))
    options = parser.parse_args()
    db = connect()
    if options.command == "work":
        work(db, options.seed)
    else:
        {"setup": setup, "report": report}[options.command](db)


if __name__ == "__main__":
    main()
