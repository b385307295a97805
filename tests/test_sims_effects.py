"""The simulations of Chapters 5-8 and 10: the crash-timing explorer, the
payment simulator and the O7 story, with their JSON API and their text
programs. Everything runs on the engines' virtual clocks, so no test waits."""
import contextlib
import io
import json
import random
import re
import sys

import pytest

from tools.sims import api, course
from tools.sims.crash_timing import engine as crash_timing
from tools.sims.crash_timing.engine import CrashTiming
from tools.sims.o7 import engine as o7
from tools.sims.o7.engine import O7Story
from tools.sims.payment import engine as payment
from tools.sims.payment.engine import Payment
from tests.helpers import ask, run_program

tinyq = crash_timing.tinyq      # the capstone's library, as the engines load it

SEEDS = range(1, 31)


def tasks(state):
    return {task["id"]: task["done"] for task in state["tasks"]}


# ---- crash timing: the matrix the chapters claim

ONCE, DUP, LOST, NA = ("exactly once", 1), ("duplicate", 2), ("lost", 0), ("n/a", None)
COLUMNS = ("none", "key", "key-apart", "transaction", "ack-first")
EXPECTED = {                    # crash point: the outcome under each protection, in COLUMNS order
    "none":                   (ONCE, ONCE, ONCE, ONCE, ONCE),
    "after-claim":            (ONCE, ONCE, ONCE, ONCE, ONCE),
    "between-ack-and-effect": (NA, NA, NA, NA, LOST),
    "between-effect-and-key": (NA, NA, DUP, ONCE, NA),
    "after-effect":           (DUP, ONCE, ONCE, NA, ONCE),
    "in-transaction":         (NA, NA, NA, ONCE, NA),
    "after-ack":              (ONCE, ONCE, ONCE, ONCE, NA),
}


@pytest.fixture(scope="module")
def matrix():
    return CrashTiming().matrix()


def cell(matrix, crash, protection):
    found = matrix["cells"][crash][protection]
    return found["outcome"], found["effects"]


@pytest.mark.parametrize("crash", EXPECTED)
@pytest.mark.parametrize("protection", COLUMNS)
def test_each_cell_of_the_matrix_is_what_the_chapters_claim(matrix, crash, protection):
    assert cell(matrix, crash, protection) == EXPECTED[crash][COLUMNS.index(protection)]


def test_the_matrix_lists_its_rows_and_columns_in_order(matrix):
    assert [row["id"] for row in matrix["rows"]] == list(EXPECTED)
    assert [column["id"] for column in matrix["columns"]] == list(COLUMNS)
    assert json.loads(json.dumps(matrix)) == matrix


def test_the_moments_offered_are_the_cells_that_are_not_n_a(matrix):
    sim = CrashTiming()
    for protection in COLUMNS:
        offered = [point["id"] for point in sim.crash_points(protection)]
        assert offered == [crash for crash in EXPECTED
                           if cell(matrix, crash, protection)[0] != "n/a"]


def test_a_key_that_changes_with_each_claim_makes_the_keyed_cell_a_duplicate(monkeypatch):
    monkeypatch.setattr(crash_timing, "job_key", lambda job: f"points-{job.token}")
    result = crash_timing.play("key", "after-effect")
    assert (result["outcome"], result["effects"]) == DUP
    assert crash_timing.play("key", "after-claim")["outcome"] == "exactly once"


def test_recording_the_key_in_the_same_transaction_saves_the_by_hand_cell(monkeypatch):
    def keyed_atomically(db, job, worker, key, moment, say):
        db.execute("BEGIN IMMEDIATE")
        if not db.execute("SELECT 1 FROM points_keys WHERE key = ?", (key,)).fetchone():
            award = crash_timing.add_points(db, job, worker)
            moment("between-effect-and-key", "inside the transaction")
            db.execute("INSERT INTO points_keys VALUES (?, ?)", (key, award))
        db.execute("COMMIT")

    monkeypatch.setattr(crash_timing, "points_keyed_by_hand", keyed_atomically)
    assert crash_timing.play("key-apart", "between-effect-and-key")["outcome"] == "exactly once"


def test_without_the_transaction_a_crash_inside_it_duplicates_the_points(monkeypatch):
    @contextlib.contextmanager
    def complete_without_a_transaction(job):
        yield job.queue.db                   # each write commits on its own
        job.queue.finish(job, "done")
        job.completed = True

    monkeypatch.setattr(tinyq.Job, "complete", complete_without_a_transaction)
    result = crash_timing.play("transaction", "in-transaction")
    assert (result["outcome"], result["effects"]) == DUP


def whats(state):
    return [(step["who"], step["what"]) for step in state["timeline"]]


def test_a_crash_after_the_effect_and_the_recovery_on_the_timeline():
    sim = CrashTiming("none", "after-effect")
    assert sim.run() == "duplicate"
    state = sim.state()
    assert (state["outcome"], state["effects"]) == DUP
    assert whats(state) == [
        ("producer", "queued job 1: add 10 loyalty points to Bob"),
        ("worker 1", "claimed job 1 (attempt 1); its lease runs until 11 s"),
        ("worker 1", "asked the loyalty service for 10 points with no key: it added 10 points"),
        ("worker 1", "crashes after the effect, before the ack"),
        ("system", "worker 1's process is gone"),
        ("queue", "job 1's lease runs out: nobody acknowledged it"),
        ("worker 2", "claimed job 1 (attempt 2); its lease runs until 22 s"),
        ("worker 2", "asked the loyalty service for 10 points with no key: it added 10 points"),
        ("worker 2", "acknowledged job 1: done"),
        ("result", "Bob has 20 points: the points were added twice"),
    ]
    times = [step["t"] for step in state["timeline"]]
    assert times == sorted(times) and times[5] == 1.0 + crash_timing.LEASE_SECONDS


def test_a_crash_inside_the_transaction_rolls_the_points_back():
    sim = CrashTiming("transaction", "in-transaction")
    assert sim.run() == "exactly once"
    said = dict(whats(sim.state())[3:5])
    assert said["system"] == ("worker 1's process is gone, and its open transaction with it: "
                              "what it wrote was never committed")


def test_ack_first_loses_the_job_when_it_dies_between_the_ack_and_the_effect():
    sim = CrashTiming("ack-first", "between-ack-and-effect")
    assert sim.run() == "lost"
    assert whats(sim.state())[-3:] == [
        ("queue", "job 1 is done: nothing is left to take over"),
        ("worker 2", "finds no job to claim: the queue holds nothing for it"),
        ("result", "Bob has 0 points: the points were never added"),
    ]


def test_each_protection_offers_its_own_moments_in_its_own_order():
    sim = CrashTiming()
    moments = {protection: [point["id"] for point in sim.crash_points(protection)]
               for protection in COLUMNS}
    assert moments == {
        "none": ["none", "after-claim", "after-effect", "after-ack"],
        "key": ["none", "after-claim", "after-effect", "after-ack"],
        "key-apart": ["none", "after-claim", "between-effect-and-key", "after-effect",
                      "after-ack"],
        "transaction": ["none", "after-claim", "between-effect-and-key", "in-transaction",
                        "after-ack"],
        "ack-first": ["none", "after-claim", "between-ack-and-effect", "after-effect"],
    }
    details = {point["id"]: point["detail"] for point in sim.crash_points("ack-first")}
    assert details["after-claim"] == "after the claim, before the ack"
    assert details["after-effect"] == "after the effect, its last step"


def test_the_choices_name_each_moment_as_the_matrix_does(matrix):
    """The list of moments and the matrix's rows say the same words for the
    same moment; what the moment is in one protection's code is its detail."""
    rows = {row["id"]: row["label"] for row in matrix["rows"]}
    sim = CrashTiming()
    for protection in COLUMNS:
        for point in sim.crash_points(protection):
            assert point["label"] == rows[point["id"]], (protection, point)
    details = {protection: {point["id"]: point["detail"] for point in sim.crash_points(protection)}
               for protection in ("key-apart", "transaction")}
    assert "records their key in a step of its own" in details["key-apart"]["between-effect-and-key"]
    assert "inside the job's transaction" in details["transaction"]["between-effect-and-key"]


def test_choose_keeps_what_applies_and_refuses_what_does_not():
    sim = CrashTiming("none", "after-effect")
    sim.choose(protection="key")
    assert (sim.protection, sim.crash) == ("key", "after-effect")
    sim.choose(protection="transaction")                 # it has no after-effect moment
    assert (sim.protection, sim.crash) == ("transaction", "none")
    with pytest.raises(ValueError, match="has no moment 'after-effect'"):
        sim.choose(crash="after-effect")
    sim.choose("key-apart", "between-effect-and-key")
    sim.choose("transaction", "between-effect-and-key")  # both have it: kept
    assert sim.crash == "between-effect-and-key"
    sim.choose("key", "between-effect-and-key")          # a new protection without it
    assert (sim.protection, sim.crash) == ("key", "none")
    for bad in [lambda: sim.choose(protection="hope"), lambda: sim.choose(crash="later"),
                lambda: CrashTiming("none", "in-transaction")]:
        with pytest.raises(ValueError):
            bad()


def test_by_default_the_crash_comes_after_the_effect_where_there_is_one():
    assert CrashTiming().crash == "after-effect"
    assert CrashTiming("ack-first").crash == "after-effect"
    assert CrashTiming("transaction").crash == "none"


def test_choosing_clears_the_last_run():
    sim = CrashTiming("none", "after-claim")
    sim.run()
    assert sim.state()["outcome"] == "exactly once"
    sim.choose(crash="after-ack")
    state = sim.state()
    assert (state["timeline"], state["outcome"], state["effects"]) == ([], None, None)


def test_crash_timing_tasks_tick_exactly_when_earned():
    sim = CrashTiming()
    assert not any(tasks(sim.state()).values())
    sim.choose("key-apart", "between-effect-and-key")
    sim.run()
    assert tasks(sim.state()) == {"duplicate": True, "lost": False, "key-not-enough": False}
    sim.choose("transaction", "in-transaction")          # another moment: not the same one
    sim.run()
    assert not tasks(sim.state())["key-not-enough"]
    sim.choose(crash="between-effect-and-key")
    sim.run()
    assert tasks(sim.state())["key-not-enough"]
    sim.choose("ack-first", "between-ack-and-effect")
    sim.run()
    assert all(tasks(sim.state()).values())


def test_the_crash_timing_state_is_json():
    sim = CrashTiming("key", "after-effect")
    sim.run()
    state = sim.state()
    assert json.loads(json.dumps(state)) == state
    assert {"protection", "crash", "protections", "crash_points", "timeline", "outcome",
            "effects", "tasks", "stations", "outcomes"} <= set(state)
    assert {"t", "who", "what", "kind"} == set(state["timeline"][0])


# ---- crash timing: what the picture draws (the steps as stations, the
# crash points between them, and each one's outcome)

STATIONS = {
    "none": ["claim", "add points", "ack"],
    "key": ["claim", "add points + key", "ack"],
    "key-apart": ["claim", "add points", "record key", "ack"],
    "transaction": ["claim", "write points", "commit + ack"],
    "ack-first": ["claim", "ack", "add points"],
}
AFTER = {                       # crash point: how many steps came before it, in each protection
    "none": {"after-claim": 1, "after-effect": 2, "after-ack": 3, "none": 3},
    "key": {"after-claim": 1, "after-effect": 2, "after-ack": 3, "none": 3},
    "key-apart": {"after-claim": 1, "between-effect-and-key": 2, "after-effect": 3,
                  "after-ack": 4, "none": 4},
    "transaction": {"after-claim": 1, "between-effect-and-key": 2, "in-transaction": 2,
                    "after-ack": 3, "none": 3},
    "ack-first": {"after-claim": 1, "between-ack-and-effect": 2, "after-effect": 3, "none": 3},
}


@pytest.mark.parametrize("protection", COLUMNS)
def test_each_protection_reports_its_steps_and_where_each_crash_falls(matrix, protection):
    state = CrashTiming(protection).state()
    assert [station["label"] for station in state["stations"]] == STATIONS[protection]
    names = {column["id"]: column["name"] for column in matrix["columns"]}
    assert [item["name"] for item in state["protections"]] == [names[key] for key in COLUMNS]
    assert {point["id"]: point["after"] for point in state["crash_points"]} == AFTER[protection]


@pytest.mark.parametrize("protection", COLUMNS)
def test_the_state_holds_every_crash_points_outcome_as_the_matrix_has_it(matrix, protection):
    outcomes = CrashTiming(protection).state()["outcomes"]
    offered = [crash for crash in EXPECTED if cell(matrix, crash, protection)[0] != "n/a"]
    assert list(outcomes) == offered
    assert {crash: (found["outcome"], found["effects"]) for crash, found in outcomes.items()} \
        == {crash: cell(matrix, crash, protection) for crash in offered}


def test_choose_can_run_the_choice_at_once():
    sim = CrashTiming("key", "after-claim")
    assert sim.choose("none", "after-effect", True) == "duplicate"
    state = sim.state()
    assert (state["protection"], state["crash"], state["outcome"], state["effects"]) == \
        ("none", "after-effect", "duplicate", 2)
    assert tasks(state)["duplicate"] and state["timeline"]
    assert sim.choose(crash="after-ack") is None          # without run: nothing run yet
    assert sim.state()["outcome"] is None


# ---- payment: the flaky bank, run by tinyq

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


# ---- payment, for its picture: each attempt's span on the clock, what the
# bank did, and the two bars' parts

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


# ---- O7: Chapter 10's worked case, on ex09's own code

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


# ---- the JSON API

def test_api_round_trip_for_the_crash_timing_explorer(instances):
    made = ask("crash-timing", "c1", "new", {"protection": "ack-first",
                                             "crash": "between-ack-and-effect"})
    assert made["ok"] and made["state"]["crash"] == "between-ack-and-effect"
    answer = ask("crash-timing", "c1", "matrix")
    cells = answer["result"]["cells"]
    assert cells["after-effect"]["none"] == {"outcome": "duplicate", "effects": 2}
    assert not any(tasks(answer["state"]).values())      # the matrix earns nothing
    answer = ask("crash-timing", "c1", "run")
    assert answer["result"] == "lost" and answer["state"]["effects"] == 0
    assert tasks(answer["state"])["lost"]
    answer = ask("crash-timing", "c1", "choose", {"protection": "key", "crash": "after-effect"})
    assert answer["ok"] and answer["state"]["timeline"] == []
    refused = ask("crash-timing", "c1", "choose", {"crash": "in-transaction"})
    assert not refused["ok"] and "has no moment" in refused["error"]
    assert ask("crash-timing", "c1", "close")["result"] is True


def test_api_round_trip_for_the_payment_simulator(instances):
    assert ask("payment", "p1", "new", {"seed": 13, "keys": "stable"})["state"]["seed"] == 13
    assert len(ask("payment", "p1", "step")["state"]["timeline"]) == 1
    state = ask("payment", "p1", "run")["state"]
    assert state["finished"] and state["overcharge_cents"] == 0
    answer = ask("payment", "p1", "configure", {"keys": "fresh", "jitter": False})
    assert answer["state"]["settings"]["jitter"] is False and answer["state"]["timeline"] == []
    bad = ask("payment", "p1", "configure", {"lost_reply": 2})
    assert bad == {"ok": False, "error": "lost_reply must be a number from 0.0 to 1.0, not 2"}


def test_api_round_trip_for_the_o7_story(instances):
    assert ask("o7", "s1", "new", {"blind": True})["state"]["blind"] is True
    answer = ask("o7", "s1", "next")
    assert answer["result"] is None and answer["state"]["steps"][0]["time"] == "day 1 12:00"
    assert ask("o7", "s1", "reset", {"blind": False})["state"]["steps"] == []
    assert not ask("o7", "s1", "close_story")["ok"]


# ---- the text programs

def test_the_crash_timing_program_prints_the_matrix_aligned():
    """Each crash point on a line of its own, its cells on the next, under
    the protections' names: no line wider than 100 columns."""
    lines = run_program("crash-timing").splitlines()
    assert max(len(line) for line in lines) <= 100
    header = lines[lines.index("crash point") + 1]
    starts = [header.index(crash_timing.NAMES[column] + " ") for column in COLUMNS[:-1]]
    starts.append(header.index(crash_timing.NAMES[COLUMNS[-1]]))
    assert starts == sorted(starts)

    def cells(crash):
        row = lines[lines.index(crash) + 1]
        return [row[start:].split("  ")[0] for start in starts]

    assert cells("after the effect") == [
        "duplicate (2)", "exactly once (1)", "exactly once (1)", "n/a", "exactly once (1)"]
    assert cells("after the effect, before its key is recorded") == [
        "n/a", "n/a", "duplicate (2)", "exactly once (1)", "n/a"]
    assert cells("after the ack, before the effect")[-1] == "lost (0)"


def test_the_payment_program_prints_the_run():
    out = run_program("payment", "--seed", "4", "--keys", "stable")
    assert "   0.00 s  job 1, attempt 1: charge $10.00: ConnectionError: could not reach " \
           "the bank; retry in 0.34 s" in out.splitlines()
    assert out.rstrip().endswith("Alice paid $50.00 for orders worth $40.00: $10.00 more "
                                 "(order 3 is dead, yet the bank charged it once)")


def test_the_o7_program_prints_the_story():
    story = run_program("o7", "--blind").splitlines()
    assert story[0] == ("day 1 12:00  W1 takes North/O7 (invoice 7, $50.00) and calls the "
                        "provider, key North/O7")
    assert story[1] == "             provider: new charge C9, key North/O7"
    assert story[-3] == "             provider: new charge C11, key North/O8"
    assert story[-1] == "             the provider made 3 charges for 2 operations"
