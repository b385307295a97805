"""The capstone's outside world, code/capstone/world_given.py: what Chapter 9
says of it. It is a given file (downloaded, never typed), so these tests
hold code/'s copy alone and are never graded: a learner's folder is not
collected for them (GRADED in tools/harness/plugin.py), and the capstone's
graded tests run code/'s copy beside the learner's files.
"""
import random

import pytest

from tools import course


class NoLuck(random.Random):
    """A network that loses nothing: every roll is above every loss chance."""

    def random(self):
        return 0.99


class Rolls(random.Random):
    """A network that rolls the numbers it is given, in turn."""

    def __init__(self, *rolls):
        super().__init__()
        self.rolls = list(rolls)

    def random(self):
        return self.rolls.pop(0)


@pytest.fixture
def module():
    """A copy of world_given.py of its own, loaded with the environment the
    test set (TINYQ_NO_KEYS is read as the module loads)."""
    return course.fresh("capstone/world_given.py")


@pytest.fixture
def world(module, tmp_path):
    world = module.World(tmp_path / "world.db", rng=NoLuck())
    yield world
    world.close()


def test_a_key_sent_again_with_the_same_inputs_is_a_repeat(world):
    """once(): a known key with the same inputs counts a repeat and answers
    with the first request's id."""
    first = world.send_email("ann@example.com", "Welcome!", key="welcome-1")
    assert world.send_email("ann@example.com", "Welcome!", key="welcome-1") == first
    assert world.db.execute("SELECT count(*), sum(repeats) FROM emails").fetchone() == (1, 1)


@pytest.mark.parametrize("service", ["mail provider", "bank"])
def test_a_key_reused_with_other_inputs_is_refused(module, world, service):
    """As Stripe does: a key names one request; another request under it is
    an error (KeyReused), not the first request's old answer."""
    if service == "bank":
        send, table = world.charge, "charges"
        first, other = (7, 500), (7, 900)
    else:
        send, table = world.send_email, "emails"
        first, other = ("ann@example.com", "Welcome!"), ("bob@example.com", "Welcome!")
    send(*first, key="k-1")
    with pytest.raises(module.KeyReused, match=f"{service}: key k-1 "):
        send(*other, key="k-1")
    assert world.db.execute(f"SELECT count(*), sum(repeats) FROM {table}").fetchone() == (1, 0)


def test_a_lost_reply_comes_after_the_effect_and_a_lost_request_before_it(module, tmp_path):
    """network(): a request that never arrives does nothing; a reply lost on
    its way back comes after the service acted: the caller sees the same
    kind of failure, and cannot tell which happened."""
    for rolls, error, rows in [((0.0,), ConnectionError, 0), ((0.99, 0.0), TimeoutError, 1)]:
        world = module.World(tmp_path / f"world-{rows}.db", rng=Rolls(*rolls))
        try:
            with pytest.raises(error):
                world.charge(7, 500, key="fee-7")
            assert world.db.execute("SELECT count(*) FROM charges").fetchone() == (rows,)
        finally:
            world.close()


def test_the_network_loses_15_percent_of_requests_and_15_percent_of_replies(module):
    """The chapter's numbers: 15% of requests are lost on the way there, and
    15% of replies on the way back."""
    assert (module.LOST_REQUEST, module.LOST_REPLY) == (0.15, 0.15)


@pytest.mark.parametrize("setting, emails", [
    ("1", (2, 0)),      # Break It: each request gets a new random key, so two emails
    ("1 ", (1, 1)),     # cmd.exe's value without quotes (Chapter 9's Windows note): keys stay on
])
def test_only_exactly_1_turns_the_keys_off(monkeypatch, tmp_path, setting, emails):
    """With TINYQ_NO_KEYS=1 the same email sent twice is two emails and no
    repeat; any other value, even "1 " with a trailing space, keeps the keys,
    and the second send is a repeat."""
    monkeypatch.setenv("TINYQ_NO_KEYS", setting)
    module = course.fresh("capstone/world_given.py")
    world = module.World(tmp_path / "world.db", rng=NoLuck())
    try:
        for _ in range(2):
            world.send_email("ann@example.com", "Welcome!", key="welcome-1")
        assert world.db.execute("SELECT count(*), sum(repeats) FROM emails").fetchone() == emails
    finally:
        world.close()
