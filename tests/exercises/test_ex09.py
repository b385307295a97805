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
        crashing_provider = practice.CrashAfterCall(provider)
    with pytest.raises(practice.WorkerCrashed):
        ex09.process(crashing_db, crashing_provider, "O7", O7, clock)
    clock.now += 120                                     # redelivered two minutes later
    first = ex09.process(db, provider, "O7", O7, clock)
    assert ex09.process(db, provider, "O7", O7, clock) == first    # and again: no change
    assert list(provider.charges) == [first]
    assert db.execute("SELECT state, charge_id FROM operations").fetchall() == [
        ("charged", first)]


def test_ex09_redelivery_after_the_providers_commit_returns_the_same_charge(ex09, practice):
    """The O7 case: the provider sees two calls and makes one charge."""
    clock = Clock()
    db, provider = ex09.open_db(":memory:"), practice.Provider(clock, first_charge=9)
    with pytest.raises(practice.WorkerCrashed):
        ex09.process(db, practice.CrashAfterCall(provider), "O7", O7, clock)
    assert ex09.deliver(db, provider, {"id": "O7", "inputs": O7}, clock=clock) == "C9"
    assert (provider.calls, list(provider.charges)) == (2, ["C9"])


def test_ex09_changed_inputs_under_one_id_are_a_conflict(ex09, practice):
    clock = Clock()
    db, provider = ex09.open_db(":memory:"), practice.Provider(clock)
    ex09.process(db, provider, "O7", O7, clock)
    with pytest.raises(ex09.Conflict):
        ex09.process(db, provider, "O7", dict(O7, amount_cents=6000), clock)
    assert provider.calls == 1                           # refused before the provider
    # the same inputs in another order are the same operation
    assert ex09.process(db, provider, "O7", dict(reversed(O7.items())), clock) == "C1"


def test_ex09_transient_failures_wait_full_jitter_within_the_bound(ex09):
    waits = []
    message = {"id": "O7", "inputs": O7}
    for rng in (TopOfRange(), random.Random(3)):
        waits.append([])
        db, provider = ex09.open_db(":memory:"), FlakyProvider(ex09, 4)
        charge = ex09.deliver(db, provider, message, attempts=5, base=0.2, cap=1.0,
                              sleep=waits[-1].append, rng=rng)
        assert (charge, provider.calls) == ("charge-O7", 5)
    ceilings = [0.2, 0.4, 0.8, 1.0]                      # base * 2**attempt, capped
    assert waits[0] == pytest.approx(ceilings)
    assert all(0 <= wait <= ceiling for wait, ceiling in zip(waits[1], ceilings))
    assert len(set(waits[1])) == 4 and waits[1] != waits[0]


def test_ex09_persistent_failures_and_conflicts_are_parked_with_their_reason(ex09):
    """A message that fails on every try, or conflicts with an earlier one,
    is parked for a person: deliver() raises Parked, saying why; a conflict
    is parked at once, without a wait or a second call."""
    db = ex09.open_db(":memory:")
    down = FlakyProvider(ex09, failures=99)
    message = {"id": "O7", "inputs": O7}
    with pytest.raises(ex09.Parked, match="503 Service Unavailable; no tries left"):
        ex09.deliver(db, down, message, attempts=5, sleep=lambda s: None)
    assert down.calls == 5
    fine = FlakyProvider(ex09, failures=0)
    ex09.deliver(db, fine, {"id": "O8", "inputs": O7})
    changed = {"id": "O8", "inputs": dict(O7, amount_cents=1)}
    with pytest.raises(ex09.Parked, match="Conflict"):
        ex09.deliver(db, fine, changed, sleep=lambda s: pytest.fail("slept"))
    assert fine.calls == 1                               # a conflict is not retried


def test_ex09_after_the_key_window_the_worker_reconciles(ex09, practice):
    """A redelivery after the provider forgot the key finds the charge instead
    of making a second one; with nothing to find, it charges once."""
    clock = Clock()
    db, provider = ex09.open_db(":memory:"), practice.Provider(clock)
    with pytest.raises(practice.WorkerCrashed):
        ex09.process(db, practice.CrashAfterCall(provider), "O8", O7, clock)
    with pytest.raises(practice.WorkerCrashed):
        ex09.process(db, practice.CrashBeforeCall(), "O9", O7, clock)
    clock.now += 26 * 3600
    assert ex09.process(db, provider, "O8", O7, clock) == "C1"
    assert ex09.process(db, provider, "O9", O7, clock) == "C2"
    assert list(provider.charges) == ["C1", "C2"] and provider.calls == 2


def test_ex09_trusting_keys_forever_charges_twice(folder):
    """Break It: with KEY_TRUSTED_SECONDS beyond the provider's window, the
    O7 command's late redelivery of O8 is a blind retry, and a second charge."""
    sandbox.apply_edit(folder, "ex09_charge_worker.py", "KEY_TRUSTED_SECONDS = 23 * 3600",
                       "KEY_TRUSTED_SECONDS = 48 * 3600")
    status, output = sandbox.run("python3 ex09_charge_worker.py o7", folder)
    assert status == 0, output
    assert "provider: new charge C11, key North/O8" in output
    assert "the provider made 3 charges for 2 operations" in output


def test_ex09_a_new_id_is_a_new_intent_and_a_new_charge(folder):
    """Study Drill 1: the $60.00 message under the id O7b is a new operation:
    the provider makes a new charge for it."""
    sandbox.apply_edit(folder, "ex09_practice_given.py", 'changed = {"id": o7["id"],',
                       'changed = {"id": worker.operation_id("North", "O7b"),')
    status, output = sandbox.run("python3 ex09_charge_worker.py o7", folder)
    assert status == 0 and "provider: new charge C10, key North/O7b" in output, output


@pytest.mark.parametrize("point, calls, record", [
    ("before-call", 1, "started, charge none"),
    ("after-commit", 2, "started, charge none"),
    ("after-record", 1, "charged, charge C1")])
def test_ex09_the_crash_command_ends_in_one_charge_at_every_point(folder, point, calls, record):
    """Study Drills 3 to 5: W1 dies at each of the three points, W2 gets
    the operation again, and the provider made exactly one charge. W1's
    record says `started` when it died before the call (Drill 3) or after
    the provider's commit (Drill 4: two calls, one charge, the key answering
    the second); it holds C1 when W1 died after recording it, and W2 makes
    no call at all (Drill 5)."""
    status, output = sandbox.run(f"python3 ex09_charge_worker.py crash {point}", folder)
    assert status == 0, output
    lines = output.splitlines()
    assert lines[-1] == f"the provider saw {calls} call{'s' * (calls > 1)} and made 1 charge", \
        output
    assert sum("provider: new charge" in line for line in lines) == 1, output
    [crash] = [line for line in lines if line.startswith("W1 crashes")]
    assert crash.endswith(f"; our record: {record}"), output
