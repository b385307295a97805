"""The capstone library's promises, held on both backends: capstone/tinyq.py
on SQLite and capstone/tinyq_pg.py on PostgreSQL (in code/, or in the
learner's WORK folder), each test run and graded once for each, with time
moved by hand and dice from a fixed seed (the fixtures are in conftest.py).
What only SQLite has is marked sqlite_only; what only PostgreSQL has is in
test_tinyq_pg.py. The capstone's given outside world, world_given.py, has
its tests in test_world_given.py."""
import doctest
import random
import sqlite3
import threading
import time

import pytest

from tests.helpers import TopOfRange

# A test's runs on PostgreSQL are marked for tinyq_pg.py by their backend
# (conftest.py), which comes before this mark.
pytestmark = pytest.mark.exercise("capstone/tinyq.py")


def row(queue, job_id):
    """Some of a job's columns, read through jobs(), whose answer is the
    same on both backends (their SQL has different placeholders)."""
    (job,) = [job for job in queue.jobs() if job["id"] == job_id]
    return job["status"], job["attempts"], job["run_at"], job["token"], job["last_error"]


# ---- enqueue

def test_enqueue_returns_new_ids(queue):
    first = queue.enqueue("email", {"to": "ann"})
    second = queue.enqueue("email", {"to": "bob"})
    assert first != second
    assert queue.counts() == {"queued": 2, "running": 0, "done": 0, "dead": 0}


def test_a_unique_key_makes_one_job(queue):
    assert queue.enqueue("email", {"to": "ann"}, unique_key="signup-ann") is not None
    assert queue.enqueue("email", {"to": "ann"}, unique_key="signup-ann") is None
    assert queue.counts()["queued"] == 1


def test_jobs_shows_every_row_with_its_args_decoded(queue, clock):
    clock.now = 100.0
    first = queue.enqueue("email", {"to": "ann"}, unique_key="signup-ann")
    second = queue.enqueue("email", {"to": "bob"}, delay=5)
    job = queue.claim()
    assert queue.jobs() == [
        {"id": first, "status": "running", "kind": "email", "args": {"to": "ann"},
         "attempts": 1, "token": job.token, "run_at": 100.0,
         "locked_until": 100.0 + queue.lease, "last_error": None,
         "unique_key": "signup-ann"},
        {"id": second, "status": "queued", "kind": "email", "args": {"to": "bob"},
         "attempts": 0, "token": 0, "run_at": 105.0, "locked_until": None,
         "last_error": None, "unique_key": None},
    ]


def test_a_delayed_job_waits_for_its_time(queue, clock):
    job_id = queue.enqueue("email", {"to": "ann"}, delay=5)
    assert queue.claim() is None
    clock.now += 5
    job = queue.claim()
    assert job.id == job_id and job.args == {"to": "ann"} and job.kind == "email"


def test_enqueue_joins_the_callers_transaction(queue):
    queue.db.execute("CREATE TABLE customers (email TEXT)")
    with pytest.raises(RuntimeError):
        with queue.transaction() as db:
            db.execute("INSERT INTO customers VALUES ('ann')")
            queue.enqueue("email", {"to": "ann"})
            raise RuntimeError("signup failed")
    assert queue.db.execute("SELECT count(*) FROM customers").fetchone() == (0,)
    assert queue.counts()["queued"] == 0
    with queue.transaction() as db:
        db.execute("INSERT INTO customers VALUES ('ann')")
        queue.enqueue("email", {"to": "ann"})
    assert queue.db.execute("SELECT count(*) FROM customers").fetchone() == (1,)
    assert queue.counts()["queued"] == 1


@pytest.mark.sqlite_only
def test_transactions_nest_and_roll_back_as_one(queue):
    queue.db.execute("CREATE TABLE customers (email TEXT)")
    with pytest.raises(RuntimeError):
        with queue.transaction():
            with queue.transaction() as db:    # joins; does not BEGIN again
                db.execute("INSERT INTO customers VALUES ('ann')")
            raise RuntimeError("the outer block failed")
    assert queue.db.execute("SELECT count(*) FROM customers").fetchone() == (0,)
    assert not queue.db.in_transaction


# ---- claim and leases

def test_a_claim_is_a_lease(make_queue, clock):
    queue = make_queue(lease=30)
    job_id = queue.enqueue("email", {"to": "ann"})
    first = queue.claim()
    assert (first.id, first.attempts) == (job_id, 1)
    assert row(queue, job_id)[:2] == ("running", 1)
    assert row(queue, job_id)[3] == first.token
    clock.now += 30
    assert queue.claim() is None                 # the lease still holds
    clock.now += 0.01
    second = queue.claim()                       # the lease ran out
    assert (second.id, second.attempts) == (job_id, 2)
    assert second.token != first.token
    assert row(queue, job_id)[3] == second.token


def test_the_token_grows_with_every_claim_of_a_job(make_queue, clock):
    queue = make_queue(lease=1)
    queue.enqueue("email", {})
    tokens = []
    for _ in range(4):
        tokens.append(queue.claim().token)     # the worker dies: the lease runs out
        clock.now += 2
    assert tokens == sorted(set(tokens)), tokens


class NoDice(random.Random):
    """Dice that refuse to roll: nothing that uses them may be luck-free."""

    def random(self):
        raise AssertionError("rolled the dice")

    def getrandbits(self, bits):
        raise AssertionError("rolled the dice")


def test_tokens_do_not_come_from_the_dice(make_queue):
    queue = make_queue(rng=NoDice())
    queue.enqueue("email", {})
    assert queue.claim() is not None


def test_queues_with_the_same_seed_still_fence_each_other(make_queue, clock, tinyq):
    """Two workers whose dice were seeded alike (a replay, a test): the one
    whose lease ran out can neither finish the job nor write through it."""
    mine = make_queue(seed=1, lease=30)
    theirs = make_queue(seed=1, lease=30)
    make_points(mine)
    job_id = mine.enqueue("points", {"customer": "ann"})
    late = mine.claim()
    clock.now += 31
    current = theirs.claim()
    assert current.id == job_id
    with pytest.raises(tinyq.LeaseLost):
        with late.complete() as db:
            db.execute("INSERT INTO points VALUES ('ann', 10)")
    with pytest.raises(tinyq.LeaseLost):
        mine.finish(late, "done")
    assert points(mine) == 0
    assert row(mine, job_id)[:2] == ("running", 2)
    theirs.finish(current, "done")
    assert row(mine, job_id)[0] == "done"


# ---- jobs whose workers die, and heartbeats

def test_a_job_whose_worker_dies_every_time_goes_dead(make_queue, clock):
    """A poison job: every worker that claims it dies. Its lease runs out
    after each attempt, and once it has had max_attempts a claim buries it
    instead of handing it out again."""
    queue = make_queue(lease=1, max_attempts=3)
    job_id = queue.enqueue("poison", {})
    claims = 0
    for _ in range(8):
        job = queue.claim()
        if job is None:
            break
        claims += 1                          # ...and the worker dies holding it
        clock.now += 1.5
    assert claims == 3
    status, attempts, _, _, last_error = row(queue, job_id)
    assert (status, attempts) == ("dead", 3)
    assert "lease" in last_error and "worker" in last_error, last_error


def test_no_job_is_claimed_more_than_max_attempts_times(make_queue, clock):
    """Failures and lost workers count alike: one attempt fails, the next
    two lose their workers, and the job is dead after its third claim."""
    queue = make_queue(lease=1, max_attempts=3, backoff_cap=0.1)
    job_id = queue.enqueue("email", {})
    queue.handler("email")(lambda job: 1 / 0)
    assert queue.work_one()                  # attempt 1 fails
    clock.now += 1
    assert queue.claim().attempts == 2       # attempt 2: its worker dies
    clock.now += 2
    assert queue.claim().attempts == 3       # attempt 3: its worker dies
    clock.now += 2
    assert queue.claim() is None
    assert row(queue, job_id)[:2] == ("dead", 3)


def test_a_poison_job_does_not_keep_other_due_jobs_waiting(make_queue, clock):
    """A worker that dies on a poison job and is restarted takes the next due
    job while the poison job's lease holds; and even if it came back only
    after each lease ran out, the poison job is buried after max_attempts."""
    queue = make_queue(lease=1, max_attempts=3)
    poison = queue.enqueue("poison", {})
    other = queue.enqueue("email", {})
    assert queue.claim().id == poison        # its worker dies...
    clock.now += 0.1                         # ...and is restarted at once
    job = queue.claim()
    assert job.id == other
    queue.finish(job, "done")
    another = queue.enqueue("email", {})
    claimed = []
    for _ in range(8):                       # restarted only after each lease ran out
        clock.now += 1.5
        claimed.append(queue.claim().id)
        if claimed[-1] == another:
            break
    assert claimed == [poison, poison, another]
    assert row(queue, poison)[:2] == ("dead", 3)


def test_a_job_whose_worker_died_comes_before_a_backlog(make_queue, clock):
    """Expired leases are claimed first: a job whose worker died is taken
    up again at once, even before a job that was due before it was first
    claimed."""
    queue = make_queue(lease=10)
    lost = queue.enqueue("email", {"to": "ann"})
    backlog = [queue.enqueue("email", {"n": n}, delay=0.5) for n in range(3)]
    clock.now += 1                           # the backlog is due; ann is due first
    assert queue.claim().id == lost          # ...and her worker dies
    clock.now += 11
    assert queue.claim().id == lost
    assert [queue.claim().id for _ in backlog] == backlog


def test_a_heartbeat_keeps_the_lease(make_queue, clock, tinyq):
    mine = make_queue(lease=30)
    theirs = make_queue(lease=30)
    job_id = mine.enqueue("export", {})
    job = mine.claim()
    for _ in range(4):                       # two minutes of work, in steps
        clock.now += 25
        job.heartbeat()
        assert theirs.claim() is None
    clock.now += 31                          # it stops beating: the lease runs out
    taken = theirs.claim()
    assert taken.id == job_id
    with pytest.raises(tinyq.LeaseLost):
        job.heartbeat()
    assert row(mine, job_id)[3] == taken.token


def test_every_change_expects_a_running_job(queue, tinyq):
    job_id = queue.enqueue("email", {})
    job = queue.claim()
    queue.finish(job, "done")
    with pytest.raises(tinyq.LeaseLost):       # same token, but no longer running
        queue.fail(job, ConnectionError("late"))
    assert row(queue, job_id)[0] == "done" and row(queue, job_id)[4] is None


# ---- failures and retries

def test_a_failure_waits_then_retries(queue, clock):
    job_id = queue.enqueue("email", {"to": "ann"})

    @queue.handler("email")
    def send(job):
        raise ConnectionError("mail server down")

    failed_at = clock.now
    assert queue.work_one() is True
    status, attempts, run_at, _, last_error = row(queue, job_id)
    assert (status, attempts) == ("queued", 1)
    assert failed_at <= run_at <= failed_at + queue.backoff_base
    assert last_error == "ConnectionError: mail server down"


def test_the_backoff_ceiling_doubles_then_caps(make_queue, clock):
    queue = make_queue(rng=TopOfRange(1), backoff_base=1, backoff_cap=5, max_attempts=6)
    job_id = queue.enqueue("email", {})
    queue.handler("email")(lambda job: 1 / 0)
    waits = []
    for _ in range(5):
        assert queue.work_one()
        run_at = row(queue, job_id)[2]
        waits.append(run_at - clock.now)
        clock.now = run_at
    assert waits == [1, 2, 4, 5, 5]


def test_the_backoff_is_full_jitter_below_the_ceiling(make_queue, clock):
    """Full jitter: each wait is drawn anywhere from 0 to the ceiling, so
    failures that happen together do not retry together."""
    queue = make_queue(backoff_base=8, backoff_cap=8)     # every ceiling is 8
    ids = [queue.enqueue("email", {"n": n}) for n in range(200)]
    queue.handler("email")(lambda job: 1 / 0)
    while queue.work_one():
        pass
    waits = [job["run_at"] - clock.now for job in queue.jobs()]
    assert len(waits) == len(ids) and all(0 <= wait <= 8 for wait in waits)
    assert min(waits) < 1 and max(waits) > 7 and len(set(waits)) == len(waits)


@pytest.mark.sqlite_only
def test_the_ceilings_own_example_holds(tinyq):
    """ceiling()'s docstring example is true: the ceiling doubles after each
    attempt, from base, up to cap."""
    finder, runner = doctest.DocTestFinder(), doctest.DocTestRunner(verbose=False)
    examples = 0
    for test in finder.find(tinyq.ceiling, "ceiling", globs={"ceiling": tinyq.ceiling}):
        examples += len(test.examples)
        runner.run(test)
    assert examples > 0 and runner.failures == 0, "ceiling()'s example is wrong"


def test_a_job_dies_after_max_attempts(make_queue, clock):
    queue = make_queue(max_attempts=3)
    job_id = queue.enqueue("email", {})

    @queue.handler("email")
    def send(job):
        raise ValueError(f"bad address, attempt {job.attempts}")

    for _ in range(3):
        clock.now += queue.backoff_cap       # long enough for any backoff
        assert queue.work_one()
    assert row(queue, job_id)[:2] == ("dead", 3)
    assert row(queue, job_id)[4] == "ValueError: bad address, attempt 3"
    clock.now += 1000
    assert queue.work_one() is False         # the dead stay dead


def test_a_permanent_failure_is_dead_at_once(queue, clock, tinyq):
    """A handler that raises tinyq.Permanent fails its job for good: dead
    after one attempt, with its error kept, and never claimed again."""
    job_id = queue.enqueue("email", {"to": "nobody"})

    @queue.handler("email")
    def send(job):
        raise tinyq.Permanent("no such address")

    assert queue.work_one() is True
    assert row(queue, job_id)[:2] == ("dead", 1)
    assert row(queue, job_id)[4] == "Permanent: no such address"
    clock.now += 1000
    assert queue.work_one() is False


def test_an_error_raised_again_as_permanent_keeps_its_words(queue, tinyq):
    """`raise tinyq.Permanent(error) from error` turns another error into a
    permanent one: the job is dead at once, and last_error says what the
    other error said."""
    job_id = queue.enqueue("charge", {})

    @queue.handler("charge")
    def charge(job):
        try:
            raise LookupError("bank: key fee-7 was first used with other inputs")
        except LookupError as error:
            raise tinyq.Permanent(error) from error

    assert queue.work_one() is True
    assert row(queue, job_id)[:2] == ("dead", 1)
    assert row(queue, job_id)[4] == "Permanent: bank: key fee-7 was first used with other inputs"


def test_an_unknown_kind_is_a_failure(queue):
    job_id = queue.enqueue("nobody_handles_this", {})
    assert queue.work_one()
    assert row(queue, job_id)[0] == "queued"
    assert "KeyError" in row(queue, job_id)[4]


def test_wait_returns_after_the_seconds_it_is_given(queue):
    """A worker with nothing to do calls wait(seconds): with no job
    enqueued, it returns once those seconds have passed, and not long
    after."""
    started = time.monotonic()
    queue.wait(seconds=0.3)
    assert 0.25 <= time.monotonic() - started < 10


def test_a_handler_that_returns_marks_the_job_done(queue):
    job_id = queue.enqueue("email", {})
    seen = []
    queue.handler("email")(seen.append)
    assert queue.work_one() is True
    assert queue.work_one() is False
    assert row(queue, job_id)[0] == "done"
    assert [job.id for job in seen] == [job_id]


# ---- complete(): the handler's writes and `done` together

def make_points(queue):
    queue.db.execute("CREATE TABLE points (customer TEXT, points INTEGER)")


def points(queue):
    return queue.db.execute("SELECT count(*) FROM points").fetchone()[0]


def test_complete_commits_writes_and_done_together(queue):
    make_points(queue)
    job_id = queue.enqueue("points", {"customer": "ann"})

    @queue.handler("points")
    def award(job):
        with job.complete() as db:
            db.execute("INSERT INTO points VALUES ('ann', 10)")

    assert queue.work_one()
    assert points(queue) == 1
    assert row(queue, job_id)[0] == "done"


def test_complete_after_losing_the_lease_writes_nothing(make_queue, clock):
    mine = make_queue(seed=1, lease=30)
    theirs = make_queue(seed=2, lease=30)
    make_points(mine)
    job_id = mine.enqueue("points", {"customer": "ann"})
    taken = []

    @mine.handler("points")
    def award(job):
        clock.now += 31                      # this worker is slow...
        taken.append(theirs.claim())         # ...so another one takes the job
        with job.complete() as db:
            db.execute("INSERT INTO points VALUES ('ann', 10)")

    assert mine.work_one() is True            # it moves on: no exception, no retry
    assert points(mine) == 0
    status, attempts, _, locked_by, _ = row(mine, job_id)
    assert (status, attempts, locked_by) == ("running", 2, taken[0].token)


@pytest.mark.parametrize("outcome", ["returns", "raises", "fails for good"])
def test_a_late_finish_leaves_the_new_owner_alone(make_queue, clock, outcome, tinyq):
    mine = make_queue(seed=1, lease=30)
    theirs = make_queue(seed=2, lease=30)
    job_id = mine.enqueue("email", {})
    taken = []

    @mine.handler("email")
    def slow(job):
        clock.now += 31
        taken.append(theirs.claim())
        if outcome == "raises":
            raise ConnectionError("too late anyway")
        if outcome == "fails for good":
            raise tinyq.Permanent("too late to bury it")

    assert mine.work_one() is True            # it moves on: no exception, no retry
    status, attempts, _, locked_by, last_error = row(mine, job_id)
    assert (status, attempts, locked_by) == ("running", 2, taken[0].token)
    assert last_error is None                # no error written over their claim


def test_a_token_cannot_stop_an_effect_outside_the_queue(make_queue, clock):
    """A fence guards only what passes through it: a worker that wakes after
    losing its lease still sends its email, and learns only at finish() that
    the job was no longer its own (then moves on)."""
    mine = make_queue(lease=30)
    theirs = make_queue(lease=30)
    job_id = mine.enqueue("email", {})
    sent, taken = [], []

    @mine.handler("email")
    def send(job):
        clock.now += 31                      # a long pause...
        taken.append(theirs.claim())         # ...in which the job changes hands
        sent.append(job.token)               # the email goes out all the same

    assert mine.work_one() is True
    status, _, _, token, _ = row(mine, job_id)
    assert sent == [1] and (status, token) == ("running", taken[0].token)


def test_an_error_inside_complete_rolls_back_and_counts_as_a_failure(queue):
    make_points(queue)
    job_id = queue.enqueue("points", {"customer": "ann"})

    @queue.handler("points")
    def award(job):
        with job.complete() as db:
            db.execute("INSERT INTO points VALUES ('ann', 10)")
            raise RuntimeError("crashed before commit")

    assert queue.work_one()
    assert points(queue) == 0
    assert row(queue, job_id)[0] == "queued"
    assert row(queue, job_id)[4] == "RuntimeError: crashed before commit"


# ---- the database itself

def claim_side_by_side(open_queue, workers, ids):
    """Start `workers` threads at once, each with a queue of its own, made in
    it by open_queue(number) (a SQLite connection belongs to the thread that
    made it), and claim until nothing is due. The ids each worker took, after
    checking that each id was taken once, by workers that all took part."""
    start = threading.Barrier(workers)
    claimed = [[] for _ in range(workers)]
    errors = []

    def worker(number):
        queue = open_queue(number)
        try:
            start.wait()
            # Each job needs one claim; a claim that hands out a running job
            # again would go on for ever.
            for _ in range(len(ids) + 1):
                job = queue.claim()
                if job is None:
                    break
                claimed[number].append(job.id)
                time.sleep(0.001)              # the work, outside any lock
        except Exception as error:
            errors.append(error)
        finally:
            queue.close()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert all(claimed)                        # every worker really took part
    everything = [job_id for jobs in claimed for job_id in jobs]
    assert len(everything) == len(set(everything)) == len(ids)
    assert set(everything) == ids


# SQLite has one writer at a time: two workers show its lock holds.
# PostgreSQL's point is many at once, claims stepping over each other.
SIDE_BY_SIDE = {"sqlite": (2, 200), "postgresql": (4, 300)}     # workers, jobs


def test_workers_side_by_side_never_claim_the_same_job(backend, tinyq, make_queue, database,
                                                        clock):
    workers, jobs = SIDE_BY_SIDE[backend]
    producer = make_queue()
    with producer.transaction():
        ids = {producer.enqueue("email", {"n": n}) for n in range(jobs)}
    claim_side_by_side(lambda number: tinyq.Queue(database, clock=clock,
                                                  rng=random.Random(number)), workers, ids)


@pytest.mark.sqlite_only
def test_the_schema_refuses_an_unknown_status(queue):
    job_id = queue.enqueue("email", {})
    with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
        queue.db.execute("UPDATE jobs SET status = 'lost' WHERE id = ?", (job_id,))


@pytest.mark.sqlite_only
@pytest.mark.parametrize("statement, indexes", [
    ("BURY", ["jobs_leased (locked_until<?)"]),
    ("CLAIM", ["jobs_leased (locked_until<?)", "jobs_waiting (run_at<?)"])])
def test_the_claim_uses_an_index(tinyq, queue, statement, indexes):
    plan = queue.db.execute("EXPLAIN QUERY PLAN " + getattr(tinyq.Queue, statement),
                            {"now": 0.0, "lease": 1.0, "max_attempts": 5}).fetchall()
    steps = [step[-1] for step in plan]
    for index in indexes:
        assert f"SEARCH jobs USING INDEX {index}" in steps, steps
    # No step reads every row, nor sorts the due jobs to find the first one.
    assert not any(step.startswith("SCAN") or "TEMP B-TREE" in step for step in steps), steps


@pytest.mark.sqlite_only
def test_the_database_is_in_wal_mode_and_commits_without_waiting_for_the_disk(queue):
    assert queue.db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert queue.db.execute("PRAGMA synchronous").fetchone() == (1,)     # NORMAL


def test_a_ctrl_c_inside_a_transaction_undoes_it(queue):
    """Ctrl-C arrives as KeyboardInterrupt, which is not an Exception:
    transaction() rolls back on it too, so what it wrote is gone and the
    connection is not left holding its transaction (and, on SQLite, the
    write lock every other worker waits for)."""
    with pytest.raises(KeyboardInterrupt):
        with queue.transaction():
            queue.enqueue("email", {"to": "ann"})
            raise KeyboardInterrupt
    assert queue.counts() == {"queued": 0, "running": 0, "done": 0, "dead": 0}
    queue.enqueue("email", {"to": "bob"})
    assert queue.counts()["queued"] == 1
