# The capstone's outside world: GIVEN. Download this file from the guide and
# put it in your capstone folder, beside tinyq.py; do not type it. A mail
# provider and a bank, each with an idempotency-key store, in their own
# SQLite file, behind a bad network: 15% of requests never arrive, and 15%
# arrive, take effect, and lose their reply on the way back. The shop cannot
# see which happened. And the supervisor that restarts the workers the
# chaos monkey kills, as systemd or Kubernetes would. shop.py imports the
# world; chaos.py runs its workers under the supervisor.
#
# Break It: TINYQ_NO_KEYS=1 python3 chaos.py  (every key becomes a random one)

import contextlib
import multiprocessing
import multiprocessing.connection
import os
import random
import sqlite3
import sys
import time
import uuid

LOST_REQUEST = 0.15              # the request never arrives: nothing happens
LOST_REPLY = 0.15                # it happens, but the answer never comes back
NO_KEYS = os.environ.get("TINYQ_NO_KEYS") == "1"

# Each table is a service's record of what it did. A second request with a
# key it has seen and the same inputs does nothing new: it counts a repeat
# and answers with the first one's id. The same key with other inputs is
# refused (KeyReused), as Stripe refuses it: answering with the first
# request's id would report something done that was never asked for.
SCHEMA = """
CREATE TABLE IF NOT EXISTS emails (
    id       INTEGER PRIMARY KEY,
    key      TEXT NOT NULL UNIQUE,
    address  TEXT NOT NULL,
    text     TEXT NOT NULL,
    repeats  INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS charges (
    id        INTEGER PRIMARY KEY,
    key       TEXT NOT NULL UNIQUE,
    customer  INTEGER NOT NULL,
    cents     INTEGER NOT NULL,
    repeats   INTEGER NOT NULL DEFAULT 0
);
"""


class KeyReused(Exception):
    """The key came before with other inputs: the service did nothing."""


class World:
    def __init__(self, path, rng=None):
        self.rng = random.Random() if rng is None else rng
        self.db = sqlite3.connect(path, isolation_level=None, timeout=10.0)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.executescript(SCHEMA)

    def close(self):
        self.db.close()

    def send_email(self, address, text, key):
        """The mail provider. Returns the message's id."""
        with self.network("mail provider"):
            return self.once("mail provider", key, """
                INSERT INTO emails (key, address, text) VALUES (?, ?, ?)
                ON CONFLICT (key) DO UPDATE SET repeats = repeats + 1
                WHERE address = excluded.address AND text = excluded.text
                RETURNING id
            """, (self.keep(key), address, text))

    def charge(self, customer, cents, key):
        """The bank. Returns the charge's id."""
        with self.network("bank"):
            return self.once("bank", key, """
                INSERT INTO charges (key, customer, cents) VALUES (?, ?, ?)
                ON CONFLICT (key) DO UPDATE SET repeats = repeats + 1
                WHERE customer = excluded.customer AND cents = excluded.cents
                RETURNING id
            """, (self.keep(key), customer, cents))

    def once(self, service, key, statement, values):
        """Run a service's one statement: a new key inserts, a known key with
        the same inputs counts a repeat; either way it returns the id. A known
        key with other inputs updates nothing and returns no row."""
        row = self.db.execute(statement, values).fetchone()
        if row is None:
            raise KeyReused(f"{service}: key {key} was first used "
                            "with other inputs")
        return row[0]

    def keep(self, key):
        """The key as it reaches the service, or, with TINYQ_NO_KEYS=1, a new
        random one on every call: the mistake of Chapter 8."""
        return f"random-{uuid.uuid4()}" if NO_KEYS else key

    @contextlib.contextmanager
    def network(self, service):
        """Around each request: it may be lost on the way there, or its
        reply may be lost on the way back, after the service acted."""
        if self.rng.random() < LOST_REQUEST:
            raise ConnectionError(f"{service}: the request never arrived")
        yield
        if self.rng.random() < LOST_REPLY:
            raise TimeoutError(f"{service}: the reply never came back")


# ---- the supervisor

TIME_LIMIT_SECONDS = 60          # a chaos run that takes longer is stuck


def supervise(work, args, workers, crashed):
    """Run `workers` processes of work(*args) until every one has ended,
    restarting each that exits with the status `crashed` (the monkey's
    kill). Returns how many crashed. A worker that fails any other way is a
    bug, and a run past TIME_LIMIT_SECONDS is stuck: either ends the run."""
    def start():
        worker = multiprocessing.Process(target=work, args=args)
        worker.start()
        return worker

    running = [start() for _ in range(workers)]
    crashes = 0
    deadline = time.monotonic() + TIME_LIMIT_SECONDS
    while running:
        sentinels = [worker.sentinel for worker in running]
        multiprocessing.connection.wait(
            sentinels, timeout=deadline - time.monotonic())
        if time.monotonic() > deadline:
            give_up(running, "stuck: jobs still unfinished after "
                             f"{TIME_LIMIT_SECONDS} s")
        ended = [worker for worker in running if worker.exitcode is not None]
        for worker in ended:
            running.remove(worker)
            if worker.exitcode == crashed:
                crashes += 1
                running.append(start())
            elif worker.exitcode != 0:      # a bug: its traceback is above
                give_up(running, "a worker failed with exit status "
                                 f"{worker.exitcode}")
    return crashes


def give_up(running, reason):
    """Stop every worker and end with exit status 2: no audit, no verdict."""
    for worker in running:
        worker.kill()
    print(reason, file=sys.stderr)
    sys.exit(2)
