# tinyq: the whole course in one small library. A job queue in a SQLite
# file: leases, heartbeats, fencing tokens, retries with full jitter, dead
# jobs, producer idempotency keys, and Job.complete().
#
# Use it:   queue = tinyq.Queue("shop.db")
#           @queue.handler("welcome_email")
#           def welcome(job): ...
#           queue.enqueue("welcome_email", {"address": "ann@example.com"})
#           while queue.work_one(): pass

import contextlib
import json
import random
import sqlite3
import time

BUSY_SECONDS = 10.0              # how long to wait for another writer's lock
STATUSES = ("queued", "running", "done", "dead")


def ceiling(attempts, base, cap):
    """The longest wait after failed attempt number `attempts` (1, 2, ...):
    base, doubled after each attempt, never more than cap.

    >>> [ceiling(attempts, base=0.1, cap=0.5) for attempts in (1, 2, 3, 4)]
    [0.1, 0.2, 0.4, 0.5]
    """
    return min(cap, base * 2 ** (attempts - 1))


class LeaseLost(Exception):
    """The job is not ours any more: our lease ran out, and it was claimed
    again or buried."""


class Permanent(Exception):
    """Raised by a handler whose error every retry would meet again: dead
    at once."""


class Job:
    def __init__(self, queue, id, kind, args, attempts, token):
        self.queue, self.id, self.kind, self.args = queue, id, kind, args
        self.attempts = attempts                         # this claim's number
        self.token = token                               # and its token
        self.completed = False                           # set by complete()

    @contextlib.contextmanager
    def complete(self):
        """Write inside this block with the connection it gives you: your
        writes and the job's `done` commit together, or neither does."""
        with self.queue.transaction() as db:
            yield db
            self.queue.finish(self, "done")   # LeaseLost rolls back the block
        self.completed = True

    def heartbeat(self):
        """For work that may outlast a lease: beat between its steps."""
        self.queue.heartbeat(self)


class Queue:
    # The partial indexes hold only the rows in their status: the done and
    # dead jobs, which pile up forever, cost a claim nothing.
    SCHEMA = f"""
        CREATE TABLE IF NOT EXISTS jobs (
            id            INTEGER PRIMARY KEY,
            status        TEXT NOT NULL DEFAULT 'queued'
                          CHECK (status IN {STATUSES}),
            kind          TEXT NOT NULL,
            args          TEXT NOT NULL,               -- JSON
            attempts      INTEGER NOT NULL DEFAULT 0,  -- times claimed
            token         INTEGER NOT NULL DEFAULT 0,  -- the fencing token
            run_at        REAL NOT NULL,               -- not tried before this
            locked_until  REAL,                        -- when the lease ends
            last_error    TEXT,
            unique_key    TEXT UNIQUE                  -- the producer's key
        );
        CREATE INDEX IF NOT EXISTS jobs_waiting ON jobs (run_at)
            WHERE status = 'queued';
        CREATE INDEX IF NOT EXISTS jobs_leased ON jobs (locked_until)
            WHERE status = 'running';
    """
    ENQUEUE = """
        INSERT INTO jobs (kind, args, run_at, unique_key)
        VALUES (:kind, :args, :run_at, :key)
        ON CONFLICT (unique_key) DO NOTHING
        RETURNING id
    """
    # A job whose lease ran out on its last attempt is dead, not claimed again.
    BURY = """
        UPDATE jobs SET status = 'dead', last_error =
            'worker lost: the lease of attempt ' || attempts || ' ran out'
        WHERE status = 'running' AND locked_until < :now
          AND attempts >= :max_attempts
    """
    # Expired leases first, then the job due longest: two subqueries, each
    # stopping at its index's first entry. The token grows at every claim.
    CLAIM = """
        UPDATE jobs SET status = 'running', attempts = attempts + 1,
                        token = token + 1, locked_until = :now + :lease
        WHERE id = coalesce(
            (SELECT id FROM jobs
             WHERE status = 'running' AND locked_until < :now
             ORDER BY locked_until LIMIT 1),
            (SELECT id FROM jobs
             WHERE status = 'queued' AND run_at <= :now
             ORDER BY run_at, id LIMIT 1))
        RETURNING id, kind, args, attempts, token
    """
    # The fence: a claimed job's row changes only if it is still running
    # under the token of the claim that asks.
    FINISH = """
        UPDATE jobs SET status = :status,
                        last_error = coalesce(:error, last_error),
                        run_at = coalesce(:run_at, run_at)
        WHERE id = :id AND token = :token AND status = 'running'
    """
    HEARTBEAT = """
        UPDATE jobs SET locked_until = :locked_until
        WHERE id = :id AND token = :token AND status = 'running'
    """

    def __init__(self, path, *, lease=30.0, max_attempts=5, backoff_base=0.1,
                 backoff_cap=10.0, clock=time.time, rng=None):
        self.lease, self.max_attempts = lease, max_attempts
        self.backoff_base, self.backoff_cap = backoff_base, backoff_cap
        self.clock = clock                    # injected: tests can move time
        self.rng = random.Random() if rng is None else rng   # to repeat runs
        self.handlers = {}
        self.db = self.connect(path)

    def connect(self, path):
        """The database at path, open, with the jobs table made if need be."""
        # isolation_level=None: we write BEGIN and COMMIT ourselves.
        db = sqlite3.connect(path, isolation_level=None, timeout=BUSY_SECONDS)
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        db.executescript(self.SCHEMA)
        return db

    def close(self):
        self.db.close()

    @contextlib.contextmanager
    def transaction(self):
        """BEGIN ... COMMIT, or ROLLBACK on error; in one already, join it."""
        if self.db.in_transaction:
            yield self.db
            return
        self.db.execute("BEGIN IMMEDIATE")   # lock now: no one writes under us
        try:
            yield self.db
            self.db.execute("COMMIT")
        except BaseException:
            if self.db.in_transaction:       # SQLite may have rolled back
                self.db.execute("ROLLBACK")
            raise

    def enqueue(self, kind, args, unique_key=None, delay=0):
        """The new job's id, or None if a job with unique_key exists."""
        rows = self.db.execute(self.ENQUEUE, {
            "kind": kind, "args": json.dumps(args),
            "run_at": self.clock() + delay, "key": unique_key}).fetchall()
        return rows[0][0] if rows else None

    def counts(self):
        """How many jobs are in each status."""
        counts = dict.fromkeys(STATUSES, 0)
        counts.update(self.db.execute(
            "SELECT status, count(*) FROM jobs GROUP BY status"))
        return counts

    def jobs(self):
        """Every job, oldest first, as a dict of its columns, args decoded."""
        cursor = self.db.execute("SELECT * FROM jobs ORDER BY id")
        columns = [column[0] for column in cursor.description]
        jobs = [dict(zip(columns, row)) for row in cursor]
        for job in jobs:
            job["args"] = json.loads(job["args"])
        return jobs

    def handler(self, kind):
        """Decorator: @queue.handler("kind") files fn(job) under that kind."""
        def register(fn):
            self.handlers[kind] = fn
            return fn
        return register

    def claim(self):
        """Bury the jobs out of attempts, then take one due job, or None."""
        values = {"now": self.clock(), "lease": self.lease,
                  "max_attempts": self.max_attempts}
        with self.transaction() as db:
            db.execute(self.BURY, values)
            rows = db.execute(self.CLAIM, values).fetchall()
        if not rows:
            return None
        job_id, kind, args, attempts, token = rows[0]
        return Job(self, job_id, kind, json.loads(args), attempts, token)

    def wait(self, seconds):
        """What an idle worker does before it looks again: sleep."""
        time.sleep(seconds)

    def finish(self, job, status, error=None, run_at=None):
        """Move a running job to `status`, if it is still ours."""
        self.fenced(self.FINISH, job, status=status, error=error,
                    run_at=run_at)

    def heartbeat(self, job):
        """Extend the job's lease to a full lease from now, if still ours."""
        self.fenced(self.HEARTBEAT, job,
                    locked_until=self.clock() + self.lease)

    def fenced(self, statement, job, **values):
        """Run an UPDATE behind the fence: if it changed no row, we lost
        the job."""
        values.update(id=job.id, token=job.token)
        if self.db.execute(statement, values).rowcount == 0:
            raise LeaseLost(f"job {job.id}: the lease ran out "
                            "and the job is not ours now")

    def fail(self, job, error):
        """Queue the job again after a backoff, or bury it: Permanent, or
        out of attempts."""
        message = f"{type(error).__name__}: {error}"
        if isinstance(error, Permanent) or job.attempts >= self.max_attempts:
            self.finish(job, "dead", message)
        else:
            limit = ceiling(job.attempts, self.backoff_base, self.backoff_cap)
            wait = self.rng.uniform(0, limit)                # full jitter
            self.finish(job, "queued", message, self.clock() + wait)

    def work_one(self):
        """Claim one job, run its handler, write down how it went. False if
        none was due."""
        job = self.claim()
        if job is None:
            return False
        try:
            self.handlers[job.kind](job)          # unknown kinds fail too
            if not job.completed:
                self.finish(job, "done")
        except LeaseLost:
            pass                   # not ours now, nor is how it ended
        except Exception as error:                # not Ctrl-C: the lease ends
            if job.completed:
                raise                             # done: the bug came after
            with contextlib.suppress(LeaseLost):  # a late failure: the same
                self.fail(job, error)
        return True
