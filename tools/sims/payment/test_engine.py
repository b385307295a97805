"""The payment simulator's engine (tools/sims/payment/engine.py): the flaky
bank run by tinyq, seeds that replay ex07 and ex08, what its picture draws,
what the page may call and its text program. Everything runs on the
engine's virtual clock, so no test waits."""
import contextlib
import io
import json
import random
import re
import sys

import pytest

from tests.helpers import ask, run_program, tasks
from tools import course
from tools.sims.payment import engine as payment
from tools.sims.payment.engine import Payment


SEEDS = range(1, 31)


def finished_run(**settings):
    sim = Payment(**settings)
    sim.run()
    state = sim.state()
    sim.close()
    return state


def lost_replies_by_job(state):
    counts = {job["id"]: 0 for job in state["jobs"]}
    for entry in state["timeline"]:
        counts[entry["job"]] += entry["event"] == "lost reply"
    return counts


@pytest.fixture(scope="module")
def runs():
    """{(keys, seed): the finished state}, default settings otherwise."""
    return {(keys, seed): finished_run(seed=seed, keys=keys)
            for keys in payment.KEY_MODES for seed in SEEDS}


@pytest.fixture(scope="module")
def rough_runs():
    """The same with more requests lost and fewer replies: more dead jobs,
    and some that the bank never saw at all."""
    return {(keys, seed): finished_run(seed=seed, keys=keys, lost_request=0.6, lost_reply=0.2)
            for keys in payment.KEY_MODES for seed in SEEDS}


@pytest.mark.parametrize("seed", SEEDS)
def test_with_a_stable_key_no_order_is_ever_charged_twice(runs, seed):
    state = runs[("stable", seed)]
    assert state["finished"] and state["overcharge_cents"] == 0
    lost = lost_replies_by_job(state)
    for job in state["jobs"]:
        assert job["charged_times"] == (1 if job["status"] == "done" or lost[job["id"]] else 0)
    # All she pays beyond her done orders is dead jobs the bank did charge, once.
    charged_dead = [job for job in state["jobs"] if job["status"] == "dead" and lost[job["id"]]]
    assert state["actual_cents"] - state["expected_cents"] == 1000 * len(charged_dead)


@pytest.mark.parametrize("keys", ["none", "fresh"])
@pytest.mark.parametrize("seed", SEEDS)
def test_without_a_stable_key_every_lost_reply_costs_ten_dollars(runs, keys, seed):
    state = runs[(keys, seed)]
    lost = lost_replies_by_job(state)
    # The rule: every request that reached the bank charged. A done job paid for
    # its approval and for each lost reply; a dead job for each lost reply.
    for job in state["jobs"]:
        assert job["charged_times"] == lost[job["id"]] + (job["status"] == "done")
    assert state["lost_replies"] == sum(lost.values())
    assert state["actual_cents"] - state["expected_cents"] == 1000 * state["lost_replies"]
    assert (state["actual_cents"] != state["expected_cents"]) == (state["lost_replies"] > 0)
    first_of_dead = sum(1 for job in state["jobs"] if job["status"] == "dead" and lost[job["id"]])
    assert state["overcharge_cents"] == 1000 * (state["lost_replies"] - first_of_dead)


def test_the_seeds_lose_replies_and_kill_jobs(runs, rough_runs):
    # The runs above are not all quiet: they test something.
    assert sum(runs[("none", seed)]["lost_replies"] > 0 for seed in SEEDS) > 20
    for keys in payment.KEY_MODES:
        dead = [(seed, job) for seed in SEEDS for job in rough_runs[(keys, seed)]["jobs"]
                if job["status"] == "dead"]
        charged = {bool(lost_replies_by_job(rough_runs[(keys, seed)])[job["id"]])
                   for seed, job in dead}
        assert charged == {True, False}


@pytest.mark.parametrize("keys", payment.KEY_MODES)
def test_a_dead_job_says_what_the_worker_knows_and_what_the_bank_did(runs, rough_runs, keys):
    seen = 0
    for state in [runs[(keys, seed)] for seed in SEEDS] + [rough_runs[(keys, seed)]
                                                            for seed in SEEDS]:
        lost = lost_replies_by_job(state)
        for job in state["jobs"]:
            if job["status"] != "dead":
                continue
            seen += 1
            knows = job["worker_knows"]
            assert knows.startswith("dead after 5 attempts; its last error was a ")
            if lost[job["id"]]:
                assert knows.split(": ")[-1].startswith("unknown"), knows
                assert "may have charged it" in knows and job["charged_times"] >= 1
                assert job["truth"] == f"the bank charged it {payment.times(job['charged_times'])}"
            else:
                assert knows.endswith("so the bank never charged it"), knows
                assert job["charged_times"] == 0 and job["truth"] == "the bank never charged it"
            if keys == "stable" and lost[job["id"]]:
                assert "at most once (the key)" in knows
    assert seen >= 30


def test_a_dead_jobs_last_error_alone_can_hide_a_charge(runs):
    # Seed 4 (Chapter 8's drill): job 3's last error is a lost request, but
    # attempt 4 timed out, and the bank charged it then.
    job = runs[("stable", 4)]["jobs"][2]
    assert job["status"] == "dead" and job["last_error"].startswith("ConnectionError")
    assert job["worker_knows"] == (
        "dead after 5 attempts; its last error was a lost request (ConnectionError), but "
        "attempt 4 timed out: the bank may have charged it, at most once (the key): unknown. "
        "A replay with the same key is safe while the bank keeps keys")
    assert (job["charged_times"], job["truth"]) == (1, "the bank charged it once")
    assert runs[("stable", 4)]["difference"] == (
        "Alice paid $50.00 for orders worth $40.00: $10.00 more "
        "(order 3 is dead, yet the bank charged it once)")


@pytest.mark.parametrize("seed", [1, 2, 8])
def test_the_keys_change_the_charges_but_not_the_dice(runs, seed):
    events = {keys: [(e["t"], e["job"], e["attempt"], e["event"], e["wait"])
                     for e in runs[(keys, seed)]["timeline"]] for keys in payment.KEY_MODES}
    assert events["none"] == events["fresh"] == events["stable"]


def luck(state):
    """{(job, attempt): what the network did to that request}."""
    return {(entry["job"], entry["attempt"]): entry["event"] for entry in state["timeline"]}


def test_a_change_of_retry_policy_leaves_the_networks_luck_alone(runs):
    """Each attempt of each job meets the same luck whatever the attempts,
    base, cap or jitter, as in ex07."""
    reordered = 0
    for policy in [{"attempts": 2}, {"attempts": 8}, {"cap": 1.0}, {"base": 2.0},
                   {"jitter": False}]:
        for seed in SEEDS:
            before, after = runs[("none", seed)], finished_run(seed=seed, **policy)
            same = luck(before).keys() & luck(after).keys()
            assert same and all(luck(before)[tried] == luck(after)[tried] for tried in same), \
                (policy, seed)
            order = [[(e["job"], e["attempt"]) for e in state["timeline"]
                      if (e["job"], e["attempt"]) in same] for state in (before, after)]
            reordered += order[0] != order[1]
    # some policies send the same attempts in another order, where luck drawn
    # in turn would have gone to other requests
    assert reordered > 0


class FakeTime:
    """For ex07 and ex08: time.sleep moves this clock, and nothing waits."""

    def __init__(self):
        self.now = 0.0

    def time(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def exercise_run(monkeypatch, folder, module, seed, bad_key=False, **constants):
    """Exercise 7 or 8 as the reader runs it (setup, work --seed N, report),
    with its constants set as given: (the work's log lines, what Alice paid)."""
    monkeypatch.setattr(module, "time", FakeTime())
    monkeypatch.setattr(module, "DATABASE", str(folder / f"{module.__name__}.db"))
    for name, value in constants.items():
        monkeypatch.setattr(module, name, value)
    if bad_key:                 # Chapter 8's Break It: a new random key on every attempt
        def charge_card(db, order_id, account, amount_cents):
            module.bank_charge(db, account, amount_cents, f"charge-{random.random()}")
        monkeypatch.setattr(module, "charge_card", charge_card)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for command in (["setup"], ["work", "--seed", str(seed)], ["report"]):
            monkeypatch.setattr(sys, "argv", [module.__file__, *command])
            module.main()
    out = printed.getvalue()
    paid = re.search(r"alice paid \$(\d+)\.(\d\d)", out)
    return [line for line in out.splitlines() if line.startswith("job ")], \
        int(paid[1]) * 100 + int(paid[2])


# The exercises' constants, and the same policy in the simulator's settings.
POLICIES = [({}, {}), ({"MAX_ATTEMPTS": 2}, {"attempts": 2}), ({"BACKOFF_CAP": 1.0}, {"cap": 1.0})]


@pytest.mark.parametrize("constants, settings", POLICIES)
@pytest.mark.parametrize("keys, file, bad_key", [("none", "ex07_retries", False),
                                                 ("stable", "ex08_idempotency", False),
                                                 ("fresh", "ex08_idempotency", True)])
def test_a_seed_replays_the_exercise_with_the_same_seed(runs, monkeypatch, tmp_path, keys, file,
                                                       bad_key, constants, settings):
    module = course.module(f"{file}.py")
    for seed in SEEDS:
        lines, paid = exercise_run(monkeypatch, tmp_path, module, seed, bad_key, **constants)
        state = runs[(keys, seed)] if not settings else finished_run(seed=seed, keys=keys,
                                                                    **settings)
        assert [entry["text"] for entry in state["timeline"]] == lines, seed
        assert state["actual_cents"] == paid, seed


def test_without_jitter_each_wait_is_its_ceiling_exactly():
    state = finished_run(seed=4, jitter=False, attempts=8, lost_request=0.9, lost_reply=0.0,
                         base=0.5, cap=8.0)
    waits = [(entry["attempt"], entry["wait"]) for entry in state["timeline"]
             if entry["outcome"] == "retry"]
    assert {attempt for attempt, _ in waits} == set(range(1, 8))
    for attempt, wait in waits:
        assert wait == min(8.0, 0.5 * 2 ** (attempt - 1))


def test_with_jitter_each_wait_falls_under_its_ceiling():
    state = finished_run(seed=4, attempts=8, lost_request=0.9, lost_reply=0.0)
    waits = [(entry["attempt"], entry["wait"]) for entry in state["timeline"]
             if entry["outcome"] == "retry"]
    assert all(0 <= wait <= min(8.0, 0.5 * 2 ** (attempt - 1)) for attempt, wait in waits)
    assert len({round(wait, 9) for _, wait in waits}) > len(waits) / 2


def test_the_same_seed_gives_the_same_state():
    assert finished_run(seed=7, keys="fresh") == finished_run(seed=7, keys="fresh")
    assert finished_run(seed=7)["timeline"] != finished_run(seed=8)["timeline"]


def test_step_makes_one_attempt_at_a_time():
    sim = Payment(seed=1)
    assert sim.step() is None
    assert [entry["text"] for entry in sim.state()["timeline"]] == [
        "job 1, attempt 1: charge $10.00: TimeoutError: no reply from the bank; "
        "retry in 0.44 s"]
    steps = 1
    while sim.step() is None:
        steps += 1
    state = sim.state()
    assert steps == len(state["timeline"]) == 15 and state["finished"]
    assert sim.step() == "every job is done or dead: configure to run again"
    assert state["difference"] == ("Alice paid $80.00 for orders worth $50.00: $30.00 more "
                                   "(order 1 was charged 3 times; order 3 was charged twice)")
    # Waiting for a job that is not due yet moves the clock to it, and no further.
    timeline = state["timeline"]
    last = timeline[-1]
    previous = [entry for entry in timeline if entry["job"] == last["job"]][-2]
    bank = course.module("ex07_retries.py").BANK_SECONDS         # each call takes this long
    assert last["t"] > timeline[-2]["t"] + bank                    # the worker waited
    assert last["t"] == pytest.approx(previous["t"] + bank + previous["wait"])
    sim.close()


def test_a_charge_before_its_job_is_done_is_not_called_more_yet():
    """Mid-run, an order the bank charged while its job still retries may
    end right (a stable key) or not: the balance counts as "more" only what
    is more already, and names the orders still open."""
    said = {}
    for keys in ("stable", "fresh"):
        sim = Payment(seed=1, keys=keys)
        while sim.step() is None:
            state = sim.state()
            said.setdefault(keys, []).append(state["difference"])
        sim.close()
    # Seed 1: job 1's first reply is lost (charged), jobs 4 and 2 are done,
    # then job 1's second reply is lost too, then job 3's first.
    assert said["stable"][0] == ("Alice paid $10.00 for orders worth $0.00: $10.00 for order 1, "
                                 "not done yet")
    assert said["stable"][7] == ("Alice paid $40.00 for orders worth $20.00: $20.00 for orders "
                                 "1 and 3, not done yet")
    assert said["stable"][-1] == "Alice paid $50.00 for orders worth $50.00: right"
    assert said["fresh"][6] == ("Alice paid $40.00 for orders worth $20.00: $10.00 more (order 1 "
                                "has been charged twice already), and $10.00 for order 1, not "
                                "done yet")
    assert said["fresh"][-1] == ("Alice paid $80.00 for orders worth $50.00: $30.00 more "
                                 "(order 1 was charged 3 times; order 3 was charged twice)")


def test_configure_starts_again_and_keeps_what_was_earned():
    sim = Payment(seed=1)
    sim.run()
    assert tasks(sim.state())["overcharge"]
    sim.configure(keys="stable", charges=3)
    state = sim.state()
    assert state["settings"]["keys"] == "stable" and len(state["jobs"]) == 3
    assert state["timeline"] == [] and not state["finished"] and state["actual_cents"] == 0
    assert tasks(state)["overcharge"]
    for bad in [dict(colour="red"), dict(lost_request=0.6, lost_reply=0.5), dict(attempts=True),
                dict(keys="random"), dict(charges=0), dict(jitter=1), dict(base="0.5")]:
        with pytest.raises(ValueError):
            sim.configure(**bad)
    assert sim.state()["settings"]["charges"] == 3     # a refused change changes nothing
    sim.close()


def test_payment_tasks_tick_exactly_when_earned():
    sim = Payment(seed=1, keys="stable", lost_reply=0.0)
    sim.run()                                  # no reply lost: nothing proven
    assert tasks(sim.state()) == {"overcharge": False, "impossible": False, "dead": False}
    sim.configure(lost_reply=0.3)
    sim.run()                                  # three lost replies, right balance
    assert sim.state()["lost_replies"] == 3
    assert tasks(sim.state()) == {"overcharge": False, "impossible": True, "dead": False}
    sim.configure(seed=9, keys="none")
    while not tasks(sim.state())["overcharge"]:
        sim.step()
    orders = [job["charged_times"] for job in sim.state()["jobs"]]
    assert max(orders) == 2 and not sim.state()["finished"]
    sim.run()
    assert all(tasks(sim.state()).values())
    sim.close()


def test_the_payment_state_is_json():
    sim = Payment(seed=8)
    sim.run()
    state = sim.state()
    assert json.loads(json.dumps(state)) == state
    assert {"settings", "seed", "timeline", "jobs", "expected_cents", "actual_cents",
            "difference", "tasks"} <= set(state)
    assert {"t", "job", "attempt", "event", "wait"} <= set(state["timeline"][0])
    assert {"id", "status", "attempts", "last_error", "charged_times",
            "worker_knows"} <= set(state["jobs"][0])
    sim.close()


# ---- for its picture: each attempt's span on the clock, what the bank took

def test_each_attempt_says_its_span_what_the_bank_took_and_when_it_retries():
    sim = Payment(seed=1, keys="stable")
    sim.run()
    state = sim.state()
    sim.close()
    timeline = state["timeline"]
    for entry, after in zip(timeline, timeline[1:] + [None]):
        assert entry["t"] < entry["end"]
        if after is not None:
            assert entry["end"] <= after["t"]          # one worker: one attempt at a time
        if entry["outcome"] == "retry":
            assert entry["retry_at"] == pytest.approx(entry["end"] + entry["wait"])
        else:
            assert entry["retry_at"] is None
        assert entry["charged"] == entry["bank"].startswith("the bank charged")
    # Seed 1, a stable key: job 1's first reply is lost after the bank
    # charged; its second reaches a bank that knows the key and takes nothing.
    job_1 = [(entry["event"], entry["charged"]) for entry in timeline if entry["job"] == 1]
    assert job_1 == [("lost reply", True), ("lost reply", False), ("lost request", False),
                     ("approved", False)]
    for job in state["jobs"]:
        assert job["charged_times"] == sum(entry["charged"] for entry in timeline
                                           if entry["job"] == job["id"])


def test_the_bars_parts_add_up_to_what_the_bank_took_at_every_step():
    """Owed (the done orders), pending (one charge of each order whose job
    still retries) and more (the rest) make up what Alice paid."""
    seen = {}
    for keys in ("stable", "fresh"):
        sim = Payment(seed=1, keys=keys)
        while sim.step() is None:
            state = sim.state()
            assert state["price_cents"] == 1000 and state["orders_cents"] == 5000
            assert (state["expected_cents"] + state["pending_cents"] + state["more_cents"]
                    == state["actual_cents"])
            seen.setdefault(keys, []).append((state["pending_cents"], state["more_cents"]))
        sim.close()
    # As the difference says it (the test above): $10.00 for order 1 not done
    # yet; then $20.00 for orders 1 and 3; at the end right.
    assert seen["stable"][0] == (1000, 0) and seen["stable"][7] == (2000, 0)
    assert seen["stable"][-1] == (0, 0)
    assert seen["fresh"][6] == (1000, 1000)          # $10.00 more, and $10.00 not done yet
    assert seen["fresh"][-1] == (0, 3000)


def test_api_round_trip_for_the_payment_simulator(instances):
    assert ask("payment", "p1", "new", {"seed": 13, "keys": "stable"})["state"]["seed"] == 13
    assert len(ask("payment", "p1", "step")["state"]["timeline"]) == 1
    state = ask("payment", "p1", "run")["state"]
    assert state["finished"] and state["overcharge_cents"] == 0
    answer = ask("payment", "p1", "configure", {"keys": "fresh", "jitter": False})
    assert answer["state"]["settings"]["jitter"] is False and answer["state"]["timeline"] == []
    bad = ask("payment", "p1", "configure", {"lost_reply": 2})
    assert bad == {"ok": False, "error": "lost_reply must be a number from 0.0 to 1.0, not 2"}


def test_the_payment_program_prints_the_run():
    out = run_program("payment", "--seed", "4", "--keys", "stable")
    assert "   0.00 s  job 1, attempt 1: charge $10.00: ConnectionError: could not reach " \
           "the bank; retry in 0.34 s" in out.splitlines()
    assert out.rstrip().endswith("Alice paid $50.00 for orders worth $40.00: $10.00 more "
                                 "(order 3 is dead, yet the bank charged it once)")


@pytest.mark.parametrize("seed", [1, 4])
def test_the_three_key_modes_are_run_side_by_side_with_the_same_seed(seed):
    """compare_keys: these settings and seed, run to the end under each key
    mode, as a run made with that mode would end; the run on the page is
    untouched, and nothing is earned by it."""
    sim = Payment(seed=seed, lost_reply=0.4)
    sim.step()
    before = json.dumps(sim.state())
    rows = sim.compare_keys()
    assert json.dumps(sim.state()) == before and sim.earned == set()
    assert [row["keys"] for row in rows] == list(payment.KEY_MODES)
    for row in rows:
        ended = finished_run(seed=seed, lost_reply=0.4, keys=row["keys"])
        assert row == {"keys": row["keys"], "expected_cents": ended["expected_cents"],
                       "actual_cents": ended["actual_cents"],
                       "overcharge_cents": ended["overcharge_cents"],
                       "dead": sum(job["status"] == "dead" for job in ended["jobs"])}
    stable = rows[-1]
    assert stable["overcharge_cents"] == 0 < rows[0]["overcharge_cents"]
    sim.close()
