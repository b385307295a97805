# Exercise 5: Two Workers and a Race.
# Two workers share one queue. claim_naive looks for a job, then marks it,
# with a deliberate gap in between, and both workers send the same emails.
# claim_atomic looks and marks in one statement, and each email goes once.
#
# Run it:   python3 ex05_two_workers.py reset
#           python3 ex05_two_workers.py work naive        (terminal 1)
#           python3 ex05_two_workers.py work naive        (terminal 2)
#           python3 ex05_two_workers.py enqueue ann@example.com \
#               bob@example.com cat@example.com
#           python3 ex05_two_workers.py list
#           (then the same again with: work atomic)

import json
import os
import sqlite3
import sys
import time

DATABASE = "ex05.db"
OUTBOX = "outbox.txt"            # our pretend mail server: one line per email
MAIL_SERVER_SECONDS = 2
POLL_SECONDS = 0.1               # how long an idle worker sleeps between looks
RACE_GAP_SECONDS = 0.3           # wide to show the race; real gaps are shorter
WORKER = f"worker {os.getpid()}"  # the process id tells workers apart

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id      INTEGER PRIMARY KEY,
    status  TEXT NOT NULL DEFAULT 'queued', -- queued, running or done
    kind    TEXT NOT NULL,
    args    TEXT NOT NULL,                  -- the job's arguments, as JSON
    worker  TEXT                            -- who claimed it last
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


def claim_naive(db):
    """Check, then act: two statements, with room between them."""
    oldest = db.execute("SELECT id, kind, args FROM jobs "
                        "WHERE status = 'queued' "
                        "ORDER BY id ASC LIMIT 1").fetchone()
    if oldest is None:
        return None
    time.sleep(RACE_GAP_SECONDS)                 # between looking and marking
    db.execute("UPDATE jobs SET worker = ?, status = 'running' WHERE id = ?",
               (WORKER, oldest[0]))
    return oldest


def claim_atomic(db):
    """Look and mark in one statement. SQLite lets one connection write at a
    time, so no other claim can look until this one has marked."""
    return db.execute("""
        UPDATE jobs SET worker = ?, status = 'running'
        WHERE id = (SELECT id FROM jobs WHERE status = 'queued'
                    ORDER BY id ASC LIMIT 1)
        RETURNING id, kind, args
    """, (WORKER,)).fetchone()


CLAIMS = {"naive": claim_naive, "atomic": claim_atomic}


def ack(db, job_id):
    db.execute("UPDATE jobs SET status = 'done' WHERE id = ?", (job_id,))


def work(db, claim):
    print(f"{WORKER}: waiting for jobs (Ctrl-C to stop)")
    busy = False
    while True:
        job = claim(db)                                  # 1. claim
        if job is None:
            if busy:
                print(f"{WORKER}: no jobs left, waiting for more")
            busy = False
            time.sleep(POLL_SECONDS)
            continue
        busy = True
        job_id, kind, args = job
        print(f"{WORKER}: claimed job {job_id}, {kind} {args}")
        HANDLERS[kind](**json.loads(args))               # 2. do
        ack(db, job_id)                                  # 3. acknowledge
        print(f"{WORKER}: job {job_id} done")


# ---- the command line

def show(db):
    print(" id  status   args                            worker")
    for job_id, status, args, worker in db.execute(
            "SELECT id, status, args, worker FROM jobs ORDER BY id"):
        print(f"{job_id:3}  {status:7}  {args:30}  {worker or '-'}")


def main(args):
    command = args[0] if args else "help"
    db = connect()
    if command == "enqueue":
        for address in args[1:]:
            job_id = enqueue(db, "welcome_email", address=address)
            print(f"queued job {job_id}: welcome_email to {address}")
    elif command == "list":
        show(db)
    elif command == "work" and len(args) > 1 and args[1] in CLAIMS:
        try:
            work(db, CLAIMS[args[1]])
        except KeyboardInterrupt:
            print(f"\n{WORKER}: stopped")
    elif command == "reset":
        db.execute("DELETE FROM jobs")
        open(OUTBOX, "w").close()
        print("no jobs, empty outbox")
    else:
        sys.exit("usage: python3 ex05_two_workers.py "
                 "enqueue ADDRESS... | list | work naive|atomic | reset")


if __name__ == "__main__":
    main(sys.argv[1:])                  # the words typed after the file's name
