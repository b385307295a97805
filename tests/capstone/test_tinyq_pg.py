"""capstone/tinyq_pg.py, tinyq on PostgreSQL: what only PostgreSQL has, on
a new database of the private server for each test: claims that step over
each other, LISTEN and NOTIFY, old row versions, the planner's indexes.
Every promise tinyq.py shares with it is held in test_tinyq.py, which runs
on both backends (conftest.py); here every test is postgresql_only, and so
graded for capstone/tinyq_pg.py."""
import threading
import time

import psycopg
import pytest

pytestmark = [pytest.mark.postgresql_only, pytest.mark.exercise("capstone/tinyq_pg.py")]


# ---- what only PostgreSQL has: claims at once, and LISTEN/NOTIFY

def test_a_claim_steps_over_a_job_another_claim_holds(make_queue):
    """SKIP LOCKED: while one worker's claim is not yet committed, another
    worker takes the next job at once, instead of waiting for the first or
    taking the same job."""
    mine, theirs = make_queue(), make_queue()
    first = mine.enqueue("email", {"to": "ann"})
    second = mine.enqueue("email", {"to": "bob"})
    theirs.db.execute("SET lock_timeout = '2s'")    # a claim that waits fails instead
    with mine.transaction():
        assert mine.claim().id == first                # locked until this block ends
        assert theirs.claim().id == second


def waited(queue, poll):
    started = time.monotonic()
    queue.wait(seconds=poll)
    return time.monotonic() - started


def test_an_idle_worker_wakes_as_soon_as_a_job_is_enqueued(make_queue):
    worker, producer = make_queue(), make_queue()
    assert worker.claim() is None
    producing = threading.Timer(0.2, producer.enqueue, ("email", {"to": "ann"}))
    producing.start()
    assert waited(worker, poll=30) < 10              # woken by NOTIFY, long before the poll
    producing.join()              # the commit wakes us before the producer hears it is done
    assert worker.claim() is not None


def test_a_job_enqueued_while_the_worker_was_busy_still_wakes_it(make_queue):
    worker, producer = make_queue(), make_queue()
    producer.enqueue("email", {"to": "ann"})      # the worker is not waiting yet
    assert waited(worker, poll=30) < 10


def test_a_notification_sent_before_a_worker_listens_is_lost(make_queue):
    """The glossary's LISTEN and NOTIFY: nobody listened, so nobody is told;
    the worker finds the job only when it looks again after poll seconds."""
    producer = make_queue()
    producer.enqueue("email", {"to": "ann"})
    worker = make_queue()
    assert waited(worker, poll=0.5) >= 0.4
    assert worker.claim() is not None


def test_with_no_notification_a_worker_looks_again_after_poll_seconds(make_queue):
    worker = make_queue()
    assert 0.4 <= waited(worker, poll=0.5) < 10


def test_an_enqueue_that_rolls_back_wakes_nobody(make_queue):
    worker, producer = make_queue(), make_queue()
    with pytest.raises(RuntimeError):
        with producer.transaction():
            producer.enqueue("email", {"to": "ann"})
            raise RuntimeError("signup failed")
    assert waited(worker, poll=0.5) >= 0.4
    assert worker.claim() is None


def test_queues_starting_at_once_make_the_schema_once(postgresql, tinyq):
    """Four workers started together, on a new database: none of them fails
    on another's half-made table."""
    start = threading.Barrier(4)
    errors = []

    def open_queue():
        try:
            start.wait()
            tinyq.Queue(postgresql).close()
        except Exception as error:
            errors.append(error)

    threads = [threading.Thread(target=open_queue) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


@pytest.mark.parametrize("other, kept", [
    (None, False),
    ("REPEATABLE READ: SELECT 1", True),
    ("READ COMMITTED: SELECT 1", False),
    ("READ COMMITTED: SELECT pg_current_xact_id()", True),      # as a write does
], ids=["alone", "repeatable read", "read committed, read only", "read committed, wrote"])
def test_an_open_transaction_that_may_still_look_keeps_every_old_version(queue, postgresql,
                                                                          other, kept):
    """Chapter 12's price of a long transaction, without its clock: after a
    drain, VACUUM removes the claims' and acks' old row versions, unless a
    transaction still open might see them."""
    with queue.transaction():
        for _ in range(50):
            queue.enqueue("noop", {})
    queue.db.execute("VACUUM jobs")
    with psycopg.connect(postgresql) as looking:
        if other:
            level, statement = other.split(": ")
            looking.execute(f"SET TRANSACTION ISOLATION LEVEL {level}")
            looking.execute(statement)
        while (job := queue.claim()) is not None:
            queue.finish(job, "done")
        # A backend hands its counts of dead rows to the shared statistics at
        # most once a second, so the drain's may still be pending; arriving
        # after VACUUM's own count, they would be added to it (200, not 100,
        # in a soak beside eight CPU hogs; every time after a 1.1 s pause
        # before VACUUM). Flushed now, at this statement's end.
        queue.db.execute("SELECT pg_stat_force_next_flush()")
        queue.db.execute("VACUUM jobs")
        (left,) = queue.db.execute("SELECT n_dead_tup FROM pg_stat_user_tables"
                                   " WHERE relname = 'jobs'").fetchone()
    assert left == (2 * 50 if kept else 0)


@pytest.mark.parametrize("statement, indexes", [
    ("BURY", ["jobs_leased"]),
    ("CLAIM", ["jobs_leased", "jobs_waiting"])])
def test_the_claim_uses_an_index_on_postgresql(queue, tinyq, statement, indexes):
    """As on SQLite: each subquery reads its partial index from the start,
    with many finished jobs in the table; no step reads every row, or sorts."""
    with queue.transaction():
        for _ in range(5000):
            queue.enqueue("noop", {})
    queue.db.execute("UPDATE jobs SET status = 'done' WHERE id <= 4990")
    queue.db.execute("ANALYZE jobs")
    explain = psycopg.ClientCursor(queue.db)    # binds the values itself: EXPLAIN takes none
    plan = [line for (line,) in explain.execute(
        "EXPLAIN " + getattr(tinyq.Queue, statement),
        {"now": 0.0, "lease": 1.0, "max_attempts": 5})]
    for index in indexes:
        assert any(f"Index Scan using {index} on jobs" in line for line in plan), plan
    assert not any("Seq Scan" in line or "Sort" in line for line in plan), plan
