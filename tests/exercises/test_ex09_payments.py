"""Exercise 9 under a payments review (issue 46): what a payments engineer
attacks in a charge worker. The point of no return is fenced: a cancel
confirmed, or a start that lost its lease, never ends in a charge. A
healthy payment never waits for a person. Every operation ends. Budgets
bound what they say. A provider's no is an answer. And the source
document's interface: deliver() keeps its dead letters, process() writes
nothing but its record before the call.

Each test runs the file from the folder under test (code/, or a learner's
WORK) in a fresh copy, and is graded for it.
"""

import collections
import contextlib
import io
import random
import re
import sqlite3

import pytest

from tests.helpers import O7, Clock, Lands

pytestmark = pytest.mark.exercise("ex09_charge_worker.py")


def test_ex09_a_cancel_confirmed_is_never_charged(ex09, practice, tmp_path):
    """A client cancels while a worker starts the operation, between any two
    of its statements. Whatever the answer, it is the truth: told that the
    operation was stopped (or asked to stop before the call), the client is
    never charged; told that it has called the provider, the client is
    charged once."""
    answers = {}
    for after in range(12):
        path = tmp_path / f"cancel{after}.db"
        clock, db = Clock(), ex09.open_db(path)
        provider = practice.Provider(clock)
        ex09.admit(db, "North", "P3", O7)
        message = ex09.start_next(db, "North", clock)
        client = ex09.open_db(path)
        client.execute("PRAGMA busy_timeout = 0")        # locked: try before the next one
        lands = Lands(db, after, lambda: ex09.cancel(client, "North", "P3"))
        ex09.see_through(lands, provider, message, clock)
        answer = lands.answer if lands.landed else ex09.cancel(client, "North", "P3")
        charged = len(provider.paid())
        state, charge = ex09.status(db, "North", "P3")
        stopped = answer.startswith("North/P3 cancelled:") or "asked to stop" in answer
        if stopped:
            assert (charged, state, charge) == (0, "cancelled", "none"), (after, answer)
        else:
            assert "cannot be cancelled now" in answer and charged == 1, (after, answer)
        answers[stopped] = after
    assert set(answers) == {True, False}                 # both kinds of moment were tried


def test_ex09_a_start_that_lost_its_lease_records_spends_and_calls_nothing(ex09, practice):
    """W1 stalls past its lease before it reaches its gate, and W2 starts the
    operation again. When W1 wakes, its start is not the operation's own any
    more: while W2 holds it, and again after its client cancels it and is
    told nothing was charged, W1 writes no record, takes no money from the
    budget, and calls nobody."""
    clock = Clock()
    db, provider = ex09.open_db(":memory:"), practice.Provider(clock)
    ex09.admit(db, "North", "P5", O7)
    w1 = ex09.start_next(db, "North", clock)             # ...and W1 stalls
    clock.now += ex09.LEASE_SECONDS + 1
    w2 = ex09.start_next(db, "North", clock)
    ex09.see_through(db, provider, w1, clock)             # W1 wakes while W2 holds it
    assert provider.calls == 0 and ex09.status(db, "North", "P5") == ("running", "none")
    assert "asked to stop" in ex09.cancel(db, "North", "P5")
    ex09.see_through(db, provider, w2, clock)
    assert ex09.status(db, "North", "P5") == ("cancelled", "none")
    ex09.see_through(db, provider, w1, clock)             # W1 wakes again
    assert provider.calls == 0 and ex09.status(db, "North", "P5") == ("cancelled", "none")
    assert db.execute("SELECT count(*) FROM operations").fetchone() == (0,)
    assert db.execute("SELECT sum(cents) FROM spend").fetchone() == (None,)


def test_ex09_a_cancel_told_nothing_was_charged_stays_true(ex09, practice):
    """W0 and W1 both stall past their leases. W2's start takes back both
    slots and starts the older operation; the younger, P6, waits again, and
    its client cancels it and hears that nothing was charged. W1 wakes,
    holding P6's old start: it must not charge."""
    clock = Clock()
    db, provider = ex09.open_db(":memory:"), practice.Provider(clock)
    ex09.admit(db, "North", "P5", O7)
    ex09.admit(db, "North", "P6", dict(O7, invoice=6))
    ex09.start_next(db, "North", clock)                  # W0, which stalls
    w1 = ex09.start_next(db, "North", clock)             # W1, which stalls too
    clock.now += ex09.LEASE_SECONDS + 1
    assert ex09.start_next(db, "North", clock)["id"] == "North/P5"   # W2
    answer = ex09.cancel(db, "North", "P6")
    assert "nothing was charged" in answer, answer
    ex09.see_through(db, provider, w1, clock)             # W1 wakes
    assert provider.calls == 0 and ex09.status(db, "North", "P6") == ("cancelled", "none")


def test_ex09_an_outage_leaves_no_payment_for_a_person(ex09, practice):
    """The provider is down for ten minutes. An operation that runs out of
    tries, or of time, is not the operation's fault: it waits, ever longer,
    and is charged once, with its key, when the provider is back. No
    healthy payment is dead, for a person."""
    clock = Clock()
    db, provider = ex09.open_db(":memory:"), practice.Provider(clock)
    outage = practice.Outage()
    for number in range(3):
        ex09.admit(db, "North", f"P{number}", dict(O7, invoice=number))
    starts = 0
    while clock.now < 1000 + 600:                        # ten minutes down
        before = clock.now
        if ex09.work_one(db, outage, "North", clock=clock, sleep=clock.advance):
            starts += 1
        row = db.execute("SELECT not_before FROM work WHERE not_before > ?"
                         " ORDER BY not_before LIMIT 1", (clock.now,)).fetchone()
        clock.now = max(before + 1, row[0] if row else clock.now + 1)
    assert db.execute("SELECT id, last_error FROM work WHERE state = 'dead'").fetchall() == []
    assert starts > 3
    while any(ex09.status(db, "North", f"P{n}")[0] != "done" for n in range(3)):
        ex09.work_one(db, provider, "North", clock=clock, sleep=clock.advance)
        clock.now += 60
        assert clock.now < 1000 + 6 * 3600, "still not charged after six hours"
    assert len(provider.charges) == 3


def test_ex09_put_back_waits_grow_with_full_jitter(ex09, practice):
    """An operation put back again and again waits longer each time, a wait
    drawn at random up to a ceiling that doubles (Chapter 6's rule), not
    the same fixed wait for ever."""
    clock = Clock()
    db = ex09.open_db(":memory:")
    ex09.admit(db, "North", "P1", O7)
    waits = []
    for _ in range(6):
        while (message := ex09.start_next(db, "North", clock)) is None:
            clock.now += 1
            assert ex09.status(db, "North", "P1")[0] == "waiting"
        ex09.see_through(db, practice.Outage(), message, clock, attempts=1)
        (not_before,) = db.execute("SELECT not_before FROM work").fetchone()
        waits.append(not_before - clock.now)
    assert len(set(waits)) == 6, waits                   # drawn, not fixed
    assert max(waits[3:]) > 2 * max(waits[:2]), waits    # and growing


def test_ex09_every_operation_ends(ex09, practice):
    """An operation has an end, set when it is admitted: one that is still
    waiting past it is ended, with its reason, and never started again;
    its status says so."""
    clock = Clock()
    db = ex09.open_db(":memory:")
    ex09.admit(db, "North", "P1", O7, clock=clock)
    clock.now += ex09.EXPIRE_SECONDS + 1
    assert ex09.start_next(db, "North", clock) is None
    ex09.settle(db, practice.Provider(clock), clock)
    assert ex09.status(db, "North", "P1") == ("expired", "none")


def test_ex09_the_retry_budget_counts_calls_that_reach_the_provider(ex09, practice):
    """Starts refused before any call (the hour's money is spent) are not
    requests to the provider, and buy no retries: an operation that then
    meets a provider that is down gets one call, and waits."""
    clock = Clock(now=13 * 3600 - 30)                   # within the budget's window of 13:00
    db = ex09.open_db(":memory:")
    budget = practice.RetryBudget(clock)
    ex09.spend(db, ex09.MAX_CENTS_PER_HOUR, clock)       # the hour's money is gone
    for number in range(40):
        ex09.admit(db, f"T{number}", "B1", dict(O7, tenant=f"T{number}"))
        with pytest.raises(ex09.OverBudget):
            ex09.work_one(db, practice.Outage(), f"T{number}", clock=clock, budget=budget)
    clock.now = 13 * 3600
    outage = practice.Outage()
    ex09.admit(db, "North", "R1", O7)
    with pytest.raises(ex09.RetryLater):
        ex09.work_one(db, outage, "North", clock=clock, budget=budget, sleep=clock.advance)
    assert outage.calls == 1
    assert ex09.status(db, "North", "R1")[0] == "waiting"


@pytest.mark.parametrize("amount", [-100000, 0, 12.5, "5000", 10 ** 9])
def test_ex09_an_amount_out_of_bounds_is_refused_at_admission(ex09, amount):
    """Admission refuses an amount that is not whole cents, not positive, or
    above the most one operation may charge: nothing is queued and the
    spend budget is untouched."""
    db = ex09.open_db(":memory:")
    with pytest.raises(ex09.Refused):
        ex09.admit(db, "North", "M1", dict(O7, amount_cents=amount))
    assert db.execute("SELECT count(*) FROM work").fetchone() == (0,)
    assert db.execute("SELECT count(*) FROM spend").fetchone() == (0,)


def test_ex09_the_charge_is_for_the_tenant_who_asks(ex09):
    """North cannot queue a charge that names South, or no currency."""
    db = ex09.open_db(":memory:")
    with pytest.raises(ex09.Refused):
        ex09.admit(db, "North", "X1", dict(O7, tenant="South"))
    without_currency = {key: value for key, value in O7.items() if key != "currency"}
    with pytest.raises(ex09.Refused):
        ex09.admit(db, "North", "X2", without_currency)
    assert db.execute("SELECT count(*) FROM work").fetchone() == (0,)


def test_ex09_money_moved_in_an_hour_stays_within_the_budget(ex09, practice):
    """The provider is down from 12:00 to 15:00 while operations pile up.
    When it is back, the backlog is charged hour by hour: the money the
    provider moves in any hour is never more than the hour's budget."""
    clock = Clock(now=12 * 3600)
    db, provider = ex09.open_db(":memory:"), practice.Provider(clock)
    outage = practice.Outage()
    tenants = [f"T{number}" for number in range(15)]
    while clock.now < 18 * 3600:
        if clock.now % 120 == 0 and clock.now < 15 * 3600:
            for tenant in tenants:
                with contextlib.suppress(ex09.Refused):
                    ex09.admit(db, tenant, f"I{int(clock.now)}",
                               dict(O7, tenant=tenant, invoice=int(clock.now), amount_cents=1000),
                               clock=clock)
        for tenant in tenants:
            with contextlib.suppress(ex09.OverBudget, ex09.RetryLater):
                ex09.work_one(db, outage if clock.now < 15 * 3600 else provider, tenant,
                              clock=clock, sleep=lambda s: None)
        clock.now += 60
    moved = collections.Counter()
    for when, cents, _ in provider.payments:
        moved[int(when // 3600)] += cents
    assert moved and max(moved.values()) <= ex09.MAX_CENTS_PER_HOUR, moved


def test_ex09_a_decline_is_an_answer_not_an_unknown(ex09, practice):
    """The provider declines the card: nothing was charged, and asking
    again changes nothing. The operation ends failed, its charge `none`,
    with the reason; cancel says nothing was charged."""
    clock = Clock()
    db, provider = ex09.open_db(":memory:"), practice.Provider(clock)
    provider.declining.add("North/D1")
    ex09.admit(db, "North", "D1", O7)
    ex09.work_one(db, provider, "North", clock=clock)
    assert ex09.status(db, "North", "D1") == ("failed", "none")
    assert "nothing was charged" in ex09.cancel(db, "North", "D1")
    assert provider.paid() == []


class LockedAtTheRecord:
    """A worker's database that is busy at the worst moment: the UPDATE that
    records the charge, after the provider paid, fails as SQLite fails when
    another connection holds the file past the busy timeout."""

    def __init__(self, db):
        self.db = db

    def execute(self, sql, params=()):
        if "state = 'charged'" in sql:
            raise sqlite3.OperationalError("database is locked")
        return self.db.execute(sql, params)


def test_ex09_a_busy_database_leaves_a_paid_operation_to_its_lease(ex09, practice):
    """The provider paid, and the worker could not record it: the database
    was locked. That is not the payment's fault and not for a person: the
    operation keeps its lease, and the next start records the same charge."""
    clock = Clock()
    db, provider = ex09.open_db(":memory:"), practice.Provider(clock)
    ex09.admit(db, "North", "O7", O7)
    message = ex09.start_next(db, "North", clock)
    with pytest.raises(sqlite3.OperationalError):
        ex09.see_through(LockedAtTheRecord(db), provider, message, clock)
    assert ex09.status(db, "North", "O7") == ("running", "unknown")
    clock.now += ex09.LEASE_SECONDS + 1
    assert ex09.work_one(db, provider, "North", clock=clock) == "North/O7"
    assert ex09.status(db, "North", "O7") == ("done", "C1") and provider.paid() == ["C1"]


class StallsBeforeConfirming:
    """The provider as a stalled worker sees it: the charge is created and
    stored, and before the worker confirms it, the operation passes its end
    and the reconciler ends it. Then the late confirm goes out."""

    def __init__(self, ex09, db, provider, clock):
        self.ex09, self.db, self.provider, self.clock = ex09, db, provider, clock

    def __getattr__(self, name):
        return getattr(self.provider, name)

    def confirm(self, *args, **kwargs):
        self.clock.now += self.ex09.EXPIRE_SECONDS
        self.ex09.start_next(self.db, "North", self.clock)   # takes back the lost slot
        self.ex09.settle(self.db, self.provider, self.clock)
        return self.provider.confirm(*args, **kwargs)


def test_ex09_an_operation_ended_at_its_end_is_never_paid_late(ex09, practice):
    """A worker stalls until its operation is past its end and ended. If it
    stalled before storing a charge, its next step finds the operation
    failed and calls nobody; if after, the reconciler cancelled the stored
    charge at the provider, and the late confirm pays nothing. Either way
    the client reads `expired`, and no money moved."""
    clock = Clock()
    db, provider = ex09.open_db(":memory:"), practice.Provider(clock)
    ex09.admit(db, "North", "E1", O7, clock=clock)
    early = ex09.start_next(db, "North", clock)
    assert ex09.go_ahead(db, early, clock)                # past its gate, then it stalls
    clock.now += ex09.EXPIRE_SECONDS
    ex09.start_next(db, "North", clock)
    ex09.settle(db, provider, clock)
    assert ex09.status(db, "North", "E1") == ("expired", "none")
    dead = []
    assert ex09.deliver(db, ex09.CreateThenConfirm(db, provider, clock), early, dead,
                        clock=clock) is None             # the stalled worker wakes
    assert isinstance(dead[0]["error"], ex09.Declined) and provider.calls == 0
    ex09.admit(db, "North", "E2", dict(O7, invoice=2), clock=clock)
    late = ex09.start_next(db, "North", clock)
    assert late["id"] == "North/E2"
    stalled = StallsBeforeConfirming(ex09, db, provider, clock)
    ex09.see_through(db, stalled, late, clock)
    assert ex09.status(db, "North", "E2") == ("expired", "none")
    assert provider.paid() == [] and provider.charges["C1"]["state"] == "cancelled"


class StaleStartLandsFirst:
    """The reconciler's database, on which a worker that stalled past its
    lease lands its whole charge (create, store, confirm) just before the
    reconciler's UPDATE closes the operation's record: after the
    reconciler looked, before it wrote."""

    def __init__(self, db, land):
        self.db, self.land = db, land

    def execute(self, sql, params=()):
        if sql.startswith("UPDATE operations SET state") and self.land:
            self.land, land = None, self.land
            land()
        return self.db.execute(sql, params)


def test_ex09_a_charge_stored_while_the_reconciler_looks_is_not_lost(ex09, practice):
    """The reconciler finds an operation past its end with no charge, and
    ends it; meanwhile a stalled worker stores a charge and pays it, and has
    not recorded the payment yet. The reconciler's close does not hide that
    payment: it sees the charge stored since it looked, leaves the
    operation, and its next pass records the payment the provider reports.
    The client reads the truth: done, paid."""
    clock = Clock()
    db, provider = ex09.open_db(":memory:"), practice.Provider(clock)
    ex09.admit(db, "North", "E3", O7, clock=clock)
    stale = ex09.start_next(db, "North", clock)
    assert ex09.go_ahead(db, stale, clock)                # past its gate, then it stalls
    clock.now += ex09.EXPIRE_SECONDS
    ex09.start_next(db, "North", clock)                   # its lease is taken back

    def stale_worker_pays():                             # and stalls again before its record
        paying = ex09.CreateThenConfirm(db, practice.CrashAfterPaying(provider), clock)
        with pytest.raises(practice.WorkerCrashed):
            ex09.process(db, paying, stale["id"], stale["inputs"], clock)

    ex09.settle(StaleStartLandsFirst(db, stale_worker_pays), provider, clock)
    assert provider.paid() == ["C1"]
    ex09.settle(db, provider, clock)
    assert ex09.status(db, "North", "E3") == ("done", "C1")


def run_workload(practice):
    """Run the `workload` replay; return its table's rows, as (running North,
    running South, waiting North, waiting South, calls open), and each
    tenant's slowest time from arriving to done, in seconds."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        practice.show_workload()
    rows = [tuple(int(n) for n in row) for row in re.findall(
        r"^\d\d:\d\d:\d\d +(\d+)/(\d+) +(\d+)/(\d+) +(\d+) ", printed.getvalue(), re.M)]
    slowest = dict(re.findall(r"^(\w+): .*; the slowest done (\d+) s", printed.getvalue(),
                              re.M))
    assert rows and set(slowest) == {"North", "South"}, printed.getvalue()
    return rows, {tenant: int(seconds) for tenant, seconds in slowest.items()}, printed


def test_ex09_a_stalled_tenant_cannot_hold_up_the_other(ex09, practice):
    """The source document's controlled workload, run once by `workload`:
    while the provider keeps North's calls waiting, North holds no more
    than its running slots, so the third worker serves South at once; and
    at the end nothing runs, waits or is left open, as at the start."""
    rows, slowest, printed = run_workload(practice)
    assert max(open_calls for *_, open_calls in rows) == ex09.MAX_RUNNING
    assert max(row[0] for row in rows) <= ex09.MAX_RUNNING
    assert slowest["South"] <= 1, printed.getvalue()
    assert rows[0] == rows[-1] == (0, 0, 0, 0, 0)
    assert "the provider paid 10 charges, 0 of them twice" in printed.getvalue()


def test_ex09_a_tenant_allowed_every_worker_holds_up_the_other(ex09, practice, monkeypatch):
    """Chapter 11's Study Drill 5: with as many running slots as workers, North's
    stalled calls take every worker, and South waits for one."""
    monkeypatch.setattr(ex09, "MAX_RUNNING", 3)
    rows, slowest, printed = run_workload(practice)
    assert max(open_calls for *_, open_calls in rows) == 3
    assert slowest["South"] > 10, printed.getvalue()



def test_ex09_a_statement_waits_for_the_lock_at_most_the_busy_timeout(ex09, tmp_path):
    """The worker's statements do not get the deadline (Chapter 11): each
    waits for SQLite's write lock for at most the connection's busy
    timeout, 5 s, and then fails with "database is locked"."""
    path = tmp_path / "locked.db"
    holder, db = ex09.open_db(path), ex09.open_db(path)
    assert db.execute("PRAGMA busy_timeout").fetchone() == (5000,)
    holder.execute("BEGIN IMMEDIATE")
    db.execute("PRAGMA busy_timeout = 0")           # the same failure, without the 5 s
    with pytest.raises(sqlite3.OperationalError, match="database is locked"):
        ex09.admit(db, "North", "P1", O7)


def test_ex09_retry_budgets_per_worker_bound_the_whole_service(ex09, practice):
    """Each worker keeps its own retry budget, and together they
    bound the service. Three workers, each with its own, share an outage of
    five minutes: all their retries are at most a tenth of all their calls."""
    clock, outage, rng = Clock(), practice.Outage(), random.Random(1)
    budgets = [practice.RetryBudget(clock) for _ in range(3)]
    for number in range(600):
        clock.now = max(clock.now, number * 0.5)
        message = {"id": f"M{number}", "inputs": dict(O7, invoice=number)}
        with contextlib.suppress(ex09.RetryLater):
            ex09.deliver(ex09.open_db(":memory:"), outage, message, [], sleep=clock.advance,
                         budget=budgets[number % 3], rng=rng, clock=clock)
    retries = outage.calls - 600
    assert 0 < retries <= ex09.RETRY_RATIO * outage.calls, (retries, outage.calls)
