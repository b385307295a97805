# tinyq_pg: tinyq on PostgreSQL. The same Queue, Job, complete(), leases,
# fencing tokens, backoff, dead jobs and unique_key as tinyq.py: this file
# holds only what differs, and the differences are the lesson.
#   - SQL's placeholders are psycopg's %(name)s, not sqlite3's :name.
#   - Many workers write at once. A claim locks the one row it takes with
#     FOR UPDATE, and SKIP LOCKED steps over rows other claims hold, so
#     workers neither wait for each other nor take the same job.
#   - A worker with nothing to do waits on LISTEN, and enqueue() wakes it
#     with NOTIFY. It still looks again after the seconds wait() is given,
#     so a lost notification only delays a job.
#
# Needs a server, and psycopg 3.2 or newer (wait() uses the timeout and
# stop_after of its notifies()):  pip install "psycopg[binary]>=3.2"
#           queue = tinyq_pg.Queue("postgresql://localhost/shop")

import contextlib

import psycopg
from psycopg.pq import TransactionStatus

import tinyq
# tinyq's own exceptions, not copies: `except tinyq.LeaseLost` catches ours,
# and a handler may raise tinyq_pg.Permanent as it would tinyq.Permanent.
from tinyq import LeaseLost, Permanent, STATUSES

CHANNEL = "tinyq_jobs"           # enqueue() notifies it; idle workers listen
# Two processes that create the same table at the same moment can collide in
# PostgreSQL's catalogue; this lock, held to the end of the transaction that
# creates the schema, makes them take turns. Any number will do, if it is ours.
SCHEMA_LOCK = 7311


class Queue(tinyq.Queue):
    # An identity column numbers the jobs, like SQLite's INTEGER PRIMARY KEY.
    SCHEMA = f"""
        CREATE TABLE IF NOT EXISTS jobs (
            id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            status        text NOT NULL DEFAULT 'queued'
                          CHECK (status IN {STATUSES}),
            kind          text NOT NULL,
            args          text NOT NULL,              -- JSON, written by tinyq
            attempts      integer NOT NULL DEFAULT 0,
            token         bigint NOT NULL DEFAULT 0,
            run_at        double precision NOT NULL,  -- seconds, queue's clock
            locked_until  double precision,
            last_error    text,
            unique_key    text UNIQUE
        );
        CREATE INDEX IF NOT EXISTS jobs_waiting ON jobs (run_at, id)
            WHERE status = 'queued';
        CREATE INDEX IF NOT EXISTS jobs_leased ON jobs (locked_until)
            WHERE status = 'running';
    """
    ENQUEUE = """
        INSERT INTO jobs (kind, args, run_at, unique_key)
        VALUES (%(kind)s, %(args)s, %(run_at)s, %(key)s)
        ON CONFLICT (unique_key) DO NOTHING
        RETURNING id
    """
    # SKIP LOCKED here too: a job that another worker is burying or claiming
    # is that worker's business, not a reason to wait.
    BURY = """
        UPDATE jobs SET status = 'dead', last_error =
            'worker lost: the lease of attempt ' || attempts || ' ran out'
        WHERE id IN (SELECT id FROM jobs
                     WHERE status = 'running' AND locked_until < %(now)s
                           AND attempts >= %(max_attempts)s
                     FOR UPDATE SKIP LOCKED)
    """
    # Each subquery locks the row it returns (FOR UPDATE) and passes over
    # rows that other transactions have locked (SKIP LOCKED), so two claims
    # running at once take two different jobs, and neither waits. Without
    # FOR UPDATE, both subqueries could pick the same id; the UPDATE would
    # then wait for the first claim's commit and, under READ COMMITTED,
    # recheck only its own WHERE (`id = ...`), which still holds: one job,
    # two workers.
    # `attempts < max_attempts`: BURY skipped a locked row it should bury;
    # it is not ours to claim once more, so leave it for the next BURY.
    CLAIM = """
        UPDATE jobs SET status = 'running', attempts = attempts + 1,
                        token = token + 1, locked_until = %(now)s + %(lease)s
        WHERE id = coalesce(
            (SELECT id FROM jobs
             WHERE status = 'running' AND locked_until < %(now)s
                   AND attempts < %(max_attempts)s
             ORDER BY locked_until LIMIT 1 FOR UPDATE SKIP LOCKED),
            (SELECT id FROM jobs
             WHERE status = 'queued' AND run_at <= %(now)s
             ORDER BY run_at, id LIMIT 1 FOR UPDATE SKIP LOCKED))
        RETURNING id, kind, args, attempts, token
    """
    FINISH = """
        UPDATE jobs SET status = %(status)s,
                        last_error = coalesce(%(error)s, last_error),
                        run_at = coalesce(%(run_at)s, run_at)
        WHERE id = %(id)s AND token = %(token)s AND status = 'running'
    """
    HEARTBEAT = """
        UPDATE jobs SET locked_until = %(locked_until)s
        WHERE id = %(id)s AND token = %(token)s AND status = 'running'
    """

    def connect(self, dsn):
        """The database the address dsn names, open, with the jobs table made
        if need be, and listening for enqueue()'s notifications."""
        # autocommit: a statement outside transaction() commits on its own,
        # as with tinyq's isolation_level=None.
        db = psycopg.connect(dsn, autocommit=True)
        with db.transaction():
            db.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
            db.execute(self.SCHEMA)
        db.execute(f"LISTEN {CHANNEL}")
        return db

    @contextlib.contextmanager
    def transaction(self):
        """BEGIN ... COMMIT, or ROLLBACK on an exception. Inside a transaction
        already, join it instead: the outer one commits."""
        if self.db.info.transaction_status != TransactionStatus.IDLE:
            yield self.db
            return
        # No lock is taken here, unlike SQLite's BEGIN IMMEDIATE: other
        # workers go on writing, and each statement that must not race says
        # so itself (FOR UPDATE, or a WHERE that expects the row's state).
        with self.db.transaction():
            yield self.db

    def enqueue(self, kind, args, unique_key=None, delay=0):
        """tinyq's enqueue(), and a NOTIFY in the same transaction: sent when
        it commits, and not at all if it rolls back."""
        with self.transaction() as db:
            job_id = super().enqueue(kind, args, unique_key, delay)
            if job_id is not None:
                db.execute(f"NOTIFY {CHANNEL}")
        return job_id

    def wait(self, seconds):
        """What a worker does when claim() found nothing: wait until a job is
        enqueued somewhere (NOTIFY), or at most `seconds`, then look again."""
        for _ in self.db.notifies(timeout=seconds, stop_after=1):
            pass
