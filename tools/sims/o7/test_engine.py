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
    assert steps[0]["text"] == ("W1 takes North/O7 (invoice 7, $50.00): creates a charge, "
                                "stores its id, confirms it")
    assert steps[0]["provider"] == ["provider: new charge C9, $50.00, key North/O7",
                                    "provider: C9 paid"]
    assert steps[1]["text"] == ("W1 crashes before it records the payment or acknowledges "
                                "North/O7")
    assert steps[2]["provider"] == ["provider: key North/O7/confirm again: the same answer, C9"]
    assert steps[4]["text"] == "the provider saw 3 calls and made 1 charge"
    assert steps[5]["provider"] == []                     # the changed amount: no call
    assert steps[6]["text"] == "W2 refuses it (Conflict) and parks it: 1 dead letter"
    assert steps[9]["provider"] == ["provider: C10 was paid already: nothing more"]
    assert steps[11]["text"] == "the provider made 2 charges for 2 operations"
    assert [(charge["id"], charge["key"], charge["state"])
            for charge in state["provider"]["charges"]] == [
        ("C9", "North/O7", "paid"), ("C10", "North/O8", "paid")]
    assert [(op["id"], op["state"], op["charge_id"]) for op in state["operations"]] == [
        ("North/O7", "charged", "C9"), ("North/O8", "charged", "C10")]
    assert state["dead_letters"] == [{"id": "North/O7", "inputs": {
        "tenant": "North", "invoice": 7, "amount_cents": 6000, "currency": "usd"}}]
    assert tasks(state) == {"stored": True, "twice": False}


def story_lines(state):
    """The story's steps written as ex09's command line writes its lines."""
    lines = []
    for step in state["steps"]:
        lines.append(f"{step['time']:13}{step['text']}")
        lines += [f"{'':13}{line}" for line in step["provider"]]
    return lines


@pytest.mark.parametrize("one_request", [False, True])
def test_the_o7_story_is_ex09s_own(one_request, tmp_path):
    """Step by step, the simulation tells what `python3 ex09_charge_worker.py
    o7` prints, line for line (one_request: with ex09's Break It made, the
    reader's edit itself, in a copy)."""
    source = (course.CODE / "ex09_charge_worker.py").read_text()
    if one_request:
        assert source.count("self.provider.create(") == 1
        source = source.replace("self.provider.create(", "self.provider.charge(")
    (tmp_path / "ex09_charge_worker.py").write_text(source)
    ex09 = course.load(tmp_path / "ex09_charge_worker.py")
    practice = course.fresh("ex09_practice_given.py", ex09_charge_worker=ex09)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        practice.print_o7()
    assert story_lines(play_story(one_request=one_request)) == printed.getvalue().splitlines()


def test_the_o7_story_earns_its_tasks_on_the_late_redelivery():
    for one_request, task in [(False, "stored"), (True, "twice")]:
        story = O7Story(one_request=one_request)
        for _ in range(9):
            story.next()
        assert not any(tasks(story.state()).values())
        story.next()                    # O8, delivered again 26 hours later
        assert tasks(story.state())[task]
        story.close()


def test_paying_in_one_request_charges_o8_a_second_time():
    state = play_story(one_request=True)
    late = state["steps"][9]
    assert late["text"].startswith("North/O8 is delivered again, 26 hours later")
    assert late["provider"][:2] == ["provider: new charge C11, $20.00, key North/O8",
                                    "provider: C11 paid"]
    assert state["steps"][11]["text"] == "the provider made 3 charges for 2 operations"
    assert [charge["key"] for charge in state["provider"]["charges"]
            if charge["state"] == "paid"] == ["North/O7", "North/O8", "North/O8"]
    assert state["one_request"] and tasks(state) == {"stored": False, "twice": True}


def test_the_o7_story_ends_and_starts_again_keeping_what_was_earned():
    story = O7Story()
    while story.next() is None:
        pass
    assert story.next() == "the story is over: reset to see it again"
    story.reset(one_request=True)
    state = story.state()
    assert state["steps"] == [] and state["one_request"] and tasks(state)["stored"]
    with pytest.raises(ValueError):
        story.reset(one_request="yes")
    story.close()


def test_api_round_trip_for_the_o7_story(instances):
    assert ask("o7", "s1", "new", {"one_request": True})["state"]["one_request"] is True
    answer = ask("o7", "s1", "next")
    assert answer["result"] is None and answer["state"]["steps"][0]["time"] == "day 1 12:00"
    assert ask("o7", "s1", "reset", {"one_request": False})["state"]["steps"] == []
    assert not ask("o7", "s1", "close_story")["ok"]


def test_the_o7_program_prints_the_story():
    story = run_program("o7", "--one-request").splitlines()
    assert story[0] == ("day 1 12:00  W1 takes North/O7 (invoice 7, $50.00): creates a "
                        "charge, stores its id, confirms it")
    assert story[1] == "             provider: new charge C9, $50.00, key North/O7"
    assert "             provider: new charge C11, $20.00, key North/O8" in story
    assert story[-1] == "             the provider made 3 charges for 2 operations"


# ---- what the page's sequence diagram draws

def arrows(state, *kinds):
    return [(step["n"], arrow) for step in state["steps"] for arrow in step["arrows"]
            if not kinds or arrow["kind"] in kinds]


@pytest.mark.parametrize("one_request", [False, True])
def test_each_step_has_its_time_its_kind_and_its_lanes(one_request):
    state = play_story(one_request=one_request)
    steps = state["steps"]
    assert [step["kind"] for step in steps] == [
        "take", "crash", "deliver", "ack", "note", "deliver", "park",
        "take", "crash", "deliver", "ack", "note"]
    stamp = course.fresh("ex09_practice_given.py",
                         ex09_charge_worker=course.fresh("ex09_charge_worker.py")).Clock()
    for before, step in zip([None] + steps, steps):
        stamp.now = step["seconds"]
        if step["time"]:
            assert stamp.stamp() == step["time"] == f"{step['day']} {step['hour']}"
        else:                                   # a line that goes on from the one before
            assert step["seconds"] == before["seconds"] and step["day"] == step["hour"] == ""
    assert [lane["id"] for lane in state["lanes"]] == ["queue", "W1", "W2", "provider"]
    for n, arrow in arrows(state):
        worker = steps[n - 1]["worker"]
        assert worker is None or worker in steps[n - 1]["text"] + steps[n]["text"]
        assert {arrow["from"], arrow["to"]} <= {"queue", "provider", worker}
    # the $60.00 message names no worker: the next line says who took it
    assert steps[5]["text"].startswith("a message for North/O7") and steps[5]["worker"] == "W2"
    assert steps[4]["arrows"] == [{"from": None, "to": None, "kind": "note", "warning": "",
                                   "label": steps[4]["text"]}]


@pytest.mark.parametrize("one_request", [False, True])
def test_an_arrow_for_each_request_and_each_charge_marked(one_request):
    """One arrow to the provider for each call it counted; one of kind
    charge or twice for each payment it made, twice when the operation had
    been paid before."""
    state = play_story(one_request=one_request)
    calls = arrows(state, "call", "charge", "twice")
    assert len(calls) == state["provider"]["calls"]
    assert all(arrow["to"] == "provider" for _, arrow in calls)
    paid = [charge for charge in state["provider"]["charges"] if charge["state"] == "paid"]
    charges = arrows(state, "charge", "twice")
    assert [arrow["label"].split()[2] for _, arrow in charges] == [
        charge["id"] for charge in paid]
    twice = [(n, arrow["warning"]) for n, arrow in arrows(state, "twice")]
    if one_request:
        assert twice == [(10, "a second charge for North/O8")]
    else:
        assert twice == []
    assert all(not arrow["warning"] for _, arrow in arrows(state, "call", "charge"))


def test_the_late_redelivery_comes_after_the_key_window():
    """The provider keeps each operation's keys 24 hours from when it first
    answered under them: North/O8's window ends at day 2 12:10, before the
    redelivery at 14:00, whose confirm opens a new one. While the story is
    on day 1, no window has ended."""
    story = O7Story()
    for _ in range(9):
        story.next()
    hours = story.state()["key_window_hours"]
    assert not any(window["forgotten"] for window in story.state()["key_windows"])
    story.next()
    state = story.state()
    story.close()
    late = state["steps"][9]
    windows = state["key_windows"]
    assert [(window["operation"], window["step"], window["until_time"], window["forgotten"])
            for window in windows] == [("North/O7", 1, "day 2 12:00", True),
                                       ("North/O8", 8, "day 2 12:10", True),
                                       ("North/O8", 10, "day 3 14:00", False)]
    for window in windows:
        assert window["until"] - window["from"] == hours * 3600
        step = state["steps"][window["step"] - 1]
        assert step["seconds"] == window["from"]
        assert step["arrows"][window["arrow"]]["to"] == "provider"
        assert f"{window['until_day']} {window['until_hour']}" == window["until_time"]
    o8 = windows[1]
    assert late["seconds"] > o8["until"] and late["text"].endswith("forgotten its keys")
    assert windows[2]["label"] == "the provider forgets North/O8's keys"


def test_a_worker_gets_its_lane_when_it_first_acts():
    story = O7Story()
    assert [lane["id"] for lane in story.state()["lanes"]] == ["queue", "provider"]
    story.next()
    assert [lane["id"] for lane in story.state()["lanes"]] == ["queue", "W1", "provider"]
    story.next()
    story.next()
    assert [lane["id"] for lane in story.state()["lanes"]] == ["queue", "W1", "W2", "provider"]
    story.close()


def test_a_line_the_readings_do_not_know_is_a_note():
    from tools.sims.o7.engine import read
    assert read("the moon rises") == ("note", None, "the moon rises")
    assert read("a message for South/O1 arrives, for $5.00", "W3 records C1 and "
                "acknowledges South/O1") == ("deliver", "W3", "South/O1, $5.00")
