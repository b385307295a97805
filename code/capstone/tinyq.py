# tinyq: the whole course in one small library. A job queue in a SQLite
# file, with leases (a claim runs out; a heartbeat extends it), fencing
# tokens, retries (backoff with full jitter, then dead; a Permanent error
# is dead at once), producer idempotency keys (unique_key), and
# Job.complete(), which commits a handler's own writes together with the
# job's `done`.
#
# Use it:   import tinyq
#           queue = tinyq.Queue("shop.db")
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

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id            INTEGER PRIMARY KEY,
    status        TEXT NOT NULL DEFAULT 'queued'
                  CHECK (status IN ('queued', 'running', 'done', 'dead')),
    kind          TEXT NOT NULL,
    args          TEXT NOT NULL,                 -- JSON
    attempts      INTEGER NOT NULL DEFAULT 0,    -- how many times it was claimed
    token         INTEGER NOT NULL DEFAULT 0,    -- the latest claim's fencing token
    run_at        REAL NOT NULL,                 -- not to be tried before this
    locked_until  REAL,                          -- when that claim's lease runs out
    last_error    TEXT,
    unique_key    TEXT UNIQUE                    -- the producer's idempotency key
);
-- The claim asks two questions: which queued job has been due longest, and
-- which running job's lease ran out first. Each partial index answers one of
-- them by reading its first entry, and holds only the rows in that status:
-- the done and dead jobs, which pile up forever, are in neither, so a claim
-- costs the same with ten finished jobs or ten million.
CREATE INDEX IF NOT EXISTS jobs_waiting ON jobs (run_at) WHERE status = 'queued';
CREATE INDEX IF NOT EXISTS jobs_leased ON jobs (locked_until) WHERE status = 'running';
"""

# A job whose lease ran out after its last attempt is buried, not claimed
# again: a job that kills every worker that takes it (a poison message)
# would otherwise be handed out for ever, one dead worker after another.
BURY = """
UPDATE jobs SET status = 'dead',
                last_error = 'worker lost: the lease of attempt ' || attempts || ' ran out'
WHERE status = 'running' AND locked_until < :now AND attempts >= :max_attempts
"""

# Expired leases come first, so that a job whose worker died is taken up
# again at once, not left behind a backlog of queued jobs. Two subqueries,
# not one with OR, because each can stop at its index's first entry; an OR
# would sort every due job to find one.
# The token grows by one at every claim of the job, so each claim holds a
# larger token than every claim before it. It is not `attempts`: a person
# who replays a dead job may set its attempts back to 0, but a token must
# never be handed out twice.
CLAIM = """
UPDATE jobs SET status = 'running', attempts = attempts + 1, token = token + 1,
                locked_until = :now + :lease
WHERE id = coalesce(
    (SELECT id FROM jobs WHERE status = 'running' AND locked_until < :now
     ORDER BY locked_until LIMIT 1),
    (SELECT id FROM jobs WHERE status = 'queued' AND run_at <= :now
     ORDER BY run_at, id LIMIT 1))
RETURNING id, kind, args, attempts, token
"""


class LeaseLost(Exception):
    """Our lease ran out and the job was claimed again, or buried: it is not
    ours any more."""


class Permanent(Exception):
    """Raised by a handler: the job has failed for good, and is dead at once.
    For an error that every retry would meet again (a rejection, not bad
    luck): `raise tinyq.Permanent("why")`, or `raise tinyq.Permanent(error)
    from error` to keep another error's words."""


class Job:
    def __init__(self, queue, id, kind, args, attempts, token):
        self.queue = queue
        self.id = id
        self.kind = kind
        self.args = args
        self.attempts = attempts
        self.token = token
        self.completed = False

    @contextlib.contextmanager
    def complete(self):
        """Write inside this block with the connection it gives you: your
        writes and the job's `done` commit together, or neither does."""
        with self.queue.transaction() as db:
            yield db
            self.queue.finish(self, "done")   # LeaseLost here rolls back the block
        self.completed = True

    def heartbeat(self):
        """Extend the lease to a full lease from now, if the job is still
        ours. For work that may outlast a lease: beat between its steps."""
        changed = self.queue.db.execute("""
            UPDATE jobs SET locked_until = ?
            WHERE id = ? AND token = ? AND status = 'running'
        """, (self.queue.clock() + self.queue.lease, self.id, self.token)).rowcount
        if changed == 0:
            raise LeaseLost(f"job {self.id}: the lease ran out and the job is not ours now")


class Queue:
    dialect = "sqlite"             # the SQL that self.db speaks: shop.py writes in it

    def __init__(self, path, *, lease=30.0, max_attempts=5, backoff_base=0.1,
                 backoff_cap=10.0, clock=time.time, rng=None):
        self.lease = lease
        self.max_attempts = max_attempts
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self.clock = clock                    # injected, so tests can move time
        self.rng = random.Random() if rng is None else rng   # so runs can repeat
        self.handlers = {}
        self.db = self.connect(path)

    def connect(self, path):
        """The database at path, open, with the jobs table made if need be."""
        # isolation_level=None: we write BEGIN and COMMIT ourselves. The
        # timeout is SQLite's busy timeout: wait for the lock, do not fail.
        db = sqlite3.connect(path, isolation_level=None, timeout=BUSY_SECONDS)
        # WAL lets readers go on while one writer writes. NORMAL: a commit
        # does not wait for the disk. It survives the program dying at any
        # moment; a power cut may undo the last few commits, whole.
        db.execute("PRAGMA journal_mode = WAL")
        db.execute("PRAGMA synchronous = NORMAL")
        db.executescript(SCHEMA)
        return db

    def close(self):
        self.db.close()

    @contextlib.contextmanager
    def transaction(self):
        """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on an exception. Inside a
        transaction already, join it instead: the outer one commits."""
        if self.db.in_transaction:
            yield self.db
            return
        # IMMEDIATE takes the write lock now, so what we read cannot change
        # under us before we write.
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
            self.db.execute("COMMIT")
        except BaseException:
            if self.db.in_transaction:       # SQLite may have rolled back already
                self.db.execute("ROLLBACK")
            raise

    # ---- producers

    def enqueue(self, kind, args, unique_key=None, delay=0):
        """The new job's id, or None if a job with unique_key already exists."""
        rows = self.db.execute("""
            INSERT INTO jobs (kind, args, run_at, unique_key) VALUES (?, ?, ?, ?)
            ON CONFLICT (unique_key) DO NOTHING
            RETURNING id
        """, (kind, json.dumps(args), self.clock() + delay, unique_key)).fetchall()
        return rows[0][0] if rows else None

    def counts(self):
        """How many jobs are in each status."""
        counts = dict.fromkeys(STATUSES, 0)
        counts.update(self.db.execute("SELECT status, count(*) FROM jobs GROUP BY status"))
        return counts

    def jobs(self):
        """Every job, oldest first, as a dict of its columns, args decoded."""
        cursor = self.db.execute("SELECT * FROM jobs ORDER BY id")
        columns = [column[0] for column in cursor.description]
        jobs = [dict(zip(columns, row)) for row in cursor]
        for job in jobs:
            job["args"] = json.loads(job["args"])
        return jobs

    # ---- workers

    def handler(self, kind):
        """Decorator: @queue.handler("kind") registers fn(job) for that kind."""
        def register(fn):
            self.handlers[kind] = fn
            return fn
        return register

    def claim(self):
        """Take one job, due and queued or running on an expired lease: two
        workers can never both take it. First bury the expired jobs that
        have had all their attempts. None if no job is due."""
        now = self.clock()
        with self.transaction() as db:
            db.execute(BURY, {"now": now, "max_attempts": self.max_attempts})
            rows = db.execute(CLAIM, {"now": now, "lease": self.lease}).fetchall()
        if not rows:
            return None
        job_id, kind, args, attempts, token = rows[0]
        return Job(self, job_id, kind, json.loads(args), attempts, token)

    def wait(self, seconds):
        """What a worker does when claim() found nothing: wait, then look
        again. Here, simply sleep: a file cannot tell us when a job arrives."""
        time.sleep(seconds)

    def backoff(self, attempts):
        """Seconds to wait after failed attempt number `attempts` (1, 2, ...):
        full jitter, a random time up to a ceiling that doubles up to the cap."""
        ceiling = min(self.backoff_cap, self.backoff_base * 2 ** (attempts - 1))
        return self.rng.uniform(0, ceiling)

    def finish(self, job, status, error=None, run_at=None):
        """Move a running job to `status`, if it is still ours. The token is a
        fencing token (Kleppmann's term): a worker whose lease ran out holds
        an old one, so its late write changes no row and it learns it lost."""
        changed = self.db.execute("""
            UPDATE jobs SET status = :status, last_error = coalesce(:error, last_error),
                            run_at = coalesce(:run_at, run_at)
            WHERE id = :id AND token = :token AND status = 'running'
        """, {"status": status, "error": error, "run_at": run_at,
              "id": job.id, "token": job.token}).rowcount
        if changed == 0:
            raise LeaseLost(f"job {job.id}: the lease ran out and the job is not ours now")

    def fail(self, job, error):
        """Queue the job again after a backoff, or bury it: at once if the
        error is Permanent, else after max_attempts."""
        message = f"{type(error).__name__}: {error}"
        if isinstance(error, Permanent) or job.attempts >= self.max_attempts:
            self.finish(job, "dead", message)
        else:
            self.finish(job, "queued", message, self.clock() + self.backoff(job.attempts))

    def work_one(self):
        """Claim one job and run its handler. False if no job was due."""
        job = self.claim()
        if job is None:
            return False
        # A worker that lost its lease moves on: the job is not ours now, so
        # neither is writing down how it ended.
        with contextlib.suppress(LeaseLost):
            self.run(job)
        return True

    def run(self, job):
        """Run the job's handler, then record how it went: done, or failed."""
        try:
            self.handlers[job.kind](job)     # an unknown kind fails like any error
        except LeaseLost:
            raise                            # not the job failing: see work_one()
        except Exception as error:           # not Ctrl-C: then the lease runs out
            if job.completed:
                raise                        # done and committed; the bug came after
            self.fail(job, error)
            return
        if not job.completed:
            self.finish(job, "done")
