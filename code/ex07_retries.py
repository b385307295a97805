# Exercise 7: Retry: Trying Again, Politely.
# A worker charges Alice's card through a flaky bank. Failed jobs wait
# (run_at) and are retried with exponential backoff and jitter, up to
# MAX_ATTEMPTS, after which they are dead. Every job ends up done, every log
# line looks reasonable, and Alice still pays too much.
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
BANK_SECONDS = 0.2               # each call to the bank takes this long
LOST_REQUEST = 0.3               # chance a request never reaches the bank
LOST_REPLY = 0.3                 # chance the bank charges, then the reply is lost
SEED = None                      # the run's luck: --seed N, or a new one each run

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id          INTEGER PRIMARY KEY,
    status      TEXT NOT NULL DEFAULT 'queued',  -- queued, running, done or dead
    kind        TEXT NOT NULL,
    args        TEXT NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    run_at      REAL NOT NULL DEFAULT 0,         -- not to be tried before this
    last_error  TEXT
);
CREATE TABLE IF NOT EXISTS accounts (
    name           TEXT PRIMARY KEY,
    balance_cents  INTEGER NOT NULL
);
"""

# Two sets of dice, both set by the seed. The network's decide which requests
# and replies are lost; the worker's decide how long each retry waits. Kept
# apart, a change to the waits cannot change what the network does.
network = random.Random()
jitter = random.Random()


def connect():
    db = sqlite3.connect(DATABASE, isolation_level=None)
    db.executescript(SCHEMA)
    return db


def dollars(cents):
    return f"${cents / 100:.2f}"


# ---- the bank: a service we do not control. It lives in our database
# ---- file only so that you can look at Alice's balance.

def bank_charge(db, account, amount_cents, *, sleep=time.sleep):
    sleep(BANK_SECONDS)
    roll = network.random()
    if roll < LOST_REQUEST:
        raise ConnectionError("could not reach the bank")
    db.execute("UPDATE accounts SET balance_cents = balance_cents - ? WHERE name = ?",
               (amount_cents, account))
    if roll < LOST_REQUEST + LOST_REPLY:
        raise TimeoutError("no reply from the bank")    # but the money is gone
    return "approved"


# ---- the handler

def charge_card(db, order_id, account, amount_cents):
    bank_charge(db, account, amount_cents)


HANDLERS = {"charge": charge_card}


# ---- retries

def backoff(attempt, fraction):
    """Seconds to wait after failed attempt number `attempt` (1, 2, ...): a
    fraction (0 to 1) of a ceiling that doubles each time, up to the cap."""
    return fraction * min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1))


def claim(db):
    """The job that has been due longest, if any job is due."""
    return db.execute("""
        UPDATE jobs SET status = 'running', attempts = attempts + 1
        WHERE id = (SELECT id FROM jobs WHERE status = 'queued' AND run_at <= ?
                    ORDER BY run_at, id LIMIT 1)
        RETURNING id, kind, args, attempts
    """, (time.time(),)).fetchone()


def finish(db, job_id):
    db.execute("UPDATE jobs SET status = 'done' WHERE id = ?", (job_id,))


def fail(db, job_id, attempts, error):
    """Put the job back to wait, or bury it: the wait in seconds, or None."""
    message = f"{type(error).__name__}: {error}"
    if attempts >= MAX_ATTEMPTS:
        db.execute("UPDATE jobs SET last_error = ?, status = 'dead' WHERE id = ?",
                   (message, job_id))
        return None
    wait = backoff(attempts, jitter.random())      # full jitter: anywhere up to the ceiling
    db.execute("UPDATE jobs SET status = 'queued', run_at = ?, last_error = ? WHERE id = ?",
               (time.time() + wait, message, job_id))
    return wait


def work(db):
    """Work until no job is queued, sleeping until the next one is due."""
    while True:
        job = claim(db)
        if job is None:
            (due,) = db.execute("SELECT min(run_at) FROM jobs WHERE status = 'queued'").fetchone()
            if due is None:
                return
            time.sleep(max(0.0, due - time.time()))
            continue
        job_id, kind, args, attempts = job
        # Make-believe, not part of a real worker: the network's luck on this
        # attempt of this job depends on the seed alone, so another retry
        # policy, which changes the waits and the order, meets the same luck.
        network.seed(f"{SEED} {job_id} {attempts}")
        args = json.loads(args)
        what = f"job {job_id}, attempt {attempts}: {kind} {dollars(args['amount_cents'])}"
        try:
            HANDLERS[kind](db, **args)
        except (ConnectionError, TimeoutError) as error:
            wait = fail(db, job_id, attempts, error)
            then = "dead, giving up" if wait is None else f"retry in {wait:.2f} s"
            print(f"{what}: {type(error).__name__}: {error}; {then}")
        else:
            finish(db, job_id)
            print(f"{what}: done")


# ---- the command line

def setup(db):
    db.execute("DELETE FROM jobs")
    db.execute("DELETE FROM accounts")
    db.execute("INSERT INTO accounts VALUES ('alice', 10000)")
    for order_id in (1, 2, 3, 4, 5):
        args = {"order_id": order_id, "account": "alice", "amount_cents": 1000}
        db.execute("INSERT INTO jobs (args, kind) VALUES (?, 'charge')", (json.dumps(args),))
    print("alice has $100.00; five $10.00 charges are queued")


def report(db):
    counts = dict(db.execute("SELECT status, count(*) FROM jobs GROUP BY status"))
    print(f"jobs: {counts.get('done', 0)} done, {counts.get('dead', 0)} dead")
    for job_id, error in db.execute(
            "SELECT id, last_error FROM jobs WHERE status = 'dead' ORDER BY id"):
        print(f"  job {job_id} is dead; its last error: {error}")
    (balance,) = db.execute("SELECT balance_cents FROM accounts WHERE name = 'alice'").fetchone()
    (owed,) = db.execute("SELECT count(*) * 1000 FROM jobs WHERE status = 'done'").fetchone()
    paid = 10000 - balance
    print(f"alice paid {dollars(paid)} for orders worth {dollars(owed)}")
    if paid != owed:
        print(f"alice was charged {dollars(paid - owed)} too much")


def main():
    parser = argparse.ArgumentParser(description="Charging a card through a flaky bank.")
    parser.add_argument("command", choices=["setup", "work", "report"])
    parser.add_argument("--seed", type=int, default=random.randrange(10**9),
                        help="repeat the same run of chances")
    options = parser.parse_args()
    global SEED
    SEED = options.seed
    jitter.seed(SEED)
    db = connect()
    {"setup": setup, "work": work, "report": report}[options.command](db)


if __name__ == "__main__":
    main()
