"""The crash-timing explorer's engine (tools/sims/crash_timing/engine.py):
every cell of the matrix the chapters claim, the moments each protection
offers, what its picture draws, what the page may call and its text
program."""
import contextlib
import json

import pytest

from tests.helpers import ask, run_program, tasks
from tools.sims.crash_timing import engine as crash_timing
from tools.sims.crash_timing.engine import CrashTiming


tinyq = crash_timing.tinyq      # the capstone's library, as the engines load it

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


def test_choose_keeps_the_moment_whatever_the_protection():
    """The page's one crash marker moves along every protection at once, so
    a protection whose code never passes the moment keeps it: its run is
    n/a. A moment or a protection that does not exist is refused."""
    sim = CrashTiming("none", "after-effect")
    sim.choose(protection="key")
    assert (sim.protection, sim.crash) == ("key", "after-effect")
    sim.choose(protection="transaction")                 # it has no after-effect moment
    assert (sim.protection, sim.crash) == ("transaction", "after-effect")
    assert sim.run() == "n/a"
    assert whats(sim.state())[-1] == ("explorer", "the worker never passed that moment: this "
                                                  "protection does not have it")
    sim.choose("key", "between-effect-and-key")
    assert (sim.protection, sim.crash) == ("key", "between-effect-and-key")
    for bad in [lambda: sim.choose(protection="hope"), lambda: sim.choose(crash="later"),
                lambda: CrashTiming("none", "soon")]:
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
    assert {"protection", "crash", "protections", "moments", "rows", "timeline", "outcome",
            "effects", "tasks"} <= set(state)
    assert {"t", "who", "what", "kind"} == set(state["timeline"][0])


# ---- what the picture draws: the steps as stations, and where each crash falls

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


def row(state, protection):
    (found,) = [row for row in state["rows"] if row["id"] == protection]
    return found


@pytest.mark.parametrize("protection", COLUMNS)
def test_each_protection_reports_its_steps_and_where_each_crash_falls(matrix, protection):
    """Whichever protection is chosen, the state holds a row for every one,
    in the matrix's order and under its names."""
    state = CrashTiming("key").state()
    assert [found["id"] for found in state["rows"]] == list(COLUMNS)
    found = row(state, protection)
    assert [station["label"] for station in found["stations"]] == STATIONS[protection]
    names = {column["id"]: column["name"] for column in matrix["columns"]}
    assert found["name"] == names[protection]
    assert found["label"] == crash_timing.PROTECTIONS[protection]
    assert {point["id"]: point["after"] for point in found["points"]} == AFTER[protection]


@pytest.mark.parametrize("protection", COLUMNS)
def test_each_row_holds_every_crash_points_outcome_as_the_matrix_has_it(matrix, protection):
    points = row(CrashTiming().state(), protection)["points"]
    offered = [crash for crash in EXPECTED if cell(matrix, crash, protection)[0] != "n/a"]
    assert [point["id"] for point in points] == offered
    assert {point["id"]: (point["outcome"], point["effects"]) for point in points} \
        == {crash: cell(matrix, crash, protection) for crash in offered}


def test_the_moments_are_the_job_life_in_order_then_no_crash(matrix):
    """The one crash marker's stops: every moment some protection passes,
    in the order of a job's life, and no crash at the end; named as the
    matrix's rows are."""
    moments = CrashTiming().state()["moments"]
    rows = {found["id"]: found["label"] for found in matrix["rows"]}
    assert [moment["id"] for moment in moments] == [crash for crash in EXPECTED
                                                     if crash != "none"] + ["none"]
    assert all(moment["label"] == rows[moment["id"]] for moment in moments)


@pytest.mark.parametrize("crash", EXPECTED)
def test_compare_runs_one_crash_under_every_protection(crash):
    """What the page's rows show under the one crash marker, each run afresh."""
    sim = CrashTiming()
    found = sim.compare(crash)
    assert list(found) == list(COLUMNS)
    assert [(cell["outcome"], cell["effects"]) for cell in found.values()] == \
        list(EXPECTED[crash])
    assert sim.crash == crash


def test_compare_tells_the_chosen_protections_story_and_earns_its_tasks():
    sim = CrashTiming("transaction", "none")
    sim.compare("after-effect")
    state = sim.state()
    assert (state["crash"], state["outcome"]) == ("after-effect", "n/a")
    assert tasks(state) == {"duplicate": True, "lost": False, "key-not-enough": False}
    sim.choose(protection="key-apart")
    sim.compare("between-effect-and-key")
    state = sim.state()
    assert (state["outcome"], state["effects"]) == DUP and state["timeline"]
    assert tasks(state)["key-not-enough"] and not tasks(state)["lost"]
    sim.compare("between-ack-and-effect")
    assert all(tasks(sim.state()).values())


def test_choose_can_run_the_choice_at_once():
    sim = CrashTiming("key", "after-claim")
    assert sim.choose("none", "after-effect", True) == "duplicate"
    state = sim.state()
    assert (state["protection"], state["crash"], state["outcome"], state["effects"]) == \
        ("none", "after-effect", "duplicate", 2)
    assert tasks(state)["duplicate"] and state["timeline"]
    assert sim.choose(crash="after-ack") is None          # without run: nothing run yet
    assert sim.state()["outcome"] is None


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
    refused = ask("crash-timing", "c1", "choose", {"crash": "later"})
    assert not refused["ok"] and "crash must be" in refused["error"]
    answer = ask("crash-timing", "c1", "compare", {"crash": "after-effect"})
    assert answer["result"]["none"] == {"outcome": "duplicate", "effects": 2}
    assert answer["state"]["crash"] == "after-effect"
    assert ask("crash-timing", "c1", "close")["result"] is True


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
