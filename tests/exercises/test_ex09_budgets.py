"""Exercise 9, continued (Chapter 11): deadlines, the retry budget, and the
spend budget shared by every tenant.

What the guide claims of ex09_charge_worker.py beyond its transcripts. Each
test runs the file from the folder under test (code/, or a learner's WORK)
in a fresh copy, and is graded for it.
"""

import re
import sqlite3
import threading

import pytest

from tools.harness import sandbox
from tests.helpers import O7, Clock, FlakyProvider, TopOfRange, set_constant

pytestmark = pytest.mark.exercise("ex09_charge_worker.py")


def test_ex09_the_retry_budget_caps_retries_at_a_tenth_of_requests(practice):
    """A request that fails every time asks for a retry: one is allowed for
    every ten requests, spread evenly (at the 10th, the 20th, ...), never
    ten at first and none after; the window forgets what is older."""
    clock = Clock()
    budget = practice.RetryBudget(clock)
    allowed = []
    for number in range(1, 101):
        budget.request()
        if budget.allow_retry():
            allowed.append(number)
        clock.now += 0.1
    assert allowed == list(range(10, 101, 10))
    clock.now += 61                                      # the window forgets
    budget.request()
    assert not budget.allow_retry()
    for _ in range(9):
        budget.request()
    assert budget.allow_retry()


def test_ex09_the_provider_binds_a_key_to_its_inputs_not_to_a_timeout(ex09, practice):
    """The same key and inputs give the same charge whatever time each call
    had left; the same key with other inputs is refused, and that refusal is
    an answer: Declined, nothing charged."""
    provider = practice.Provider(Clock())
    first = provider.create(idempotency_key="North/O7", timeout=30, **O7)
    assert provider.create(idempotency_key="North/O7", timeout=12.5, **O7) == first
    with pytest.raises(ex09.Declined):
        provider.create(idempotency_key="North/O7", timeout=30, **dict(O7, amount_cents=6000))
    assert list(provider.charges) == [first] and provider.calls == 3 and provider.paid() == []


class SlowFlakyProvider:
    """Each call takes `seconds` of the clock, or less if its timeout runs
    out first; it fails with Retryable `failures` times. It notes when each
    call came and the timeout it was given."""

    def __init__(self, ex09, clock, seconds, failures):
        self.ex09, self.clock, self.seconds, self.failures = ex09, clock, seconds, failures
        self.seen = []

    def charge(self, idempotency_key, timeout=None, **inputs):
        self.seen.append((self.clock(), timeout))
        self.clock.advance(self.seconds if timeout is None else min(self.seconds, timeout))
        if len(self.seen) <= self.failures:
            raise self.ex09.Retryable("503 Service Unavailable")
        return f"charge-{idempotency_key}"


def test_ex09_each_call_gets_the_time_left_before_the_deadline(ex09, practice):
    """deliver() passes every call the time left as its timeout, waits only
    when a retry still fits, and is over by the deadline."""
    message, top = {"id": "North/O7", "inputs": O7}, TopOfRange()
    clock = practice.Clock()
    provider = SlowFlakyProvider(ex09, clock, seconds=2, failures=2)
    deadline = clock() + 30
    assert ex09.deliver(ex09.open_db(":memory:"), provider, message, [], sleep=clock.advance,
                        rng=top, clock=clock, deadline=deadline) == "charge-North/O7"
    assert [when + timeout for when, timeout in provider.seen] == [deadline] * 3
    assert [timeout for _, timeout in provider.seen] == pytest.approx([30, 27.8, 25.4])
    clock = practice.Clock()
    provider = SlowFlakyProvider(ex09, clock, seconds=10, failures=99)
    dead = []
    assert ex09.deliver(ex09.open_db(":memory:"), provider, message, dead, sleep=clock.advance,
                        rng=top, clock=clock, deadline=30) is None
    assert isinstance(dead[0]["error"], ex09.Retryable)
    assert [timeout for _, timeout in provider.seen] == pytest.approx([30, 19.8, 9.4])
    assert clock() == pytest.approx(30)                  # over by the deadline


def test_ex09_a_stalled_provider_costs_the_deadline_not_the_stall(ex09, practice):
    """A provider that pays but answers only after 600 s: the call is cut
    off at the deadline as a Retryable failure, the operation is put back
    with its charge unknown, and the slot is free. Meanwhile the provider
    answers another request with the same key "in progress"; once it has
    answered, a later start confirms the same charge, and nothing more is
    paid."""
    clock = practice.Clock()
    db, provider = ex09.open_db(":memory:"), practice.Provider(clock)
    ex09.admit(db, "North", "O9", dict(O7, invoice=9))
    assert ex09.work_one(db, practice.Stalled(provider, 600), "North",
                         clock=clock) == "North/O9"
    assert clock() == ex09.DEADLINE_SECONDS < ex09.LEASE_SECONDS    # given up within its lease
    assert ex09.status(db, "North", "O9") == ("waiting", "unknown")
    assert provider.paid() == ["C1"]                     # the provider did pay
    again = {"id": "North/O9", "inputs": dict(O7, invoice=9), "start": 2}
    dead = []
    assert ex09.deliver(db, ex09.CreateThenConfirm(db, provider, clock), again, dead,
                        clock=clock, attempts=1) is None
    assert "in progress" in str(dead[0]["error"])       # a 409: try again later
    clock.now = 601
    assert ex09.deliver(db, ex09.CreateThenConfirm(db, provider, clock), again, [],
                        clock=clock) == "C1"
    assert provider.paid() == ["C1"]


def test_ex09_a_spent_retry_budget_puts_a_healthy_message_back_for_later(ex09, practice):
    """With the retry budget spent, a delivery that fails is not tried again
    now: one call, no wait, and RetryLater, not a dead letter. The worker
    puts the operation back to wait, with the reason, and starts it again
    later, with its key. A budget keeps no count but its own: a new one has
    seen no calls, and allows its first retry only after ten."""
    clock, db = Clock(), ex09.open_db(":memory:")
    budget = practice.RetryBudget(clock)
    down = FlakyProvider(ex09, failures=99)
    message = {"id": "North/O7", "inputs": O7}
    with pytest.raises(ex09.RetryLater, match="503 Service Unavailable"):
        ex09.deliver(db, down, message, [], budget=budget, clock=clock,
                     sleep=lambda s: pytest.fail("slept"))
    assert down.calls == 1
    ex09.admit(db, "North", "O8", dict(O7, invoice=8))
    with pytest.raises(ex09.RetryLater):
        ex09.work_one(db, practice.Outage(), "North", clock=clock, budget=practice.RetryBudget(clock))
    assert ex09.status(db, "North", "O8") == ("waiting", "none")   # the create failed
    (reason,) = db.execute("SELECT last_error FROM work").fetchone()
    assert "retry budget is spent" in reason
    ex09.start_next(db, "North", clock)                  # not again at once (a new start
    assert ex09.status(db, "North", "O8")[0] == "waiting"   # would say running)...
    clock.now += ex09.PUT_BACK_CAP
    assert ex09.work_one(db, practice.Provider(clock), "North", clock=clock) == "North/O8"
    assert ex09.status(db, "North", "O8") == ("done", "C1")   # ...but later, with its key
    fresh = practice.RetryBudget(clock)
    assert not fresh.allow_retry()                       # no calls: no retry
    for _ in range(9):
        fresh.request()
    assert not fresh.allow_retry()                       # 9 calls: no retry yet
    fresh.request()
    assert fresh.allow_retry()


def test_ex09_the_budget_command_prints_the_ratio_it_has(folder):
    """Study Drill 2: with RETRY_RATIO = 0.5, `budget` says so, and keeps the
    retries to half of the calls."""
    set_constant(folder / "ex09_charge_worker.py", "RETRY_RATIO", 0.5)
    status, output = sandbox.run("python3 ex09_charge_worker.py budget", folder)
    assert status == 0, output
    [(calls, retries)] = re.findall(
        r"(?m)^with a 50% retry budget: (\d+) calls to the provider, (\d+)", output)
    assert 10 < int(retries) <= int(calls) / 2, output


def test_ex09_without_a_deadline_a_stalled_call_holds_the_slot(folder):
    """Study Drill 3: with no deadline passed down, W1 waits out the whole
    stall, far past its lease, before the operation is done."""
    sandbox.apply_edit(folder, "ex09_charge_worker.py",
                       "deadline=clock() + DEADLINE_SECONDS,", "")
    status, output = sandbox.run("python3 ex09_charge_worker.py deadline", folder)
    assert status == 0, output
    assert "W1 gives its slot back after 600 s\n" in output, output
    assert "status of O9: done, charge C1" in output and "no answer" not in output


class Lockstep:
    """A worker's connection that waits for the other worker's before each
    statement, so two workers run their statements side by side: both
    first statements, then both second ones. A check made in one statement
    and a take in the next are then both made before either take."""

    def __init__(self, db, barrier):
        self.db, self.barrier = db, barrier

    def execute(self, sql, params=()):
        try:
            self.barrier.wait(timeout=2)
        except threading.BrokenBarrierError:             # the other has no statement left
            pass
        return self.db.execute(sql, params)


def test_ex09_two_workers_cannot_both_spend_the_last_of_the_budget(ex09, tmp_path):
    """The spend budget is the service's: every worker counts into the one
    database they share. Two workers, each on its own connection and in
    step, both want the last $50.00 of the hour: one gets it, the other is
    refused, and nothing more fits after."""
    clock, path = Clock(now=12 * 3600), tmp_path / "shared.db"
    first = ex09.open_db(path)
    ex09.spend(first, ex09.MAX_CENTS_PER_HOUR - 5000, clock)
    barrier, outcomes = threading.Barrier(2), []

    def worker():
        db = Lockstep(ex09.open_db(path), barrier)
        try:
            ex09.spend(db, 5000, clock)
            outcomes.append("spent")
        except ex09.OverBudget:
            outcomes.append("refused")

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["refused", "spent"]
    with pytest.raises(ex09.OverBudget):
        ex09.spend(first, 1, clock)
    clock.now += 3600                                    # a new hour, a new budget
    ex09.spend(first, ex09.MAX_CENTS_PER_HOUR, clock)


def test_ex09_two_requests_cannot_both_take_the_last_waiting_slot(ex09, tmp_path):
    """Admission counts and queues in one statement: two requests for North,
    each on its own connection and in step, arrive when one waiting slot is
    left; one is queued, the other refused, and North never has more than
    MAX_WAITING operations waiting."""
    path = tmp_path / "shared.db"
    first = ex09.open_db(path)
    for number in range(ex09.MAX_WAITING - 1):
        ex09.admit(first, "North", f"N{number}", dict(O7, invoice=number))
    barrier, outcomes = threading.Barrier(2), []

    def request(client_id):
        db = Lockstep(ex09.open_db(path), barrier)
        try:
            outcomes.append(ex09.admit(db, "North", client_id, dict(O7, invoice=client_id))[0])
        except ex09.Refused:
            outcomes.append("refused")

    threads = [threading.Thread(target=request, args=(client_id,)) for client_id in ("A", "B")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(outcomes) == ["refused", "waiting"]
    (waiting,) = first.execute("SELECT count(*) FROM work WHERE tenant = 'North'"
                               " AND state = 'waiting'").fetchone()
    assert waiting == ex09.MAX_WAITING


def test_ex09_a_spent_budget_refuses_sends_nothing_and_parks_nothing(ex09, practice):
    """Once the hour's budget is taken, by any tenant, a worker is refused
    with the reason; the provider hears nothing, nothing is parked, the
    operation waits with no charge, and runs in the next hour."""
    clock = Clock(now=12 * 3600)
    db, provider = ex09.open_db(":memory:"), practice.Provider(clock)
    half = ex09.MAX_CENTS_PER_HOUR // 2
    for tenant, client_id in (("North", "B1"), ("South", "B2"), ("North", "B3")):
        ex09.admit(db, tenant, client_id, dict(O7, tenant=tenant, invoice=client_id,
                                               amount_cents=half))
    assert ex09.work_one(db, provider, "North", clock=clock) == "North/B1"
    assert ex09.work_one(db, provider, "South", clock=clock) == "South/B2"
    calls = provider.calls
    with pytest.raises(ex09.OverBudget, match=r"(?i)an hour.*nothing was sent"):
        ex09.work_one(db, provider, "North", clock=clock)
    assert provider.calls == calls and len(provider.paid()) == 2
    assert db.execute("SELECT state FROM work WHERE state = 'dead'").fetchall() == []
    assert ex09.status(db, "North", "B3") == ("waiting", "none")
    clock.now += 3600
    assert ex09.work_one(db, provider, "North", clock=clock) == "North/B3"
    assert ex09.status(db, "North", "B3") == ("done", "C3")


def test_ex09_a_refusal_by_the_spend_budget_is_not_a_lost_worker(ex09, practice):
    """Refused by the budget again and again, an operation goes back to wait
    each time: no slot, no lease, nothing recorded or spent, and no lost
    worker counted toward MAX_LOST. So when it does start, next hour, and
    its worker dies once, it is started again, not buried as a poison
    message."""
    clock = Clock(now=12 * 3600)
    db, provider = ex09.open_db(":memory:"), practice.Provider(clock)
    ex09.spend(db, ex09.MAX_CENTS_PER_HOUR - 50, clock)      # the hour is all but spent
    ex09.admit(db, "North", "B1", dict(O7, amount_cents=100))
    for _ in range(ex09.MAX_LOST + 1):
        with pytest.raises(ex09.OverBudget):
            ex09.work_one(db, provider, "North", clock=clock)
        assert ex09.status(db, "North", "B1") == ("waiting", "none")
        (clock.now,) = db.execute("SELECT not_before FROM work").fetchone()   # due again
    assert db.execute("SELECT sum(cents) FROM spend").fetchone() == (
        ex09.MAX_CENTS_PER_HOUR - 50,)
    clock.now = 14 * 3600
    assert ex09.start_next(db, "North", clock)["id"] == "North/B1"   # ...and its worker dies
    clock.now += ex09.LEASE_SECONDS + 1
    again = ex09.start_next(db, "North", clock)
    assert again is not None and again["id"] == "North/B1", ex09.status(db, "North", "B1")
    assert provider.calls == 0


class StallPastTheLease:
    """The provider as W1 sees it: it pays, and before its answer reaches W1,
    the lease runs out and W2 starts the operation again and finishes it."""

    def __init__(self, ex09, db, provider, clock):
        self.ex09, self.db, self.provider, self.clock = ex09, db, provider, clock

    def __getattr__(self, name):
        return getattr(self.provider, name)

    def confirm(self, *args, **kwargs):
        charge = self.provider.confirm(*args, **kwargs)
        self.clock.now += self.ex09.LEASE_SECONDS + 1
        assert self.ex09.work_one(self.db, self.provider, "North", clock=self.clock)
        return charge


def test_ex09_the_spend_budget_counts_an_operation_once_however_often_it_starts(ex09, practice):
    """Money is counted once per operation in each hour in which it may be
    paid, as its start passes the gate: W1 stalls past its lease, W2 starts
    the operation again in the same hour and confirms the same charge, and
    the hour's budget holds the amount once, not once per start."""
    clock = Clock(now=12 * 3600)
    db, provider = ex09.open_db(":memory:"), practice.Provider(clock)
    ex09.admit(db, "North", "O7", O7)
    assert ex09.work_one(db, StallPastTheLease(ex09, db, provider, clock), "North",
                         clock=clock) == "North/O7"
    assert (list(provider.charges), provider.paid()) == (["C1"], ["C1"])
    assert ex09.status(db, "North", "O7") == ("done", "C1")
    assert db.execute("SELECT sum(cents) FROM spend").fetchone() == (O7["amount_cents"],)


def test_ex09_the_spend_budget_is_shared_by_every_tenant(folder):
    """Study Drill 4: with a budget of $200.00, North's first charge takes the
    whole hour, and South's waits for the next, as North's second does."""
    set_constant(folder / "ex09_charge_worker.py", "MAX_CENTS_PER_HOUR", 20000)
    status, output = sandbox.run("python3 ex09_charge_worker.py spend", folder)
    assert status == 0, output
    assert "provider: new charge C1, $200.00, key North/B1" in output, output
    assert re.search(r"W2 runs South/B2 \(\$200\.00\)\n +refused: ", output), output
    assert "key South/B2" not in output, output


def test_ex09_a_failed_commit_leaves_no_transaction_open(ex09, tmp_path):
    """A COMMIT can fail: with SQLite's rollback journal it waits for readers,
    and gives up with "database is locked". transaction() then rolls back,
    so the worker's connection is not left inside a transaction holding the
    write lock: the worker, and a new worker, both carry on."""
    path = tmp_path / "shared.db"
    worker = ex09.open_db(path)
    worker.execute("PRAGMA busy_timeout = 50")           # give up on the reader soon
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT * FROM spend").fetchall()     # a read lock, held
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        with ex09.transaction(worker):
            ex09.spend(worker, 100, Clock())
    assert not worker.in_transaction
    reader.execute("COMMIT")
    newcomer = ex09.open_db(path)
    newcomer.execute("PRAGMA busy_timeout = 50")
    ex09.spend(newcomer, 200, Clock())                   # the write lock is free
    with ex09.transaction(worker):                       # and the worker goes on
        ex09.spend(worker, 300, Clock())
    assert newcomer.execute("SELECT sum(cents) FROM spend").fetchone() == (500,)


def test_ex09_a_ctrl_c_inside_a_transaction_undoes_it(ex09):
    """Ctrl-C arrives as KeyboardInterrupt, which is not an Exception:
    transaction() rolls back on it too, so the spend taken inside is given
    back and the connection does not keep its transaction, and the write
    lock every other worker waits for."""
    db = ex09.open_db(":memory:")
    with pytest.raises(KeyboardInterrupt):
        with ex09.transaction(db):
            ex09.spend(db, 100, Clock())
            raise KeyboardInterrupt
    assert not db.in_transaction
    assert db.execute("SELECT count(*) FROM spend").fetchone() == (0,)
