"""The O7 story's engine (tools/sims/o7/engine.py): Chapter 10's worked
case on ex09's own code, what the page may call and its text program."""
import contextlib
import io

import pytest

from tests.helpers import ask, run_program, tasks
from tools import course
from tools.sims.o7.engine import O7Story


def play_story(**options):
    story = O7Story(**options)
    while story.next() is None:
        pass
    state = story.state()
    story.close()
    return state


def test_the_o7_story_step_by_step():
    state = play_story()
    steps = state["steps"]
    assert [step["time"] for step in steps] == [
        "day 1 12:00", "day 1 12:01", "day 1 12:02", "day 1 12:02", "", "day 1 12:05",
        "day 1 12:05", "day 1 12:10", "day 1 12:11", "day 2 14:00", "day 2 14:00", ""]
    assert steps[0]["text"] == ("W1 takes North/O7 (invoice 7, $50.00) and calls the provider, "
                                "key North/O7")
    assert steps[0]["provider"] == ["provider: new charge C9, key North/O7"]
    assert steps[1]["text"] == ("W1 crashes before it records the charge or acknowledges "
                                "North/O7")
    assert steps[2]["provider"] == ["provider: key North/O7 again, same inputs: C9 again"]
    assert steps[4]["text"] == "the provider saw 2 calls and made 1 charge"
    assert steps[5]["provider"] == []                     # the changed amount: no call
    assert steps[6]["text"] == "W2 refuses it (Conflict) and parks it: 1 dead letter"
    assert steps[9]["provider"] == ["provider: charges with reference North/O8: C10"]
    assert steps[11]["text"] == "the provider made 2 charges for 2 operations"
    assert state["provider"] == {"calls": 3,
                                 "charges": [{"id": "C9", "reference": "North/O7"},
                                             {"id": "C10", "reference": "North/O8"}]}
    assert [(op["id"], op["state"], op["charge_id"]) for op in state["operations"]] == [
        ("North/O7", "charged", "C9"), ("North/O8", "charged", "C10")]
    assert state["dead_letters"] == [{"id": "North/O7", "inputs": {
        "tenant": "North", "invoice": 7, "amount_cents": 6000}}]
    assert tasks(state) == {"reconcile": True, "blind": False}


def story_lines(state):
    """The story's steps written as ex09's command line writes its lines."""
    lines = []
    for step in state["steps"]:
        lines.append(f"{step['time']:13}{step['text']}")
        lines += [f"{'':13}{line}" for line in step["provider"]]
    return lines


@pytest.mark.parametrize("blind", [False, True])
def test_the_o7_story_is_ex09s_own(blind):
    """Step by step, the simulation tells what `python3 ex09_charge_worker.py
    o7` prints, line for line (blind: with ex09's Break It made)."""
    ex09 = course.fresh("ex09_charge_worker.py")
    if blind:
        ex09.KEY_TRUSTED_SECONDS = 48 * 3600
    practice = course.fresh("ex09_practice_given.py", ex09_charge_worker=ex09)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        practice.print_o7()
    assert story_lines(play_story(blind=blind)) == printed.getvalue().splitlines()


def test_the_o7_story_earns_its_tasks_on_the_late_redelivery():
    for blind, task in [(False, "reconcile"), (True, "blind")]:
        story = O7Story(blind=blind)
        for _ in range(9):
            story.next()
        assert not any(tasks(story.state()).values())
        story.next()                    # O8, delivered again 26 hours later
        assert tasks(story.state())[task]
        story.close()


def test_the_blind_worker_charges_o8_a_second_time():
    ex09 = course.module("ex09_charge_worker.py")
    trusted = ex09.KEY_TRUSTED_SECONDS
    state = play_story(blind=True)
    assert ex09.KEY_TRUSTED_SECONDS == trusted            # the story's copy changed, not ex09
    late = state["steps"][9]
    assert late["text"].startswith("North/O8 is delivered again, 26 hours later")
    assert late["provider"] == ["provider: new charge C11, key North/O8"]
    assert state["steps"][11]["text"] == "the provider made 3 charges for 2 operations"
    assert [charge["reference"] for charge in state["provider"]["charges"]] == [
        "North/O7", "North/O8", "North/O8"]
    assert state["key_trusted_hours"] == 48 and tasks(state) == {"reconcile": False, "blind": True}


def test_the_o7_story_ends_and_starts_again_keeping_what_was_earned():
    story = O7Story()
    while story.next() is None:
        pass
    assert story.next() == "the story is over: reset to see it again"
    story.reset(blind=True)
    state = story.state()
    assert state["steps"] == [] and state["blind"] and tasks(state)["reconcile"]
    with pytest.raises(ValueError):
        story.reset(blind="yes")
    story.close()


def test_api_round_trip_for_the_o7_story(instances):
    assert ask("o7", "s1", "new", {"blind": True})["state"]["blind"] is True
    answer = ask("o7", "s1", "next")
    assert answer["result"] is None and answer["state"]["steps"][0]["time"] == "day 1 12:00"
    assert ask("o7", "s1", "reset", {"blind": False})["state"]["steps"] == []
    assert not ask("o7", "s1", "close_story")["ok"]


def test_the_o7_program_prints_the_story():
    story = run_program("o7", "--blind").splitlines()
    assert story[0] == ("day 1 12:00  W1 takes North/O7 (invoice 7, $50.00) and calls the "
                        "provider, key North/O7")
    assert story[1] == "             provider: new charge C9, key North/O7"
    assert story[-3] == "             provider: new charge C11, key North/O8"
    assert story[-1] == "             the provider made 3 charges for 2 operations"
