"""The simulation engines in tools/sims/: the killable queue, the race
stepper and the JSON API the page calls. Everything runs on the engines'
virtual clocks, so no test waits."""
import inspect
import json
import math
import re

import pytest

from tests.helpers import ask, run_program
from tools.sims import api
from tools.sims.killable_queue.engine import (ACK_SECONDS, HISTORY_SECONDS, POLL_SECONDS,
                                        SEND_SECONDS, KillableQueue)
from tools.sims.race import engine as race



# ---- helpers

@pytest.fixture
def opened():
    """opened(Engine, ...) makes an engine and closes it (its connections
    and its files) after the test."""
    engines = []

    def open_engine(engine, *args, **options):
        engines.append(engine(*args, **options))
        return engines[-1]

    yield open_engine
    for engine in engines:
        engine.close()


@pytest.fixture
def sim(opened):
    return opened(KillableQueue)


def tick_until(sim, condition, seconds=60):
    """Tick 0.1 s at a time until condition(state) holds; fail after seconds."""
    for _ in range(int(seconds * 10)):
        if condition(sim.state()):
            return sim.state()
        sim.tick(0.1)
    pytest.fail(f"not reached in {seconds} s: {sim.state()['events'][-5:]}")


def phase(index, name):
    return lambda state: state["workers"][index]["phase"] == name


def job(state, job_id):
    return next(row for row in state["jobs"] if row["id"] == job_id)


def emails_for(state, job_id):
    return [email for email in state["outbox"] if email["job"] == job_id]


def events(state, kind):
    return [event for event in state["events"] if event["kind"] == kind]


def tasks(state):
    return {task["id"]: task["done"] for task in state["tasks"]}


def all_done(state):
    return all(row["status"] == "done" for row in state["jobs"])


# ---- killable queue

def test_healthy_workers_send_each_email_once(sim):
    sim.enqueue(5)
    state = tick_until(sim, all_done)
    assert sorted(email["job"] for email in state["outbox"]) == [1, 2, 3, 4, 5]
    assert not any(email["duplicate"] for email in state["outbox"])
    assert [row["attempts"] for row in state["jobs"]] == [1] * 5
    assert [row["address"] for row in state["jobs"]][:2] == ["ann@example.com", "bob@example.com"]
    assert tasks(state) == {"die-holding": False, "takeover": False, "duplicate": False}


def test_a_kill_before_the_send_then_a_takeover_sends_one_email(sim):
    sim.enqueue(1)
    tick_until(sim, phase(0, "sending"))
    sim.tick(1.0)
    sim.kill(0)
    state = tick_until(sim, all_done)
    assert [email["worker"] for email in state["outbox"]] == ["worker 2"]
    assert job(state, 1)["attempts"] == 2
    takeover = events(state, "takeover")[0]["text"]
    assert takeover.endswith("worker 2 took over job 1 from worker 1 (attempt 2)")
    assert tasks(state) == {"die-holding": True, "takeover": True, "duplicate": False}


def test_a_kill_between_send_and_ack_makes_the_takeover_send_a_duplicate(sim):
    sim.enqueue(1)
    tick_until(sim, phase(0, "sent"))
    sim.tick(ACK_SECONDS / 2)
    sim.kill(0)
    state = tick_until(sim, all_done)
    assert [(e["worker"], e["duplicate"]) for e in emails_for(state, 1)] == [
        ("worker 1", False), ("worker 2", True)]
    assert "after sending the email, before acknowledging it" in events(state, "killed")[0]["text"]
    assert tasks(state)["duplicate"]


@pytest.mark.parametrize("lease, enqueue_at", [(5.0, 0.0), (3.0, 1.3)])
def test_a_dead_workers_job_is_its_own_until_the_lease_runs_out(opened, lease, enqueue_at):
    sim = opened(KillableQueue, lease=lease)
    if enqueue_at:
        sim.tick(enqueue_at)
    sim.enqueue(1)
    state = tick_until(sim, phase(0, "sending"))
    claimed_at = events(state, "claimed")[0]["time"]
    sim.kill(0)
    sim.tick(round(claimed_at + lease - 0.1 - sim.now(), 3))
    before = sim.state()
    assert before["time"] == pytest.approx(claimed_at + lease - 0.1)
    assert job(before, 1)["status"] == "running" and job(before, 1)["holder"] == "worker 1"
    assert job(before, 1)["lease_left"] == pytest.approx(0.1)
    assert not events(before, "expired") and not events(before, "takeover")
    sim.tick(0.2)
    after = sim.state()
    assert job(after, 1)["lease_left"] == pytest.approx(-0.1)
    assert events(after, "expired")[0]["time"] == pytest.approx(claimed_at + lease)
    # An idle worker takes it over at its next poll, and not before the lease ran out.
    state = tick_until(sim, lambda state: events(state, "takeover"), seconds=POLL_SECONDS)
    taken_at = events(state, "takeover")[0]["time"]
    assert claimed_at + lease < taken_at <= claimed_at + lease + POLL_SECONDS
    assert job(state, 1)["holder"] == "worker 2"


def test_set_lease_changes_the_lease_of_later_claims_only(sim):
    sim.enqueue(1)
    sim.step()                                   # worker 1 claims job 1 with a 5 s lease
    assert job(sim.state(), 1)["lease_left"] == 5.0
    sim.set_lease(2.5)
    assert job(sim.state(), 1)["lease_left"] == 5.0
    sim.enqueue(1)
    sim.step()                                   # worker 2 claims job 2 with the new lease
    state = sim.state()
    assert job(state, 2)["lease_left"] == 2.5 and state["lease"] == 2.5
    assert events(state, "lease")


def test_restart_brings_a_worker_back_as_a_new_process(sim):
    assert sim.kill(0) is None
    assert sim.kill(0) == "worker 1 is dead already"
    worker = sim.state()["workers"][0]
    assert (worker["alive"], worker["phase"]) == (False, "dead")
    assert sim.restart(0) is None
    assert sim.restart(0) == "worker 1 is running already"
    sim.enqueue(1)
    sim.step()
    worker = sim.state()["workers"][0]
    assert (worker["alive"], worker["phase"], worker["job"]) == (True, "sending", 1)


def test_a_restarted_worker_holds_nothing_and_the_old_claim_waits_for_its_lease(sim):
    sim.enqueue(1)
    tick_until(sim, phase(0, "sent"))
    sim.kill(0)
    sim.restart(0)
    state = tick_until(sim, lambda state: events(state, "takeover"))
    assert state["time"] > 5.0                   # claimed at 0.0 with a 5 s lease
    assert not events(state, "done")             # nobody acknowledged the old claim
    state = tick_until(sim, all_done)
    assert len(emails_for(state, 1)) == 2


def test_a_slow_worker_that_lost_its_job_does_not_mark_it_done(opened):
    # A lease shorter than send + ack: it runs out at 1.9 s, worker 2 takes
    # the job over at its 2.0 s poll, while worker 1 is still at work; worker
    # 1's ack at 2.5 s must then change nothing.
    sim = opened(KillableQueue, lease=1.9)
    sim.enqueue(1)
    state = tick_until(sim, lambda state: events(state, "lost"))
    assert "worker 1 lost job 1: another worker holds it" in events(state, "lost")[0]["text"]
    assert not events(state, "done")
    assert job(state, 1)["status"] == "running" and job(state, 1)["holder"] == "worker 2"
    assert [w["phase"] for w in state["workers"]][:2] == ["idle", "sending"]


def test_step_goes_to_the_next_thing_that_happens(sim):
    assert sim.step() == "nothing is waiting to happen: enqueue a job, or restart a worker"
    assert sim.now() == 0
    sim.enqueue(1)
    kinds = []
    while sim.step() is None:
        kinds.append(sim.state()["events"][-1]["kind"])
    assert kinds == ["claimed", "sent", "done"]
    assert sim.now() == SEND_SECONDS + ACK_SECONDS


def test_tasks_tick_exactly_when_earned(sim):
    def check(state):
        texts = [event["text"] for event in state["events"]]
        assert tasks(state) == {
            "die-holding": any("killed holding" in text for text in texts),
            "takeover": any("took over" in text for text in texts),
            "duplicate": any(email["duplicate"] for email in state["outbox"]),
        }

    sim.kill(2)                                  # holds nothing: does not count
    check(sim.state())
    sim.enqueue(2)
    kill_worker_1 = lambda: sim.kill(0)          # noqa: E731
    # Two claims, two sends, the kill between send and ack, worker 2's ack,
    # the lease running out, the takeover, the duplicate, its ack, nothing.
    for action in [sim.step] * 2 + [kill_worker_1] + [sim.step] * 6:
        action()
        check(sim.state())
    assert all(tasks(sim.state()).values())


def test_the_same_actions_give_the_same_state(opened):
    def run():
        sim = opened(KillableQueue)
        sim.enqueue(3)
        sim.tick(2.2)
        sim.kill(1)
        sim.set_lease(3)
        sim.tick(4)
        sim.restart(1)
        sim.enqueue(2)
        sim.step()
        sim.tick(10)
        return sim.state()

    state = run()
    assert state == run()
    # tinyq's fencing tokens count the claims of each job: no dice. Job 2's
    # worker was killed, so it was claimed twice.
    assert [(row["attempts"], row["token"]) for row in state["jobs"]] == [
        (1, 1), (2, 2), (1, 1), (1, 1), (1, 1)]


def test_the_state_is_json(sim):
    sim.enqueue(2)
    sim.tick(2.2)
    sim.kill(0)
    state = sim.state()
    assert json.loads(json.dumps(state)) == state
    assert {"time", "lease", "workers", "jobs", "outbox", "events", "tasks",
            "history"} <= set(state)
    assert state["workers"][1] == {"index": 1, "name": "worker 2", "alive": True,
                                   "phase": "sent", "job": 2, "seconds_left": 0.3}


def test_the_history_keeps_each_claim_its_send_its_lease_and_how_it_ended(sim):
    """What the picture draws: each claim on its worker's lane, from the
    claim to the ack (or the kill), the send inside it, the lease it was given."""
    sim.enqueue(1)
    tick_until(sim, phase(0, "sent"))
    sim.tick(ACK_SECONDS / 2)
    sim.kill(0)
    state = tick_until(sim, all_done)
    killed_at = SEND_SECONDS + ACK_SECONDS / 2
    taken_at = 5.0 + POLL_SECONDS        # the first poll after the 5 s lease ran out
    assert state["history"]["seconds"] == HISTORY_SECONDS
    assert state["history"]["claims"] == [
        {"worker": 0, "job": 1, "token": 1, "claimed": 0.0, "sent": SEND_SECONDS,
         "ended": killed_at, "end": "killed", "lease_until": 5.0, "duplicate": False},
        {"worker": 1, "job": 1, "token": 2, "claimed": taken_at,
         "sent": taken_at + SEND_SECONDS, "ended": taken_at + SEND_SECONDS + ACK_SECONDS,
         "end": "done", "lease_until": taken_at + 5.0, "duplicate": True}]
    assert state["history"]["deaths"] == [{"worker": 0, "time": killed_at}]
    assert state["history"]["restarts"] == []


def test_the_history_of_a_claim_still_running_is_open(sim):
    sim.enqueue(1)
    sim.step()                                   # worker 1 claims job 1
    sim.tick(0.5)
    claim, = sim.state()["history"]["claims"]
    assert (claim["sent"], claim["ended"], claim["end"]) == (None, None, None)
    assert claim["lease_until"] == 5.0
    sim.tick(SEND_SECONDS - 0.4)                 # 2.1 s: sent at 2.0 s, the ack due at 2.5 s
    claim, = sim.state()["history"]["claims"]
    assert (claim["sent"], claim["ended"]) == (SEND_SECONDS, None)


def test_a_slow_workers_lost_ack_ends_its_claim_as_lost(opened):
    sim = opened(KillableQueue, lease=1.9)
    sim.enqueue(1)
    state = tick_until(sim, lambda state: events(state, "lost"))
    first, second = state["history"]["claims"]
    assert (first["worker"], first["end"], first["lease_until"]) == (0, "lost", 1.9)
    assert first["ended"] == SEND_SECONDS + ACK_SECONDS > first["lease_until"]
    assert (second["worker"], second["end"]) == (1, None)


def test_a_kill_and_a_restart_at_the_same_moment_are_both_kept(sim):
    sim.tick(1)
    sim.kill(2)
    sim.restart(2)
    history = sim.state()["history"]
    assert history["deaths"] == [{"worker": 2, "time": 1.0}]
    assert history["restarts"] == [{"worker": 2, "time": 1.0}]
    assert history["claims"] == []               # it held nothing


def test_the_history_forgets_what_ended_before_its_window(sim):
    sim.enqueue(1)
    sim.tick(1)
    sim.kill(1)                                  # worker 2 holds nothing
    tick_until(sim, all_done)
    assert len(sim.state()["history"]["claims"]) == 1
    sim.tick(HISTORY_SECONDS - 1)                # the claim ended at 2.5 s
    assert len(sim.state()["history"]["claims"]) == 1
    assert sim.state()["history"]["deaths"] == []   # at 1.0 s: older than the window
    sim.tick(1)
    assert sim.state()["history"]["claims"] == []


def test_a_dead_workers_claim_stays_in_the_history_while_its_lease_runs(opened):
    sim = opened(KillableQueue, lease=100)
    sim.enqueue(1)
    sim.step()
    sim.kill(0)                                  # at 0.0 s, holding job 1 until 100 s
    sim.tick(HISTORY_SECONDS + 10)
    claim, = sim.state()["history"]["claims"]
    assert (claim["end"], claim["lease_until"]) == ("killed", 100.0)


def test_bad_arguments_are_refused(sim):
    for bad in [lambda: sim.kill(3), lambda: sim.kill(True), lambda: sim.tick(0),
                lambda: sim.set_lease(-1), lambda: sim.enqueue("2")]:
        with pytest.raises(ValueError):
            bad()


# ---- race stepper

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


# ---- the JSON API

def test_api_round_trip_for_the_killable_queue(instances):
    made = ask("killable-queue", "k1", "new", {"lease": 4})
    assert made["ok"] and made["state"]["lease"] == 4
    ask("killable-queue", "k1", "enqueue", [2])
    answer = ask("killable-queue", "k1", "tick", [2.2])
    assert answer["ok"] and answer["result"] is None
    assert [w["phase"] for w in answer["state"]["workers"]] == ["sent", "sent", "idle"]
    assert ask("killable-queue", "k1", "kill", [0])["state"]["workers"][0]["phase"] == "dead"
    assert ask("killable-queue", "k1", "kill", [0])["result"] == "worker 1 is dead already"
    assert ask("killable-queue", "k1", "close") == {"ok": True, "state": None, "result": True}
    assert ("killable-queue", "k1") not in instances


def test_api_round_trip_for_the_race(instances):
    assert ask("race", "r1", "new", [{"claim": "atomic"}])["state"]["claim"] == "atomic"
    answer = ask("race", "r1", "step", [1])
    assert answer["result"] == "worker 2: UPDATE ... RETURNING claimed job 1"
    assert answer["state"]["table"][0]["worker"] == "worker 2"
    counts = ask("race", "r1", "every_interleaving", ["naive"])
    assert counts["ok"] and counts["result"]["duplicates"] > 0
    assert counts["state"]["claim"] == "atomic"          # the instance is untouched
    assert ask("race", "r1", "reset", {"claim": "naive"})["state"]["claim"] == "naive"


@pytest.mark.parametrize("request_text, message", [
    ("not json", "not JSON"),
    ("[1, 2]", "must be a JSON object"),
    ('{"sim": "bank", "instance": "x", "method": "new"}', "unknown sim 'bank'"),
    ('{"sim": "race", "instance": "", "method": "new"}', "instance must be"),
    ('{"sim": "race", "instance": "x", "method": "close_connections"}', "unknown method"),
    ('{"sim": "race", "instance": "nobody", "method": "step", "args": [0]}', 'call "new" first'),
    ('{"sim": "race", "instance": "x", "method": "new", "args": {"claim": "clever"}}', "naive"),
    ('{"sim": "race", "instance": "x", "method": "new", "args": {"colour": 1}}', "colour"),
    ('{"sim": "race", "instance": "x", "method": "new", "args": 5}', "args must be"),
])
def test_api_errors_are_answers(instances, request_text, message):
    answer = json.loads(api.call(request_text))
    assert answer["ok"] is False and message in answer["error"]


def test_api_a_bad_step_is_an_answer_too(instances):
    ask("race", "r", "new")
    answer = ask("race", "r", "step", [2])
    assert answer == {"ok": False, "error": "worker must be a whole number from 0 to 1, not 2"}
    assert ask("race", "r", "step", ["0", "extra"])["ok"] is False


# ---- the text programs

def test_the_killable_queue_story():
    out = run_program("killable-queue")
    for line in ["0.0 s: worker 1 claimed job 1 (attempt 1)",
                 "2.2 s: worker 1 was killed holding job 1, "
                 "after sending the email, before acknowledging it",
                 "5.0 s: job 1's lease expired; worker 1 held it",
                 "5.5 s: worker 2 took over job 1 from worker 1 (attempt 2)",
                 "  4.   7.5 s  job 1 to ann@example.com, sent by worker 2  (duplicate)"]:
        assert line in out.splitlines()
    assert out.count("(duplicate)") == 1
    assert out == run_program("killable-queue")


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
