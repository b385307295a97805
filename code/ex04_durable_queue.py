# Exercise 4: A Durable Queue and a Worker.
# The queue is a table in a SQLite file, so jobs outlive every program.
# The producer and the worker are separate programs: run the worker in one
# terminal and enqueue jobs from another. Emails are lines in outbox.txt.
#
# Run it: python3 ex04_durable_queue.py reset   (an empty queue and outbox)
#         python3 ex04_durable_queue.py work    (terminal 1; Ctrl-C stops it)
#         python3 ex04_durable_queue.py enqueue ann@example.com bob@example.com
#         python3 ex04_durable_queue.py list

import json
import sqlite3
import sys
import time

DATABASE = "ex04.db"
OUTBOX = "outbox.txt"            # our pretend mail server: one line per email
MAIL_SERVER_SECONDS = 2
POLL_SECONDS = 0.5               # how long an idle worker sleeps between looks

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id      INTEGER PRIMARY KEY,
    status  TEXT NOT NULL DEFAULT 'queued', -- queued, running or done
    kind    TEXT NOT NULL,
    args    TEXT NOT NULL                   -- the job's arguments, as JSON
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
        outbox.write(f"welcome email to {address}\n")


HANDLERS = {"welcome_email": send_welcome_email}


# ---- the queue

def enqueue(db, kind, **args):
    cursor = db.execute("INSERT INTO jobs (kind, args) VALUES (?, ?)",
                        (kind, json.dumps(args)))
    return cursor.lastrowid


def claim(db):
    """Find the oldest queued job, then mark it running."""
    oldest = db.execute("SELECT id, kind, args FROM jobs "
                        "WHERE status = 'queued' "
                        "ORDER BY id ASC LIMIT 1").fetchone()
    if oldest is None:
        return None
    db.execute("UPDATE jobs SET status = 'running' WHERE id = ?", (oldest[0],))
    return oldest


def ack(db, job_id):
    db.execute("UPDATE jobs SET status = 'done' WHERE id = ?", (job_id,))


def work(db):
    print("worker: waiting for jobs (Ctrl-C to stop)")
    busy = False
    while True:
        job = claim(db)                                  # 1. claim
        if job is None:
            if busy:
                print("worker: no jobs left, waiting for more")
            busy = False
            time.sleep(POLL_SECONDS)
            continue
        busy = True
        job_id, kind, args = job
        print(f"worker: claimed job {job_id}, {kind} {args}")
        HANDLERS[kind](**json.loads(args))               # 2. do
        ack(db, job_id)                                  # 3. acknowledge
        print(f"worker: job {job_id} done")


# ---- the command line

def show(db):
    print(" id  status   kind           args")
    for job_id, status, kind, args in db.execute(
            "SELECT id, status, kind, args FROM jobs ORDER BY id"):
        print(f"{job_id:3}  {status:7}  {kind:13}  {args}")


def main(args):
    command = args[0] if args else "help"
    db = connect()
    if command == "enqueue":
        for address in args[1:]:
            job_id = enqueue(db, "welcome_email", address=address)
            print(f"queued job {job_id}: welcome_email to {address}")
    elif command == "list":
        show(db)
    elif command == "work":
        try:
            work(db)
        except KeyboardInterrupt:
            print("\nworker: stopped")
    elif command == "reset":
        db.execute("DELETE FROM jobs")
        open(OUTBOX, "w").close()
        print("no jobs, empty outbox")
    else:
        sys.exit("usage: python3 ex04_durable_queue.py "
                 "enqueue ADDRESS... | list | work | reset")


if __name__ == "__main__":
    main(sys.argv[1:])                  # the words typed after the file's name
