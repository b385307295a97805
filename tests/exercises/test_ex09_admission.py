"""Exercise 9, continued (Chapter 11): admission, status, cancelling, and the
slots a worker holds and gives back.

What the guide claims of ex09_charge_worker.py beyond its transcripts. Each
test runs the file from the folder under test (code/, or a learner's WORK)
in a fresh copy, and is graded for it.
"""

import re

import pytest

from tools.harness import sandbox
from tests.helpers import O7, Clock, TopOfRange, set_constant

pytestmark = pytest.mark.exercise("ex09_charge_worker.py")


def test_ex09_admission_limits_each_tenant_on_its_own(ex09):
    db, clock = ex09.open_db(":memory:"), Clock()
    for number in range(5):
        ex09.admit(db, "North", f"N{number}", dict(O7, invoice=number))
    with pytest.raises(ex09.Refused, match="tenant North already has 5 operations waiting"):
        ex09.admit(db, "North", "N5", dict(O7, invoice=5))
    ex09.admit(db, "South", "S0", dict(O7, tenant="South"))                    # another tenant is still admitted
    started = [ex09.start_next(db, "North", clock) for _ in range(3)]
    assert [m and m["id"] for m in started] == ["North/N0", "North/N1", None]  # 2 running at most
    assert ex09.start_next(db, "South", clock)["id"] == "South/S0"
    ex09.finish(db, started[0], "done")
    assert ex09.start_next(db, "North", clock)["id"] == "North/N2"   # a slot freed is a slot used
    ex09.admit(db, "North", "N5", dict(O7, invoice=5))                    # and a waiting slot, too


def test_ex09_cancelling_queued_work_has_no_effect_and_a_charge_cannot_be_cancelled(ex09, practice):
    clock = Clock()
    db, provider = ex09.open_db(":memory:"), practice.Provider(clock)
    for client_id in ("P1", "P2", "P3"):
        ex09.admit(db, "North", client_id, dict(O7, invoice=client_id))
    ex09.process(db, ex09.CreateThenConfirm(db, provider, clock), "North/P3",
                 dict(O7, invoice="P3"), clock)            # a call made, earlier
    assert ex09.work_one(db, provider, "North", clock=clock) == "North/P1"
    assert "cancelled" in ex09.cancel(db, "North", "P2")
    assert "cannot be cancelled now" in ex09.cancel(db, "North", "P3")   # it has called
    assert ex09.start_next(db, "North", clock)["id"] == "North/P3"   # P2, cancelled, never runs
    answer = ex09.cancel(db, "North", "P1")
    charge = ex09.status(db, "North", "P1")[1]
    assert "cannot be cancelled" in answer and charge in answer and "refund" in answer
    assert len(provider.paid()) == 2                     # P1's, and P3's from before


@pytest.mark.parametrize("running, waiting", [(2, 2), (1, 3)])
def test_ex09_admission_prints_the_limits_it_has(folder, running, waiting):
    """Study Drill 1: with other limits, `admission` admits as many as
    MAX_WAITING allows, and every limit it prints is the one it has."""
    set_constant(folder / "ex09_charge_worker.py", "MAX_RUNNING", running)
    set_constant(folder / "ex09_charge_worker.py", "MAX_WAITING", waiting)
    status, output = sandbox.run("python3 ex09_charge_worker.py admission", folder)
    assert status == 0, output
    limits = re.findall(r"(\d+) (?:operations )?(running|waiting)\b", output)
    assert limits and set(limits) <= {(str(running), "running"), (str(waiting), "waiting")}, \
        output
    first_tries = {}
    for submitted, answer in re.findall(r"(?m)^North submits (N\d+): (\w+)", output):
        first_tries.setdefault(submitted, answer)
    assert list(first_tries.values()).count("refused") == 2, output
    assert len(first_tries) == waiting + 2, output


def test_ex09_admitting_a_known_id_answers_with_its_status(ex09):
    """A client that submits again gets the operation's status, not a second
    operation; the same id with other inputs is a conflict."""
    db = ex09.open_db(":memory:")
    assert ex09.admit(db, "North", "O7", O7) == ("waiting", "none")
    assert ex09.admit(db, "North", "O7", dict(reversed(O7.items()))) == ("waiting", "none")
    with pytest.raises(ex09.Conflict):
        ex09.admit(db, "North", "O7", dict(O7, amount_cents=6000))
    assert db.execute("SELECT count(*) FROM work").fetchone() == (1,)
    for number in range(1, ex09.MAX_WAITING):
        ex09.admit(db, "North", f"N{number}", dict(O7, invoice=number))
    with pytest.raises(ex09.Refused):                    # North is full...
        ex09.admit(db, "North", "N99", dict(O7, invoice=99))
    assert ex09.admit(db, "North", "O7", O7) == ("waiting", "none")   # ...yet O7 is known


def test_ex09_status_follows_an_operation_until_it_is_charged(ex09, practice):
    """A client polls status: waiting, running, then done with its charge;
    an id nobody submitted has no status. While a charge may have been
    paid and no answer is recorded, its charge is `unknown`."""
    clock = Clock()
    db, provider = ex09.open_db(":memory:"), practice.Provider(clock, first_charge=9)
    assert ex09.status(db, "North", "O7") is None
    ex09.admit(db, "North", "O7", O7)
    assert ex09.status(db, "North", "O7") == ("waiting", "none")
    message = ex09.start_next(db, "North", clock)
    assert ex09.status(db, "North", "O7") == ("running", "none")
    with pytest.raises(practice.WorkerCrashed):    # paid, and no answer recorded
        ex09.process(db, ex09.CreateThenConfirm(db, practice.CrashAfterPaying(provider), clock),
                     message["id"], message["inputs"], clock)
    assert ex09.status(db, "North", "O7") == ("running", "unknown")
    ex09.deliver(db, ex09.CreateThenConfirm(db, provider, clock), message, [], clock=clock)
    ex09.finish(db, message, "done")
    assert ex09.status(db, "North", "O7") == ("done", "C9")


def test_ex09_two_tenants_may_use_one_id_and_never_meet(ex09, practice):
    """North's O7 and South's O7 are two operations, with two provider keys;
    neither tenant sees the other's."""
    clock = Clock()
    db, provider = ex09.open_db(":memory:"), practice.Provider(clock)
    south = dict(O7, tenant="South", amount_cents=100)
    assert ex09.admit(db, "North", "O7", O7) == ("waiting", "none")
    assert ex09.admit(db, "South", "O7", south) == ("waiting", "none")
    for tenant in ("North", "South"):
        assert ex09.work_one(db, provider, tenant, clock=clock) == f"{tenant}/O7"
    assert ex09.status(db, "North", "O7") == ("done", "C1")
    assert ex09.status(db, "South", "O7") == ("done", "C2")
    assert ex09.status(db, "South", "O8") is None
    keys = sorted(charge["key"] for charge in provider.charges.values())
    assert keys == [ex09.operation_id("North", "O7"), ex09.operation_id("South", "O7")]
    assert [charge["cents"] for charge in provider.charges.values()] == [5000, 100]


def test_ex09_a_dead_workers_slot_comes_back_after_its_lease(ex09):
    """Two workers die holding North's two running slots: North is blocked
    only until their leases run out; then the oldest is started again."""
    clock = Clock()
    db = ex09.open_db(":memory:")
    for number in range(1, 4):
        ex09.admit(db, "North", f"N{number}", dict(O7, invoice=number))
    assert ex09.start_next(db, "North", clock)["id"] == "North/N1"   # its worker dies
    assert ex09.start_next(db, "North", clock)["id"] == "North/N2"   # and this one too
    clock.now += ex09.LEASE_SECONDS
    assert ex09.start_next(db, "North", clock) is None               # within the leases
    clock.now += 1
    assert ex09.start_next(db, "North", clock)["id"] == "North/N1"   # delivered again
    assert ex09.start_next(db, "North", clock)["id"] == "North/N2"
    assert ex09.start_next(db, "North", clock) is None               # two live leases again


def test_ex09_an_operation_that_kills_its_worker_every_time_ends_dead(ex09):
    """A poison message: every worker that starts it dies, so no code of
    theirs marks it dead. It is started MAX_LOST times, then it is dead,
    for a person, with the reason, instead of being started again after
    every lease."""
    clock = Clock()
    db = ex09.open_db(":memory:")
    ex09.admit(db, "North", "N1", dict(O7, invoice=1))
    starts = 0
    for _ in range(10):
        if ex09.start_next(db, "North", clock):          # ...and its worker dies
            starts += 1
        clock.now += ex09.LEASE_SECONDS + 1
    assert ex09.status(db, "North", "N1") == ("dead", "none")
    assert starts == ex09.MAX_LOST < 10
    assert db.execute("SELECT last_error FROM work").fetchone() == (
        f"worker lost: the lease of start {ex09.MAX_LOST} ran out",)


def test_ex09_a_worker_whose_lease_ran_out_cannot_end_the_operation(ex09):
    """W1 stalls past its lease, and W2 starts the operation again. W1's late
    finish changes nothing: the operation is W2's, and so is its ending."""
    clock = Clock()
    db = ex09.open_db(":memory:")
    ex09.admit(db, "North", "N1", dict(O7, invoice=1))
    late = ex09.start_next(db, "North", clock)
    clock.now += ex09.LEASE_SECONDS + 1
    current = ex09.start_next(db, "North", clock)
    assert current["id"] == late["id"]
    ex09.finish(db, late, "dead")
    assert ex09.status(db, "North", "N1") == ("running", "none")
    ex09.finish(db, current, "done")
    assert ex09.status(db, "North", "N1") == ("done", "none")


def test_ex09_cancel_answers_for_dead_cancelled_and_unknown_operations(ex09, practice):
    """cancel() says what is true in every state: a dead operation may have
    been charged if its charge may have been paid, and the reconciler will
    find out; a cancelled one is cancelled; an id the tenant never used is
    unknown, whoever else used it."""
    clock = Clock()
    db, provider = ex09.open_db(":memory:"), practice.Provider(clock)
    for client_id in ("P1", "P2", "P3"):
        ex09.admit(db, "North", client_id, dict(O7, invoice=client_id))
    paid = ex09.start_next(db, "North", clock)             # P1: paid, then its worker died
    with pytest.raises(practice.WorkerCrashed):
        ex09.process(db, ex09.CreateThenConfirm(db, practice.CrashAfterPaying(provider), clock),
                     paid["id"], paid["inputs"], clock)
    ex09.finish(db, paid, "dead")
    ex09.finish(db, ex09.start_next(db, "North", clock), "dead")   # P2: never called
    answers = {client_id: ex09.cancel(db, "North", client_id)
               for client_id in ("P1", "P2", "P3", "P9")}
    answers["P3 again"] = ex09.cancel(db, "North", "P3")
    answers["South's P1"] = ex09.cancel(db, "South", "P1")
    assert not any("running" in answer for answer in answers.values()), answers
    assert "dead" in answers["P1"] and "may have been charged" in answers["P1"]
    assert "reconciler" in answers["P1"]
    assert "dead" in answers["P2"] and "nothing was charged" in answers["P2"]
    assert answers["P3"].startswith("North/P3 cancelled")
    assert "already cancelled" in answers["P3 again"]
    assert "no operation P9" in answers["P9"] and "no operation P1" in answers["South's P1"]
    assert [ex09.status(db, "North", c) for c in ("P1", "P2", "P3")] == [
        ("dead", "unknown"), ("dead", "none"), ("cancelled", "none")]


class BrokenProvider:
    """A provider client with a bug: every call raises what nobody expected."""

    def __getattr__(self, name):
        def broken(*args, **kwargs):
            raise KeyError("amount")
        return broken


def test_ex09_a_worker_gives_its_slot_back_on_every_way_out(ex09, practice):
    """work_one() frees its running slot whether the operation is charged,
    refused as a conflict (dead, for a person), put back after its tries,
    or ends in an exception nobody expected (dead, and the exception still
    reaches the caller)."""
    clock = Clock()
    db, provider = ex09.open_db(":memory:"), practice.Provider(clock)
    with pytest.raises(practice.WorkerCrashed):    # North/P2 was begun with other inputs
        ex09.process(db, practice.CrashBeforeCall(), "North/P2",
                     dict(O7, amount_cents=1), clock)
    for client_id in ("P1", "P2", "P3", "P4"):
        ex09.admit(db, "North", client_id, O7)
    paths = [("P1", provider, ("done", "C1")), ("P2", provider, ("dead", "none")),
             ("P3", practice.Outage(), ("waiting", "none"))]
    for client_id, used, after in paths:
        assert ex09.work_one(db, used, "North", clock=clock, rng=TopOfRange(),
                             sleep=lambda s: None) == f"North/{client_id}"
        assert ex09.status(db, "North", client_id) == after
    with pytest.raises(KeyError):
        ex09.work_one(db, BrokenProvider(), "North", clock=clock)
    assert ex09.status(db, "North", "P4") == ("dead", "none")
    reasons = dict(db.execute("SELECT id, last_error FROM work"))
    assert reasons["North/P1"] is None and reasons["North/P2"].startswith("Conflict:")
    assert reasons["North/P3"].startswith("503 Service Unavailable")
    assert reasons["North/P4"] == "KeyError: 'amount'"
    for client_id in ("P5", "P6"):
        ex09.admit(db, "North", client_id, O7)
    started = [ex09.start_next(db, "North", clock) for _ in range(2)]
    assert [m["id"] for m in started] == ["North/P5", "North/P6"]   # no slot was kept


def test_ex09_a_running_operation_asked_to_cancel_stops_at_its_safe_point(ex09, practice):
    """Cooperative cancellation: a client may ask to cancel an operation that
    is running but has not passed its gate; the worker checks at the gate,
    before any call, and ends it cancelled, with nothing sent or spent. Once
    a call may have been made, the request cannot be honoured: the answer
    says so, and the one key keeps it to one charge."""
    clock = Clock()
    db, provider = ex09.open_db(":memory:"), practice.Provider(clock)
    for client_id in ("P1", "P2"):
        ex09.admit(db, "North", client_id, dict(O7, invoice=client_id))
    first, second = (ex09.start_next(db, "North", clock) for _ in range(2))
    assert "asked to stop" in ex09.cancel(db, "North", "P1")
    ex09.see_through(db, provider, first, clock)
    assert ex09.status(db, "North", "P1") == ("cancelled", "none")
    assert provider.calls == 0 and db.execute("SELECT sum(cents) FROM spend").fetchone() == (None,)
    with pytest.raises(practice.WorkerCrashed):    # P2's worker dies after the call
        ex09.process(db, ex09.CreateThenConfirm(db, practice.CrashAfterPaying(provider), clock),
                     second["id"], second["inputs"], clock)
    answer = ex09.cancel(db, "North", "P2")
    assert "cannot be cancelled now" in answer and "asked to stop" not in answer
    clock.now += ex09.LEASE_SECONDS + 1
    assert ex09.work_one(db, provider, "North", clock=clock) == "North/P2"
    assert ex09.status(db, "North", "P2") == ("done", "C1")
    assert provider.paid() == ["C1"]


class StoppedMidCall:
    """The provider as a worker sees it when the worker is stopped while it
    waits for the answer: the provider has paid; the worker gets
    KeyboardInterrupt (Ctrl-C) or SystemExit (a SIGTERM handler that exits)."""

    def __init__(self, provider, stop):
        self.provider, self.stop = provider, stop

    def __getattr__(self, name):
        return getattr(self.provider, name)

    def confirm(self, *args, **kwargs):
        self.provider.confirm(*args, **kwargs)
        raise self.stop()


@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit])
def test_ex09_a_worker_stopped_mid_call_leaves_the_operation_to_its_lease(ex09, practice, stop):
    """Ctrl-C, or a deploy's SIGTERM, stops a worker while its call is in
    flight. The payment is not the operation's fault and not for a person:
    the operation stays running until its lease runs out, as a dead
    worker's would, and is then started again and charged once."""
    clock = Clock()
    db, provider = ex09.open_db(":memory:"), practice.Provider(clock)
    ex09.admit(db, "North", "O7", O7)
    with pytest.raises(stop):
        ex09.work_one(db, StoppedMidCall(provider, stop), "North", clock=clock)
    assert ex09.status(db, "North", "O7")[0] == "running"
    clock.now += ex09.LEASE_SECONDS + 1
    assert ex09.work_one(db, provider, "North", clock=clock) == "North/O7"
    assert ex09.status(db, "North", "O7") == ("done", "C1")
    assert provider.paid() == ["C1"]
