"""capstone/tinyq_pg.py, tinyq on PostgreSQL: every promise of tinyq.py that
does not name SQLite, held by the very tests of tests/test_capstone.py, run
here on a private server (conftest.py's `postgresql`, a new database for
each test); then what only PostgreSQL has: many claims at once, LISTEN and
NOTIFY."""
import importlib
import inspect
import shutil
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest

from tests import test_capstone
from tools.harness.catalogue import CODE
from tests.helpers import require

pytestmark = pytest.mark.exercise("capstone/tinyq_pg.py")

# The same tests, collected again in this module, where `database` is ours.
# Left out, as they hold what only SQLite does: BEGIN IMMEDIATE's single
# writer and in_transaction, the CHECK error's class, EXPLAIN QUERY PLAN
# (PostgreSQL's plans are checked below), WAL, and threads sharing a file.
SQLITE_ONLY = {"test_transactions_nest_and_roll_back_as_one",
               "test_two_workers_never_claim_the_same_job",
               "test_the_schema_refuses_an_unknown_status",
               "test_the_claim_uses_an_index",
               "test_the_database_is_in_wal_mode_and_commits_without_waiting_for_the_disk"}
SHARED = [name for name, test in vars(test_capstone).items()
          if name.startswith("test_") and name not in SQLITE_ONLY
          and {"queue", "make_queue"} & set(inspect.signature(test).parameters)]
globals().update({name: getattr(test_capstone, name) for name in SHARED})


@pytest.fixture(autouse=True)
def load_tinyq_pg(monkeypatch, tmp_path, source_folder):
    """The folder under test's tinyq_pg.py, beside code/'s tinyq.py, both
    imported fresh from copies; test_capstone's tests see tinyq_pg where they
    say `tinyq` (LeaseLost is the same class)."""
    learner = tmp_path / "learner"
    learner.mkdir()
    shutil.copy(CODE / "capstone" / "tinyq.py", learner)
    shutil.copy(require(source_folder, "capstone/tinyq_pg.py"), learner)
    monkeypatch.syspath_prepend(str(learner))
    for name in ("tinyq", "tinyq_pg"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    # Imported here, not first in a sandboxed child as other learner files
    # are: the child's Python lacks psycopg. A hang is stopped by pytest's timeout.
    try:
        module = importlib.import_module("tinyq_pg")
    except Exception as error:
        pytest.fail(f"tinyq_pg.py crashed when imported: {type(error).__name__}: {error}")
    monkeypatch.setattr(test_capstone, "tinyq", module)
    monkeypatch.chdir(tmp_path)
    return module


@pytest.fixture
def database(postgresql):
    return postgresql


# test_capstone's own fixtures, here given the database above.
clock, make_queue, queue = test_capstone.clock, test_capstone.make_queue, test_capstone.queue


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


def test_many_workers_at_once_never_claim_the_same_job(make_queue):
    producer = make_queue()
    with producer.transaction():
        ids = {producer.enqueue("email", {"n": n}) for n in range(300)}
    test_capstone.claim_side_by_side(lambda number: make_queue(seed=number), 4, ids)


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


def test_queues_starting_at_once_make_the_schema_once(postgresql, load_tinyq_pg):
    """Four workers started together, on a new database: none of them fails
    on another's half-made table."""
    start = threading.Barrier(4)
    errors = []

    def open_queue():
        try:
            start.wait()
            load_tinyq_pg.Queue(postgresql).close()
        except Exception as error:
            errors.append(error)

    threads = [threading.Thread(target=open_queue) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_killed_workers_lose_no_job(load_tinyq_pg, postgresql, monkeypatch, capsys):
    """test_chaos.py's queue check (10,000 jobs, 4 workers killed with SIGKILL
    at random and restarted), with tinyq_pg on PostgreSQL: none lost, none
    unexpected, every job done, some claimed again; the jobs run twice are
    counted, but may be none (219 kills once ran none twice)."""
    from tests.test_chaos import check_killed_workers
    folder = Path(load_tinyq_pg.__file__).parent     # the two files, as load_tinyq_pg copied them
    monkeypatch.setenv("DATABASE", postgresql)
    open_queue = ("import os, tinyq_pg\n"
                  "queue = tinyq_pg.Queue(os.environ['DATABASE'], lease=0.2, max_attempts=1000)\n")
    # A kill after every 20 jobs at most: a worker's start (Python, psycopg,
    # a connection) beside four CPU hogs took longer than the SQLite check's
    # pace allows, and 10,000 jobs were not done in 120 s.
    check_killed_workers(folder, open_queue, capsys, duplicates_seen=False, jobs_per_kill=20)


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
        queue.db.execute("VACUUM jobs")
        (left,) = queue.db.execute("SELECT n_dead_tup FROM pg_stat_user_tables"
                                   " WHERE relname = 'jobs'").fetchone()
    assert left == (2 * 50 if kept else 0)


@pytest.mark.parametrize("statement, indexes", [
    ("BURY", ["jobs_leased"]),
    ("CLAIM", ["jobs_leased", "jobs_waiting"])])
def test_the_claim_uses_an_index_on_postgresql(queue, load_tinyq_pg, statement, indexes):
    """As on SQLite: each subquery reads its partial index from the start,
    with many finished jobs in the table; no step reads every row, or sorts."""
    with queue.transaction():
        for _ in range(5000):
            queue.enqueue("noop", {})
    queue.db.execute("UPDATE jobs SET status = 'done' WHERE id <= 4990")
    queue.db.execute("ANALYZE jobs")
    explain = psycopg.ClientCursor(queue.db)    # binds the values itself: EXPLAIN takes none
    plan = [line for (line,) in explain.execute(
        "EXPLAIN " + getattr(load_tinyq_pg.Queue, statement),
        {"now": 0.0, "lease": 1.0, "max_attempts": 5})]
    for index in indexes:
        assert any(f"Index Scan using {index} on jobs" in line for line in plan), plan
    assert not any("Seq Scan" in line or "Sort" in line for line in plan), plan
