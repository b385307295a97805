"""The killable queue's engine (tools/sims/killable_queue/engine.py), on
the capstone's tinyq: kills, leases, takeovers, the history its picture
draws, what the page may call and its text program. Everything runs on the
engine's virtual clock, so no test waits."""
import json

import pytest

from tests.helpers import PROSE, ask, run_program, tasks
from tools.sims.killable_queue.engine import (ACK_SECONDS, HISTORY_SECONDS, POLL_SECONDS,
                                              SEND_SECONDS, KillableQueue)


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


def all_done(state):
    return all(row["status"] == "done" for row in state["jobs"])


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
    # tinyq's fencing tokens count the claims of each job: nothing random. Job 2's
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
         "ended": killed_at, "end": "killed", "lease_until": 5.0, "duplicate": False,
         "took_over": None, "lease_left": 0.0},
        {"worker": 1, "job": 1, "token": 2, "claimed": taken_at,
         "sent": taken_at + SEND_SECONDS, "ended": taken_at + SEND_SECONDS + ACK_SECONDS,
         "end": "done", "lease_until": taken_at + 5.0, "duplicate": True,
         "took_over": {"worker": 0, "token": 1, "lease_until": 5.0},
         "lease_left": pytest.approx(taken_at + 5.0 - state["time"])}]
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


# ---- what the page and the terminal get

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


def test_a_takeover_says_whose_claim_it_took_over_and_when_that_lease_ran_out(sim):
    """The handover the picture draws: from the dead worker's claim, where
    its lease ran out, to the claim that took the job over."""
    sim.enqueue(2)
    tick_until(sim, phase(0, "sent"))
    sim.kill(0)                                  # holding job 1, its lease until 5 s
    state = tick_until(sim, lambda state: events(state, "takeover"))
    first, second, third = state["history"]["claims"]
    assert (first["job"], second["job"], third["job"]) == (1, 2, 1)
    assert first["took_over"] is None and second["took_over"] is None
    assert third["took_over"] == {"worker": 0, "token": 1, "lease_until": 5.0}
    assert third["worker"] != 0 and third["claimed"] >= 5.0


def test_a_restarted_worker_that_takes_its_own_job_back_took_it_from_its_old_self(sim):
    sim.enqueue(1)
    sim.step()
    sim.kill(0)
    sim.kill(1)
    sim.kill(2)
    sim.restart(0)
    state = tick_until(sim, lambda state: events(state, "takeover"))
    first, second = state["history"]["claims"]
    assert second["worker"] == 0
    assert second["took_over"] == {"worker": 0, "token": first["token"],
                                   "lease_until": first["lease_until"]}


def test_each_claim_says_how_much_of_its_lease_is_left(sim):
    """The lease of a dead worker's claim runs down on the virtual clock,
    and stops at nothing once it has run out."""
    sim.enqueue(1)
    sim.step()
    sim.tick(1.2)
    sim.kill(0)
    lefts = []
    for _ in range(5):
        claim = sim.state()["history"]["claims"][0]
        lefts.append(claim["lease_left"])
        sim.tick(1.5)
    assert lefts == [3.8, 2.3, 0.8, 0.0, 0.0]


def test_the_page_starts_with_three_jobs_queued_and_nothing_earned(opened):
    """As the page makes it: three welcome emails wait, no worker has one
    yet, and the guide says so."""
    options = KillableQueue.PAGE_STARTS_WITH
    sim = opened(KillableQueue, **options)
    state = sim.state()
    assert [(row["id"], row["status"]) for row in state["jobs"]] == [
        (1, "queued"), (2, "queued"), (3, "queued")]
    assert state["time"] == 0 and state["queued_at_start"] == 3
    assert [worker["job"] for worker in state["workers"]] == [None, None, None]
    assert not any(task["done"] for task in state["tasks"])
    sim.step()                                   # each worker claims one at 0 s
    assert [worker["job"] for worker in sim.state()["workers"]] == [1, 2, 3]
    assert "starts with three welcome emails queued" in PROSE


def test_made_with_its_defaults_it_starts_empty(sim):
    assert sim.state()["jobs"] == [] and sim.state()["queued_at_start"] == 0
