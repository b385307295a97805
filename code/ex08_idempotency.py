# Exercise 8: Idempotency: Making Repeats Harmless. Exercise 7 again, with
# the same flaky bank and the same retries, except that every charge carries
# an idempotency key named after its order. The bank remembers every key it
# has answered, and answers a retry as before instead of charging again:
# the same seed loses the same replies as in Exercise 7, and Alice pays
# what she owes.
#
# Run it:   python3 ex08_idempotency.py setup
#           python3 ex08_idempotency.py work --seed 1
#           python3 ex08_idempotency.py report

import argparse
import json
import random
import sqlite3
import time

DATABASE = "ex08.db"
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
-- kept by the bank: every key it has answered, and what it answered
CREATE TABLE IF NOT EXISTS bank_requests (
    idempotency_key  TEXT NOT NULL PRIMARY KEY,
    response         TEXT NOT NULL
);
"""


def connect():
    db = sqlite3.connect(DATABASE, isolation_level=None)
    db.executescript(SCHEMA)
    return db


def dollars(cents):
    return f"${cents / 100:.2f}"


def bank_charge(db, account, amount_cents, idempotency_key):
    """The bank: not our code. It is in our database only so that you can
    see Alice's balance."""
    time.sleep(BANK_SECONDS)
    roll = dice.random()
    if roll < LOST_REQUEST:
        raise ConnectionError("could not reach the bank")
    # Looking up the key, charging and noting the key are one step: BEGIN
    # IMMEDIATE takes the write lock first, so no other request with this
    # key can get between the lookup and the charge.
    db.execute("BEGIN IMMEDIATE")
    answered = db.execute(
        "SELECT response FROM bank_requests WHERE idempotency_key = ?",
        (idempotency_key,)).fetchone()
    if answered is not None:
        print(f"  bank: {idempotency_key} seen before; no new charge")
        (response,) = answered
    else:
        db.execute("UPDATE accounts SET balance_cents = balance_cents - ? "
                   "WHERE name = ?", (amount_cents, account))
        response = "approved"
        db.execute("INSERT INTO bank_requests VALUES (?, ?)",
                   (idempotency_key, response))
    db.execute("COMMIT")
    if roll < LOST_REQUEST + LOST_REPLY:
        raise TimeoutError("no reply from the bank")    # the key is remembered
    return response


def charge_card(db, order_id, account, amount_cents):
    # named after what the job is for, so every retry sends the same key
    key = f"charge-for-order-{order_id}"
    bank_charge(db, account, amount_cents, key)


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
    db.executescript("DELETE FROM jobs; DELETE FROM accounts; "
                     "DELETE FROM bank_requests")
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
