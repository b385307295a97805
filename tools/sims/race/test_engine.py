"""The race stepper's engine (tools/sims/race/engine.py): ex05's two claims
stepped one statement at a time, every interleaving counted, what the page
may call and its text program."""
import ast
import copy
import inspect
import itertools
import json
import math
import re

import pytest

from tests.helpers import ask, run_program, tasks
from tools.sims.race import engine as race


def run_schedule(stepper, schedule):
    for worker in schedule:
        stepper.step(worker)
    return stepper.state()


def test_naive_claim_two_selects_before_the_updates_send_twice(opened):
    stepper = opened(race.Race, "naive")
    state = run_schedule(stepper, [0, 1])           # both SELECT: both see job 1 queued
    assert [w["last"] for w in state["workers"]] == ["SELECT found job 1"] * 2
    state = run_schedule(stepper, [0, 1, 0, 1, 0, 1, 0, 1])   # check, UPDATE, send, ack
    assert state["outbox"] == [{"job": 1, "worker": "worker 1", "duplicate": False},
                               {"job": 1, "worker": "worker 2", "duplicate": True}]
    assert state["result"] == "2 emails for 1 job: job 1 was sent twice"
    assert state["table"] == [{"id": 1, "status": "done", "kind": "welcome_email",
                               "args": '{"address": "ann@example.com"}', "worker": "worker 2"}]
    assert tasks(state) == {"duplicate": True, "atomic-safe": False}
    assert stepper.step(0) == "worker 1 has finished; it has nothing left to run"


def test_naive_claim_one_after_the_other_sends_once(opened):
    state = run_schedule(opened(race.Race, "naive"), [0] * 5 + [1, 1])
    assert state["result"] == "1 email for 1 job"
    assert state["workers"][1]["last"] == "no job, so it stops"
    assert not state["tasks"][0]["done"]


def test_atomic_claim_with_the_same_interleaving_sends_once(opened):
    stepper = opened(race.Race, "atomic")
    state = run_schedule(stepper, [0, 1, 0, 1, 0, 0])
    assert [w["last"] for w in state["workers"]] == [
        "UPDATE marked job 1 done", "no job, so it stops"]
    assert state["outbox"] == [{"job": 1, "worker": "worker 1", "duplicate": False}]
    assert state["result"] == "1 email for 1 job"
    assert tasks(state) == {"duplicate": False, "atomic-safe": True}


def test_atomic_claim_one_after_the_other_does_not_earn_the_task(opened):
    state = run_schedule(opened(race.Race, "atomic"), [0, 0, 0, 0, 1, 1])
    assert state["finished"] and not state["tasks"][1]["done"]


def test_reset_starts_again_and_keeps_what_was_earned(opened):
    stepper = opened(race.Race, "naive")
    run_schedule(stepper, [0, 1, 0, 1, 0, 1, 0, 1, 0, 1])
    stepper.reset(claim="atomic")
    state = stepper.state()
    assert state["claim"] == "atomic" and state["outbox"] == [] and not state["finished"]
    assert state["table"][0]["status"] == "queued"
    assert state["tasks"][0]["done"]
    assert state["program"][0]["label"] == "UPDATE ... RETURNING"


# The statement each step runs, as the page's line must show it.
SHOWN = {"SELECT": ["SELECT", "status = 'queued'"],
         "if none: stop": ["is None"],
         "UPDATE to running": ["UPDATE", "'running'"],
         "UPDATE ... RETURNING": ["UPDATE", "RETURNING"],
         "send": ["HANDLERS[kind]"],
         "UPDATE to done": ["UPDATE", "'done'"]}


@pytest.mark.parametrize("claim", race.CLAIMS)
def test_each_worker_says_which_step_it_runs_next(opened, claim):
    stepper = opened(race.Race, claim)
    seen = []
    while not stepper.state()["workers"][0]["done"]:
        state = stepper.state()
        worker = state["workers"][0]
        step = state["program"][worker["next"]]
        assert worker["next_step"] == step["label"]
        for text in SHOWN[step["label"]]:
            assert text in step["code"], step
        seen.append(worker["next_step"])
        stepper.step(0)
    assert stepper.state()["workers"][0]["next"] is None
    assert len(seen) == {"naive": 5, "atomic": 4}[claim]


def statements(tree):
    """Every statement in a tree, with each string's runs of white space made
    one space: how the page writes a statement's SQL on one line."""
    tree = copy.deepcopy(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = " ".join(node.value.split())
    return [ast.dump(node) for node in ast.walk(tree) if isinstance(node, ast.stmt)]


@pytest.mark.parametrize("claim", race.CLAIMS)
def test_each_step_is_one_of_ex05s_own_statements(opened, claim):
    """What a step shows is a statement of code/ex05_two_workers.py, on one
    line; but for the atomic claim's check, which is work()'s cut to one
    turn: it stops where work() would wait and look again."""
    ex05 = statements(ast.parse(inspect.getsource(race.ex05)))
    for step in opened(race.Race, claim).state()["program"]:
        line = step["code"]
        assert "\n" not in line, line
        shown = statements(ast.parse(line))[0]          # the line's own statement
        if claim == "atomic" and step["label"] == "if none: stop":
            assert line == "if job is None: return"
            assert "        if job is None:\n" in inspect.getsource(race.ex05.work)
        else:
            assert shown in ex05, line


def interleavings_with_one_job(claim):
    """Counted by hand. The worker that claims first runs its whole program:
    5 steps for the naive claim, 4 for the atomic. The other runs the whole
    program too if it also finds the job, or 2 steps (claim, stop) if not.
    Either worker may go first, so count the schedules where worker 1 does
    and double them. Atomic: worker 2's claim finds nothing wherever it
    falls after worker 1's first step: C(3 + 2, 2) schedules. Naive: worker
    2's SELECT finds the job if it comes before worker 1's UPDATE (its 3rd
    step). Of the C(9, 4) ways to place 5 + 5 steps after worker 1's first,
    those with worker 2 starting after worker 1's 3rd step (C(7, 2)) are the
    ones where it finds nothing, and then it has 2 steps: C(4, 2) ways."""
    if claim == "atomic":
        return 2 * math.comb(5, 2), 0
    both_find_it = math.comb(9, 4) - math.comb(7, 2)
    return 2 * (both_find_it + math.comb(4, 2)), 2 * both_find_it


@pytest.mark.parametrize("claim", race.CLAIMS)
def test_every_interleaving_with_one_job(claim):
    counted = race.every_interleaving(claim)
    schedules, duplicates = interleavings_with_one_job(claim)
    assert (counted["schedules"], counted["duplicates"]) == (schedules, duplicates)
    assert (counted["duplicates"] > 0) == (claim == "naive")
    assert (counted["example"] is None) == (claim == "atomic")


@pytest.mark.parametrize("claim, steps", [("naive", 5), ("atomic", 4)])
def test_every_interleaving_with_a_job_for_each_worker(claim, steps):
    # Two jobs: each worker always finds one, so every program has all its
    # steps and the schedules are the C(a + b, a) orders of two fixed lists.
    counted = race.every_interleaving(claim, jobs=2)
    assert counted["schedules"] == math.comb(2 * steps, steps)
    assert (counted["duplicates"] > 0) == (claim == "naive")


def test_the_example_schedule_sends_a_duplicate(opened):
    example = race.every_interleaving("naive")["example"]
    state = run_schedule(opened(race.Race, "naive"), example)
    assert state["result"] == "2 emails for 1 job: job 1 was sent twice"


# What the picture draws: each step in a log, each worker's local values and
# the job it believes it holds, and why so few orders are safe.

def test_the_log_has_one_entry_per_step_in_words(opened):
    stepper = opened(race.Race, "naive")
    assert stepper.state()["log"] == []
    assert stepper.state()["start"] == [[1, "queued", None]]     # the row before any step
    state = run_schedule(stepper, [0, 1, 0])
    assert [{key: entry[key] for key in ("worker", "step", "said")}
            for entry in state["log"]] == [
        {"worker": 0, "step": "SELECT", "said": "SELECT found job 1"},
        {"worker": 1, "step": "SELECT", "said": "SELECT found job 1"},
        {"worker": 0, "step": "if none: stop", "said": "it has job 1, so it goes on"}]
    # each entry says whether it read or wrote the table, what it found in
    # short, and the jobs row as it was after it: [id, status, worker]
    assert [entry["table"] for entry in state["log"]] == ["read", "read", None]
    assert [entry["short"] for entry in state["log"]] == [
        "found job 1", "found job 1", "has one: goes on"]
    assert [entry["rows"] for entry in state["log"]] == [[[1, "queued", None]]] * 3
    state = run_schedule(stepper, [0, 1, 1])         # both UPDATEs, worker 2's over 1's
    assert [entry["table"] for entry in state["log"][3:]] == ["wrote", None, "wrote"]
    assert [(entry["rows"], entry["over"]) for entry in state["log"][3:]] == [
        ([[1, "running", "worker 1"]], None),
        ([[1, "running", "worker 1"]], None),
        ([[1, "running", "worker 2"]], "worker 1")]
    assert state["log"][-1]["said"] == ("UPDATE marked job 1 running for worker 2, over "
                                        "worker 1's mark (the row said running)")
    stepper.reset()
    assert stepper.state()["log"] == []


def test_a_finished_worker_adds_nothing_to_the_log(opened):
    stepper = opened(race.Race, "atomic")
    state = run_schedule(stepper, [0, 0, 0, 0, 0])
    assert len(state["log"]) == 4 and state["workers"][0]["done"]


def test_a_worker_holds_its_job_from_its_mark_to_its_ack(opened):
    stepper = opened(race.Race, "naive")
    state = run_schedule(stepper, [0, 0])          # looked, not marked: holds nothing yet
    assert [w["holds"] for w in state["workers"]] == [None, None]
    state = run_schedule(stepper, [0])             # past the UPDATE
    assert [w["holds"] for w in state["workers"]] == [1, None]


def test_a_late_select_finds_none_and_holds_nothing(opened):
    state = run_schedule(opened(race.Race, "naive"), [0, 0, 0, 1])
    assert state["log"][-1]["short"] == "found none"
    state = run_schedule(opened(race.Race, "atomic"), [0, 1])
    assert state["log"][-1]["short"] == "matched none"
    assert [w["holds"] for w in state["workers"]] == [1, None]


def test_both_naive_workers_believe_they_hold_the_one_job(opened):
    state = run_schedule(opened(race.Race, "naive"), [0, 1, 0, 1, 0, 1])
    assert [w["holds"] for w in state["workers"]] == [1, 1]
    assert state["table"][0]["worker"] == "worker 2"      # the row names only one
    state = run_schedule(opened(race.Race, "naive"), [0, 0, 0, 0, 0])
    assert state["workers"][0]["holds"] is None            # acknowledged: done with it


def test_the_race_state_is_json(opened):
    stepper = opened(race.Race, "naive")
    state = run_schedule(stepper, [0, 1, 0, 1])
    assert json.loads(json.dumps(state)) == state


@pytest.mark.parametrize("claim", race.CLAIMS)
def test_every_interleaving_says_how_many_orders_are_safe_and_which(claim):
    counted = race.every_interleaving(claim)
    schedules, duplicates = interleavings_with_one_job(claim)
    assert counted["safe"] == schedules - duplicates
    # The safe orders are exactly those where one worker's whole claim ran
    # before the other's first step (2 * C(4, 2) = 12 for the naive claim).
    assert counted["apart"] == counted["safe"]
    assert counted["claim_steps"] == {"naive": 3, "atomic": 1}[claim]


# ---- what the page and the terminal get

def test_api_round_trip_for_the_race(instances):
    assert ask("race", "r1", "new", [{"claim": "atomic"}])["state"]["claim"] == "atomic"
    answer = ask("race", "r1", "step", [1])
    assert answer["result"] == "worker 2: UPDATE ... RETURNING claimed job 1"
    assert answer["state"]["table"][0]["worker"] == "worker 2"
    counts = ask("race", "r1", "every_interleaving", ["naive"])
    assert counts["ok"] and counts["result"]["duplicates"] > 0
    assert counts["state"]["claim"] == "atomic"          # the instance is untouched
    assert ask("race", "r1", "reset", {"claim": "naive"})["state"]["claim"] == "naive"


def test_api_a_bad_step_is_an_answer_too(instances):
    ask("race", "r", "new")
    answer = ask("race", "r", "step", [2])
    assert answer == {"ok": False, "error": "worker must be a whole number from 0 to 1, not 2"}
    assert ask("race", "r", "step", ["0", "extra"])["ok"] is False


def test_the_race_program():
    out = run_program("race")
    naive, duplicates = interleavings_with_one_job("naive")
    assert re.search(rf"claim_naive: +{naive} schedules, +{duplicates} send an email twice", out)
    assert re.search(r"claim_atomic: +20 schedules, +0 send an email twice", out)
    # as the page says: the naive claim is safe only when one claim runs whole first
    counts = race.every_interleaving("naive", 1)
    assert (f"  {counts['safe']} naive schedules are safe; in {counts['apart']} of them one "
            f"worker's whole claim runs before the other's first step") in out
    assert counts["safe"] == counts["apart"] == 12
    assert "worker 2: sent the email for job 1, a duplicate" in out
    assert out.rstrip().endswith("Result: 2 emails for 1 job: job 1 was sent twice")


# ---- the race drawn in time: each worker's gap, and where they overlap

def test_a_naive_workers_gap_runs_from_its_select_to_its_update(opened):
    stepper = opened(race.Race, "naive")
    state = run_schedule(stepper, [0])
    assert state["gaps"] == [{"worker": 0, "from": 0, "to": None}]   # looked, not marked
    assert state["overlap"] is None
    state = run_schedule(stepper, [1])
    assert state["overlap"] == {"from": 1, "to": None}    # both looked; neither marked
    state = run_schedule(stepper, [0, 0])                # worker 1 checks and marks
    assert state["gaps"] == [{"worker": 0, "from": 0, "to": 3},
                             {"worker": 1, "from": 1, "to": None}]
    assert state["overlap"] == {"from": 1, "to": 3}


def test_gaps_one_after_the_other_do_not_overlap(opened):
    state = run_schedule(opened(race.Race, "naive"), [0, 0, 0, 1, 1])
    # worker 2 looked after worker 1 marked, and found no job: no gap at all
    assert state["gaps"] == [{"worker": 0, "from": 0, "to": 2}]
    assert state["overlap"] is None


def test_the_atomic_claim_has_no_gap(opened):
    state = run_schedule(opened(race.Race, "atomic"), [0, 1, 0, 1, 0, 0])
    assert state["gaps"] == [] and state["overlap"] is None


def test_the_gaps_overlap_in_exactly_the_orders_that_send_twice(opened):
    """Every order of both workers' steps, with one job: the gaps overlap at
    the end if and only if the email went out twice."""
    stepper = opened(race.Race, "naive")
    seen = set()
    for order in itertools.product((0, 1), repeat=10):
        stepper.replay(list(order))
        state = stepper.state()
        schedule = tuple(entry["worker"] for entry in state["log"])
        if schedule in seen or not state["finished"]:
            continue
        seen.add(schedule)
        twice = any(email["duplicate"] for email in state["outbox"])
        assert (state["overlap"] is not None) == twice, schedule
    assert len(seen) == race.every_interleaving("naive")["schedules"]


def test_replay_goes_back_to_a_moment_and_keeps_what_was_earned(opened):
    stepper = opened(race.Race, "naive")
    run_schedule(stepper, [0, 1, 0, 1, 0, 1, 0, 1])      # a duplicate: the task is earned
    stepper.replay([0, 1, 0])
    fresh = run_schedule(opened(race.Race, "naive"), [0, 1, 0])
    state = stepper.state()
    assert state["log"] == fresh["log"] and state["table"] == fresh["table"]
    assert state["tasks"][0]["done"] and not fresh["tasks"][0]["done"]
    with pytest.raises(ValueError, match="schedule must be a list"):
        stepper.replay("010")
    with pytest.raises(ValueError, match="worker must be a whole number"):
        stepper.replay([0, 2])
