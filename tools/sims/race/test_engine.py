"""The race stepper's engine (tools/sims/race/engine.py): ex05's two claims
stepped one statement at a time, every interleaving counted, what the page
may call and its text program."""
import inspect
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
    assert state["code"][0] == "def claim_atomic(db):"


# The statement each step runs, as the panel line it highlights must show it.
SHOWN = {"SELECT": ["SELECT", "status = 'queued'"],
         "if none: stop": ["is None"],
         "UPDATE to running": ["UPDATE", "'running'"],
         "UPDATE ... RETURNING": ["UPDATE", "RETURNING"],
         "send": ["HANDLERS[kind]"],
         "UPDATE to done": ["UPDATE", "'done'"]}


@pytest.mark.parametrize("claim", race.CLAIMS)
def test_the_next_line_shows_the_statement_the_worker_runs_next(opened, claim):
    stepper = opened(race.Race, claim)
    seen = []
    while not stepper.state()["workers"][0]["done"]:
        worker = stepper.state()["workers"][0]
        lines = [stepper.state()["code"][n - 1] for n in worker["next_lines"]]
        assert worker["next_line"] == worker["next_lines"][0]
        for text in SHOWN[worker["next_step"]]:
            assert text in "\n".join(lines), (worker["next_step"], lines)
        seen.append(worker["next_step"])
        stepper.step(0)
    assert len(seen) == {"naive": 5, "atomic": 4}[claim]


@pytest.mark.parametrize("claim", race.CLAIMS)
def test_the_code_panel_is_ex05s_own_source(opened, claim):
    ex05 = race.ex05
    code = "\n".join(opened(race.Race, claim).state()["code"])
    assert inspect.getsource(getattr(ex05, f"claim_{claim}")) in code + "\n"
    assert inspect.getsource(ex05.ack) in code + "\n"


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
    state = run_schedule(stepper, [0, 1, 0])
    assert [{key: entry[key] for key in ("worker", "step", "said")}
            for entry in state["log"]] == [
        {"worker": 0, "step": "SELECT", "said": "SELECT found job 1"},
        {"worker": 1, "step": "SELECT", "said": "SELECT found job 1"},
        {"worker": 0, "step": "if none: stop", "said": "it has job 1, so it goes on"}]
    # each entry says which lines ran and whether they read or wrote the table
    assert [entry["table"] for entry in state["log"]] == ["read", "read", None]
    update = state["workers"][0]["next_lines"]  # where worker 1's pointer is now
    state = run_schedule(stepper, [0])
    assert state["log"][-1]["lines"] == update and state["log"][-1]["table"] == "wrote"
    assert "UPDATE" in state["code"][update[0] - 1]
    stepper.reset()
    assert stepper.state()["log"] == []


def test_a_finished_worker_adds_nothing_to_the_log(opened):
    stepper = opened(race.Race, "atomic")
    state = run_schedule(stepper, [0, 0, 0, 0, 0])
    assert len(state["log"]) == 4 and state["workers"][0]["done"]


def locals_of(state):
    return [dict(worker["locals"]) for worker in state["workers"]]


def test_each_worker_shows_its_own_oldest_after_its_select(opened):
    stepper = opened(race.Race, "naive")
    assert locals_of(stepper.state()) == [{}, {}]
    state = run_schedule(stepper, [0])
    assert locals_of(state) == [{"oldest": "(1, 'welcome_email', …)"}, {}]
    state = run_schedule(stepper, [0, 0])          # past the UPDATE: the claim returned it
    assert locals_of(state)[0] == {"job": "(1, 'welcome_email', …)"}
    assert [w["holds"] for w in state["workers"]] == [1, None]


def test_a_late_select_finds_none_and_holds_nothing(opened):
    state = run_schedule(opened(race.Race, "naive"), [0, 0, 0, 1])
    assert locals_of(state)[1] == {"oldest": "None"}
    state = run_schedule(opened(race.Race, "atomic"), [0, 1])
    assert locals_of(state) == [{"job": "(1, 'welcome_email', …)"}, {"job": "None"}]
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
