"""Exercise 9, optional (Chapter 11): ex09_webhooks.py takes the provider's
events in: a signed, fresh event is applied to its operation once; a
forged or stale one is refused and leaves nothing; an event that comes
before the worker's own record settles the operation; one for an
operation not known yet is refused, so that it comes again.

Each test drives the file from the folder under test (code/, or a
learner's WORK), with code/'s given file and ex09 beside it; it is graded
only for a folder that has the file (the catalogue marks it optional).
"""

import contextlib
import io
import sys

import pytest

from tests.helpers import O7, Clock, import_learner_file

pytestmark = pytest.mark.exercise("ex09_webhooks.py")


@pytest.fixture
def hooks(folder, monkeypatch, ex09):
    """The learner's webhooks file as a module, bound to the test's ex09."""
    monkeypatch.chdir(folder)
    monkeypatch.setitem(sys.modules, "ex09_charge_worker", ex09)
    with contextlib.redirect_stdout(io.StringIO()):
        yield import_learner_file(folder / "ex09_webhooks.py", "ex09_webhooks",
                                  beside=[folder / "ex09_charge_worker.py"])


class World:
    """A worker's database, a provider and a clock, with operations in the
    states the tests need, and the provider's events as it signs them."""

    def __init__(self, ex09, practice, hooks):
        self.ex09, self.practice, self.hooks = ex09, practice, hooks
        self.clock = Clock(now=12 * 3600)
        self.db, self.provider = ex09.open_db(":memory:"), practice.Provider(self.clock)

    def admit(self, client_id):
        self.ex09.admit(self.db, "North", client_id, dict(O7, invoice=client_id),
                        clock=self.clock)

    def run(self, provider=None, **retries):
        with contextlib.redirect_stdout(io.StringIO()):
            self.ex09.work_one(self.db, provider or self.provider, "North", clock=self.clock,
                               **retries)

    def post(self, event, secret=None, signed_at=None):
        body, header = self.practice.signed(event, secret or self.hooks.SECRET,
                                            self.clock() if signed_at is None else signed_at)
        return self.hooks.receive(self.db, body, header, self.clock)

    def status(self, client_id):
        return self.ex09.status(self.db, "North", client_id)

    def inbox(self):
        """The event ids kept (none, if no delivery was ever taken)."""
        if not self.db.execute("SELECT 1 FROM sqlite_master WHERE name = 'inbox'").fetchone():
            return []
        return self.db.execute("SELECT event_id FROM inbox").fetchall()


@pytest.fixture
def world(ex09, practice, hooks):
    return World(ex09, practice, hooks)


def test_webhooks_an_event_before_the_workers_own_record_settles_the_operation(world):
    """The provider paid, and its answer never reached the worker (a stall
    past the deadline): the operation waits, its charge unknown. The
    provider's event records the payment on it, and the operation is done,
    with the charge; the same event again does nothing more."""
    world.admit("W3")
    world.run(world.practice.Stalled(world.provider, 600))
    assert world.status("W3") == ("waiting", "unknown")
    [event] = world.provider.events
    assert "W3" in world.post(event)
    assert world.status("W3") == ("done", "C1")
    assert world.post(event) == "seen before: nothing done"
    assert world.inbox() == [(event["id"],)]
    world.clock.now += world.ex09.PUT_BACK_CAP
    world.run()                                          # nothing left to start
    assert world.status("W3") == ("done", "C1") and world.provider.paid() == ["C1"]


def test_webhooks_a_declined_event_fails_an_operation_with_no_answer_yet(world):
    """A decline the worker never heard of: the operation fails, with the
    event named as the reason; its charge is `none`."""
    world.admit("W2")
    world.provider.declining.add("North/W2")
    world.run(world.practice.Stalled(world.provider, 600))
    [event] = world.provider.events
    world.db.execute("UPDATE operations SET state = 'started'")   # as if unheard
    assert "failed" in world.post(event)
    assert world.status("W2") == ("failed", "none")


def test_webhooks_an_answer_recorded_stays(world):
    """An event that comes after the worker recorded the answer, or out of
    order, changes nothing: the answer once recorded stays."""
    world.admit("W1")
    world.run()
    [paid] = world.provider.events
    declined = dict(paid, id="evt_2", type="charge.declined")   # out of order, contradicting
    assert "already charged" in world.post(declined)
    assert "already charged" in world.post(paid)
    assert world.status("W1") == ("done", "C1")


def test_webhooks_a_forged_signature_is_refused_and_nothing_is_kept(world):
    """An event signed with another secret is refused before anything is
    written: no inbox row, and the operation as it was (a forged "paid"
    would mark an unpaid operation done)."""
    world.admit("W4")
    world.run(world.practice.Outage(), attempts=1)
    forged = {"id": "evt_9", "type": "charge.paid", "created": world.clock(),
              "charge": {"id": "C99", "operation": "North/W4", "cents": 5000}}
    with pytest.raises(world.hooks.Rejected, match="signature"):
        world.post(forged, secret=b"not the secret")
    body, header = world.practice.signed(forged, world.hooks.SECRET, world.clock())
    with pytest.raises(world.hooks.Rejected, match="signature"):   # the body changed after signing
        world.hooks.receive(world.db, body.replace(b"C99", b"C98"), header, world.clock)
    assert world.inbox() == [] and world.status("W4") == ("waiting", "none")


def test_webhooks_an_event_signed_too_long_ago_is_refused(world):
    """A delivery signed longer ago than TOLERANCE_SECONDS is refused, even
    with a good signature: a captured event replayed late. One within it
    is taken."""
    world.admit("W1")
    world.run(world.practice.Stalled(world.provider, 600))
    [event] = world.provider.events
    tolerance = world.hooks.TOLERANCE_SECONDS
    with pytest.raises(world.hooks.Rejected, match="too long ago"):
        world.post(event, signed_at=world.clock() - tolerance - 1)
    assert world.inbox() == []
    assert "W1" in world.post(event, signed_at=world.clock() - tolerance + 1)


def test_webhooks_an_event_for_an_operation_not_known_yet_comes_again(world):
    """An event for an operation with no record is refused, and its id is
    not kept, so that its next delivery, once the operation is known, is
    applied."""
    event = {"id": "evt_5", "type": "charge.paid", "created": world.clock(),
             "charge": {"id": "C5", "operation": "North/W5", "cents": 5000}}
    with pytest.raises(world.hooks.Rejected, match="North/W5"):
        world.post(event)
    assert world.inbox() == []
    world.admit("W5")
    world.ex09.write_down(world.db, "North/W5", dict(O7, invoice="W5"), world.clock)
    assert "W5" in world.post(event)
    assert world.inbox() == [("evt_5",)]


class FailsAtTheAnswer:
    """The endpoint's database, failing at the UPDATE that records the answer,
    as a crash there would: the inbox row was written just before."""

    def __init__(self, db):
        self.db = db

    def execute(self, sql, params=()):
        if sql.startswith("UPDATE operations"):
            raise RuntimeError("the endpoint died")
        return self.db.execute(sql, params)


def test_webhooks_the_inbox_and_the_answer_commit_together(world):
    """If recording the answer fails, the event's id is not kept either, so
    the provider's next delivery of it is applied, not skipped as seen."""
    world.admit("W3")
    world.run(world.practice.Stalled(world.provider, 600))
    [event] = world.provider.events
    body, header = world.practice.signed(event, world.hooks.SECRET, world.clock())
    with pytest.raises(RuntimeError):
        world.hooks.receive(FailsAtTheAnswer(world.db), body, header, world.clock)
    assert world.inbox() == []
    assert "W3" in world.post(event) and world.status("W3") == ("done", "C1")
