"""Exercise 9 (Chapter 10): a charge worker that charges once.

What the guide claims of ex09_charge_worker.py beyond its transcripts. Each
test runs the file from the folder under test (code/, or a learner's WORK)
in a fresh copy, and is graded for it.
"""

import random

import pytest

from tools.harness import sandbox
from tests.helpers import O7, Clock, FlakyProvider, TopOfRange

pytestmark = pytest.mark.exercise("ex09_charge_worker.py")


def charge(ex09, db, provider, op_id, inputs, clock):
    """process() with the provider in Stripe's shape, as the worker calls it."""
    return ex09.process(db, ex09.CreateThenConfirm(db, provider, clock), op_id, inputs, clock)


@pytest.mark.parametrize("moment", ["before the call", "after the provider's commit",
                                    "after local persistence"])
def test_ex09_a_crash_at_any_point_ends_with_exactly_one_charge(ex09, moment, practice):
    clock = Clock()
    db, provider = ex09.open_db(":memory:"), practice.Provider(clock)
    crashing_db, crashing_provider = db, provider
    if moment == "after local persistence":
        crashing_db = practice.CrashAfterRecord(db)
    elif moment == "before the call":
        crashing_provider = practice.CrashBeforeCall()
    else:
        crashing_provider = practice.CrashAfterPaying(provider)
    with pytest.raises(practice.WorkerCrashed):
        charge(ex09, crashing_db, crashing_provider, "O7", O7, clock)
    clock.now += 120                                     # redelivered two minutes later
    first = charge(ex09, db, provider, "O7", O7, clock)
    assert charge(ex09, db, provider, "O7", O7, clock) == first   # and again
    assert provider.paid() == [first]
    assert db.execute("SELECT state, charge_id FROM operations").fetchall() == [
        ("charged", first)]


def test_ex09_redelivery_after_the_providers_commit_returns_the_same_charge(ex09, practice):
    """The O7 case: the worker stored the charge's id before it was paid, so
    the redelivery confirms that same charge, and the provider pays once."""
    clock = Clock()
    db, provider = ex09.open_db(":memory:"), practice.Provider(clock, first_charge=9)
    with pytest.raises(practice.WorkerCrashed):
        charge(ex09, db, practice.CrashAfterPaying(provider), "O7", O7, clock)
    assert db.execute("SELECT state, charge_id FROM operations").fetchone() == ("started", "C9")
    message = {"id": "O7", "inputs": O7}
    assert ex09.deliver(db, ex09.CreateThenConfirm(db, provider, clock), message, [],
                        clock=clock) == "C9"
    assert provider.paid() == ["C9"]


def test_ex09_changed_inputs_under_one_id_are_a_conflict(ex09, practice):
    clock = Clock()
    db, provider = ex09.open_db(":memory:"), practice.Provider(clock)
    charge(ex09, db, provider, "O7", O7, clock)
    calls = provider.calls
    with pytest.raises(ex09.Conflict):
        charge(ex09, db, provider, "O7", dict(O7, amount_cents=6000), clock)
    assert provider.calls == calls                       # refused before the provider
    # the same inputs in another order are the same operation
    assert charge(ex09, db, provider, "O7", dict(reversed(O7.items())), clock) == "C1"


def test_ex09_transient_failures_wait_full_jitter_within_the_bound(ex09):
    waits = []
    message = {"id": "O7", "inputs": O7}
    for rng in (TopOfRange(), random.Random(3)):
        waits.append([])
        db, provider = ex09.open_db(":memory:"), FlakyProvider(ex09, 4)
        charge_id = ex09.deliver(db, provider, message, [], attempts=5, base=0.2, cap=1.0,
                                 sleep=waits[-1].append, rng=rng)
        assert (charge_id, provider.calls) == ("charge-O7", 5)
    ceilings = [0.2, 0.4, 0.8, 1.0]                      # base * 2**attempt, capped
    assert waits[0] == pytest.approx(ceilings)
    assert all(0 <= wait <= ceiling for wait, ceiling in zip(waits[1], ceilings))
    assert len(set(waits[1])) == 4 and waits[1] != waits[0]


def test_ex09_deliver_keeps_its_dead_letters(ex09):
    """deliver(db, provider, message, dead_letters): a message that fails on
    every try, or conflicts with the one first sent under its id, is
    appended to dead_letters with the error that ended it, and deliver()
    returns None. A conflict is not tried again, nor waited for."""
    db, dead = ex09.open_db(":memory:"), []
    down = FlakyProvider(ex09, failures=99)
    assert ex09.deliver(db, down, {"id": "O9", "inputs": O7}, dead, attempts=5,
                        sleep=lambda s: None) is None
    assert down.calls == 5
    fine = FlakyProvider(ex09, failures=0)
    assert ex09.deliver(db, fine, {"id": "O7", "inputs": O7}, dead) == "charge-O7"
    assert ex09.deliver(db, fine, {"id": "O7", "inputs": dict(O7, amount_cents=1)}, dead,
                        sleep=lambda s: pytest.fail("slept")) is None
    assert [letter["id"] for letter in dead] == ["O9", "O7"] and fine.calls == 1
    assert isinstance(dead[0]["error"], ex09.Retryable) and "503" in str(dead[0]["error"])
    assert isinstance(dead[1]["error"], ex09.Conflict)


def test_ex09_process_writes_only_its_record_before_the_call(ex09, practice):
    """Step 1 writes the operation down and nothing else: the first UPDATE
    that process() runs comes after the provider's commit (with a provider
    that charges in one call, as the source's contract has it). A worker
    that dies there leaves the charge made once, and the redelivery gets
    it back."""
    db, provider = ex09.open_db(":memory:"), practice.Provider(Clock())
    with pytest.raises(practice.WorkerCrashed):
        ex09.process(UpdatesFail(db, practice.WorkerCrashed), provider, "O7", O7)
    assert len(provider.paid()) == 1
    assert ex09.process(db, provider, "O7", O7) == provider.paid()[0]
    assert len(provider.paid()) == 1


class UpdatesFail:
    """A worker's database that fails at the first UPDATE: the worker dies
    there. Every other statement goes through."""

    def __init__(self, db, crash):
        self.db, self.crash = db, crash

    def execute(self, sql, params=()):
        if sql.lstrip().upper().startswith("UPDATE"):
            raise self.crash()
        return self.db.execute(sql, params)


def test_ex09_the_stored_charge_settles_a_redelivery_at_any_age(ex09, practice):
    """26 hours later the provider has forgotten the keys, but the worker
    stored each charge's id before it could be paid: it confirms that
    charge, which the provider pays at most once. A charge created but never
    confirmed is paid once; one paid already is not paid again."""
    clock = Clock()
    db, provider = ex09.open_db(":memory:"), practice.Provider(clock)
    with pytest.raises(practice.WorkerCrashed):          # paid, not recorded
        charge(ex09, db, practice.CrashAfterPaying(provider), "O8", O7, clock)

    class DiesBeforeConfirming:
        def __getattr__(self, name):
            if name == "confirm":
                raise practice.WorkerCrashed()
            return getattr(provider, name)

    with pytest.raises(practice.WorkerCrashed):          # created, never confirmed
        charge(ex09, db, DiesBeforeConfirming(), "O9", O7, clock)
    assert provider.paid() == ["C1"]
    clock.now += 26 * 3600
    assert charge(ex09, db, provider, "O8", O7, clock) == "C1"
    assert charge(ex09, db, provider, "O9", O7, clock) == "C2"
    assert provider.paid() == ["C1", "C2"] and len(provider.charges) == 2


def test_ex09_paying_in_one_request_charges_twice_after_the_key_window(folder):
    """Break It: with a charge created and paid in one request, nothing is
    stored before the money moves; O8's late redelivery, past the provider's
    key window, pays a second time."""
    sandbox.apply_edit(folder, "ex09_charge_worker.py", "self.provider.create(",
                       "self.provider.charge(")
    status, output = sandbox.run("python3 ex09_charge_worker.py o7", folder)
    assert status == 0, output
    assert "provider: new charge C11, $20.00, key North/O8" in output
    assert "the provider made 3 charges for 2 operations" in output


def test_ex09_a_new_id_is_a_new_intent_and_a_new_charge(folder):
    """Study Drill 1: the $60.00 message under a new id, O7b, is a new
    operation: the provider makes a new charge for it, and the replay says so."""
    status, output = sandbox.run("python3 ex09_charge_worker.py o7 --changed-id O7b", folder)
    assert status == 0, output
    assert "provider: new charge C10, $60.00, key North/O7b" in output, output
    assert "W2 records C10 and acknowledges North/O7b" in output, output
    assert "Conflict" not in output and output.endswith("3 charges for 3 operations\n"), output


@pytest.mark.parametrize("point, calls, record", [
    ("before-call", 2, "started, charge none"),
    ("after-commit", 3, "started, charge C1"),
    ("after-record", 2, "charged, charge C1")])
def test_ex09_the_crash_command_ends_in_one_charge_at_every_point(folder, point, calls, record):
    """Study Drills 3 to 5: W1 dies at each of the three points, W2 gets
    the operation again, and the provider made exactly one charge. W1's
    record says `started` with no charge when it died before the call
    (Drill 3), and with the charge's id when it died after the provider's
    commit (Drill 4: the id was stored before the payment, so W2 confirms
    that charge and nothing more is paid); it says `charged` when W1 died
    after recording it, and W2 makes no call at all (Drill 5)."""
    status, output = sandbox.run(f"python3 ex09_charge_worker.py crash {point}", folder)
    assert status == 0, output
    lines = output.splitlines()
    assert lines[-1] == f"the provider saw {calls} calls and made 1 charge", output
    assert sum("provider: new charge" in line for line in lines) == 1, output
    [crash] = [line for line in lines if line.startswith("W1 crashes")]
    assert crash.endswith(f"; our record: {record}"), output
