"""Exercise 9's given file, code/ex09_practice_given.py: its own machinery,
apart from any learner's worker. It is downloaded, never typed, so these
tests hold code/'s copy alone and are never graded (GRADED in
tools/harness/plugin.py).
"""
import contextlib
import io

import pytest

from tools import course


def practice():
    """The given file, importing code/'s worker."""
    with contextlib.redirect_stdout(io.StringIO()):
        return course.fresh("ex09_practice_given.py",
                            ex09_charge_worker=course.fresh("ex09_charge_worker.py"))


def test_taking_turns_holds_one_worker_while_the_others_go_on():
    """The replay's clock: a worker that waits holds its place for that long
    while the others run, in the same order every time; and a worker's
    error reaches the caller."""
    taking_turns = practice().TakingTurns

    def story():
        clock, seen = taking_turns(), []

        def waits():
            seen.append(("A calls", clock()))
            clock.advance(30)
            seen.append(("A answered", clock()))

        def ticks():
            for _ in range(3):
                seen.append(("B", clock()))
                clock.advance(20)
        clock.run(waits, ticks)
        return seen
    assert story() == story() == [("A calls", 0), ("B", 0), ("B", 20), ("A answered", 30),
                                  ("B", 40)]

    clock = taking_turns()

    def fails():
        clock.advance(5)
        raise ValueError("a bug in a worker")
    with pytest.raises(ValueError, match="a bug in a worker"):
        clock.run(fails, lambda: clock.advance(10))
