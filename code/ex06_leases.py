# Exercise 6: When Workers Die: Leases.
# A claim is now a lease: it runs out at locked_until. A job whose worker
# went silent is claimed again once its lease has expired, whether that
# worker died or is only slow. The flags make a worker die on purpose,
# with os._exit(1): no cleanup, like a power cut.
#
# Run it:   python3 ex06_leases.py reset
#           python3 ex06_leases.py enqueue ann@example.com
#           python3 ex06_leases.py work --crash-before-send
#                                       (or --crash-after-send)
#           python3 ex06_leases.py list
#           python3 ex06_leases.py work                (a healthy worker)
#           python3 ex06_leases.py work --lease 1      (shorter than the work)

import argparse
import json
import os
import sqlite3
import sys
import time

DATABASE = "ex06.db"
OUTBOX = "outbox.txt"            # our pretend mail server: one line per email
MAIL_SERVER_SECONDS = 2
POLL_SECONDS = 0.1               # how long an idle worker sleeps between looks
LEASE_SECONDS = 3                # how long a claim lasts; the work takes 2 s
WORKER = f"worker {os.getpid()}"  # the process id tells workers apart

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id            INTEGER PRIMARY KEY,
    status        TEXT NOT NULL DEFAULT 'queued', -- queued, running or done
    kind          TEXT NOT NULL,
    args          TEXT NOT NULL,                  -- its arguments, as JSON
    worker        TEXT,                           -- who claimed it last
    attempts      INTEGER NOT NULL DEFAULT 0,     -- how often it was claimed
    locked_until  REAL                            -- when the lease runs out
)
"""


def connect():
    # isolation_level=None: each statement is committed as soon as it runs
    db = sqlite3.connect(DATABASE, isolation_level=None)
    db.execute(SCHEMA)
    return db


# ---- the work

def send_welcome_email(address):
    time.sleep(MAIL_SERVER_SECONDS)              # talking to the mail server
    with open(OUTBOX, "a") as outbox:
        outbox.write(f"welcome email to {address}, sent by {WORKER}\n")


HANDLERS = {"welcome_email": send_welcome_email}


# ---- the queue

def enqueue(db, kind, **args):
    cursor = db.execute("INSERT INTO jobs (kind, args) VALUES (?, ?)",
                        (kind, json.dumps(args)))
    return cursor.lastrowid


def claim(db, lease):
    """Take a queued job, or a running one whose lease has expired."""
    now = time.time()
    return db.execute("""
        UPDATE jobs SET worker = ?, status = 'running',
                        attempts = attempts + 1, locked_until = ?
        WHERE id = (SELECT id FROM jobs
                    WHERE status = 'queued'
                       OR (status = 'running' AND locked_until < ?)
                    ORDER BY id LIMIT 1)
        RETURNING id, kind, args, attempts
    """, (WORKER, now + lease, now)).fetchone()


def ack(db, job_id):
    db.execute("UPDATE jobs SET status = 'done' WHERE id = ?", (job_id,))


def crash(moment):
    print(f"{WORKER}: crashing {moment}!", flush=True)  # _exit would not flush
    os._exit(1)                                         # no cleanup or goodbye


def work(db, lease, crash_before_send=False, crash_after_send=False):
    print(f"{WORKER}: waiting for jobs (Ctrl-C to stop)")
    busy = False
    while True:
        job = claim(db, lease)                           # 1. claim
        if job is None:
            if busy:
                print(f"{WORKER}: no jobs left, waiting for more")
            busy = False
            time.sleep(POLL_SECONDS)
            continue
        busy = True
        job_id, kind, args, attempts = job
        print(f"{WORKER}: claimed job {job_id} (attempt {attempts}), "
              f"lease {lease:g} s")
        if crash_before_send:
            crash("before sending")
        HANDLERS[kind](**json.loads(args))               # 2. do
        if crash_after_send:
            crash("after sending, before the ack")
        ack(db, job_id)                                  # 3. acknowledge
        print(f"{WORKER}: job {job_id} done")


# ---- the command line

def show(db):
    print(" id  status   attempts  lease         worker")
    now = time.time()
    for job_id, status, attempts, locked_until, worker in db.execute(
            "SELECT id, status, attempts, locked_until, worker FROM jobs "
            "ORDER BY id"):
        lease = "-"
        if status == "running":
            left = locked_until - now
            lease = f"{left:.2f} s left" if left > 0 else "EXPIRED"
        print(f"{job_id:3}  {status:7}  {attempts:8}  {lease:12}  "
              f"{worker or '-'}")


def main(args):
    parser = argparse.ArgumentParser(description="A job queue with leases.")
    parser.add_argument("command",
                        choices=["enqueue", "list", "work", "reset"])
    parser.add_argument("addresses", nargs="*", help="for enqueue")
    parser.add_argument("--lease", type=float, default=LEASE_SECONDS,
                        help="seconds a claim lasts (default %(default)s)")
    crash_when = parser.add_mutually_exclusive_group()
    crash_when.add_argument("--crash-before-send", action="store_true")
    crash_when.add_argument("--crash-after-send", action="store_true")
    options = parser.parse_args(args)

    db = connect()
    if options.command == "enqueue":
        for address in options.addresses:
            job_id = enqueue(db, "welcome_email", address=address)
            print(f"queued job {job_id}: welcome_email to {address}")
    elif options.command == "list":
        show(db)
    elif options.command == "work":
        try:
            work(db, options.lease, options.crash_before_send,
                 options.crash_after_send)
        except KeyboardInterrupt:
            print(f"\n{WORKER}: stopped")
    elif options.command == "reset":
        db.execute("DELETE FROM jobs")
        open(OUTBOX, "w").close()
        print("no jobs, empty outbox")


if __name__ == "__main__":
    main(sys.argv[1:])                  # the words typed after the file's name
