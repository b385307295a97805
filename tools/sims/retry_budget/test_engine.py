"""The retry budget's engine (tools/sims/retry_budget/engine.py) against the
SRE book: 3x the load at total failure without a budget, 1.1x with; a stall
that retries keep down for good without a budget, and that a budget
recovers from; the figures Chapter 11 quotes; its tasks and its program."""
import math
import statistics

import pytest

from tests.helpers import PROSE, earned, run_program
from tools.sims.retry_budget import engine as retry_budget
from tools.sims.retry_budget.engine import RetryBudget


def test_without_a_budget_a_dead_backend_gets_three_times_the_load():
    assert retry_budget.amplification(1.0, budget=False) == 3.0
    assert retry_budget.amplification(0.0, budget=False) == 1.0


def test_a_ten_percent_budget_holds_a_dead_backend_to_about_one_point_one():
    assert 1.09 <= retry_budget.amplification(1.0, budget=True) <= 1.11
    for tenths in range(11):
        assert retry_budget.amplification(tenths / 10, budget=True) <= 1.11


def test_without_a_budget_the_load_grows_with_the_failures():
    """1 + f + f²: each of the 3 attempts is made only if the ones before failed."""
    for tenths in range(11):
        failing = tenths / 10
        load = retry_budget.amplification(failing, budget=False, requests=100_000)
        assert load == pytest.approx(1 + failing + failing ** 2, abs=0.02)


def last_seconds(seconds, count=10):
    tail = seconds[-count:]
    return sum(s["calls"] for s in tail) / sum(s["offered"] for s in tail)


def test_without_a_budget_the_retries_alone_keep_the_backend_down():
    """A metastable failure: five seconds of stall, then 45 s in which the
    backend could answer every request, and it answers none in time."""
    for jitter in (False, True):
        sim = RetryBudget(budget=False, jitter=jitter)
        state = sim.state()
        assert state["recovered_at"] is None, jitter
        assert last_seconds(state["seconds"]) > 2.5
        assert sum(s["answered"] for s in state["seconds"][20:]) == 0


def test_with_a_budget_the_backend_recovers():
    for jitter in (False, True):
        state = RetryBudget(budget=True, jitter=jitter).state()
        assert state["recovered_at"] is not None and state["recovered_at"] < 30, jitter
        assert last_seconds(state["seconds"]) < 1.2


def test_without_a_stall_nothing_needs_a_retry():
    state = RetryBudget(stall=0.0).state()
    assert state["recovered_at"] == 10
    assert last_seconds(state["seconds"], 60) == pytest.approx(1.0, abs=0.01)


def test_the_retry_budget_refuses_settings_out_of_range():
    with pytest.raises(ValueError, match=r"load must be a number from 0.1 to 1.0, not 1.5"):
        RetryBudget(load=1.5)
    with pytest.raises(ValueError, match="budget must be true or false"):
        RetryBudget(budget="yes")


def test_the_retry_budget_program_prints_both_models():
    output = run_program("retry-budget", "--budget")
    assert "   100%      3.00×    1.10×" in output
    assert "recovered at " in output and "a retry budget" in output


def test_with_a_budget_the_program_prints_the_retries_it_still_allows():
    """Each second's row ends with the budget's spare retries, as the
    page's strip draws them; without a budget, rows have no such column."""
    seconds = RetryBudget(budget=True).state()["seconds"]
    rows = {}
    for line in run_program("retry-budget", "--budget").splitlines():
        words = line.split()
        if words[:1] == ["s"] or (len(words) > 3 and words[0].isdigit()
                                  and words[1].endswith("×") and words[2].endswith("%")):
            rows[words[0]] = words
    assert rows.pop("s")[-1] == "spare"
    assert [int(words[3]) for words in rows.values()] == [each["spare"] for each in seconds]
    assert "spare" not in run_program("retry-budget")


def test_no_budget_task_is_done_before_the_reader_changes_anything():
    """Where a simulation starts is not something the reader did: the
    backend kept down at the start earns nothing yet."""
    assert earned(RetryBudget().state()) == set() and RetryBudget().recovered_at is None
    assert earned(RetryBudget(budget=True).state()) == set()


def test_the_retry_budget_tasks_are_earned_by_doing_them():
    sim = RetryBudget(stall=1.0)                 # too short a stall to keep it down
    assert earned(sim.state()) == set()
    sim.configure(stall=5.0)                     # down, but jitter not tried
    assert earned(sim.state()) == set()
    sim.configure(jitter=True)                   # down all the same
    assert earned(sim.state()) == {"stuck"}
    sim.configure(budget=True, stall=1.0)        # back, but it was never kept down
    assert earned(sim.state()) == {"stuck"}
    sim.configure(stall=5.0)                     # back at 24 s, 9 s after the stall
    assert earned(sim.state()) == {"stuck", "back"}
    sim.configure(budget=False, load=0.2)        # back, but not the highest load
    assert earned(sim.state()) == {"stuck", "back"}
    sim.configure(load=0.3)
    assert earned(sim.state()) == {"stuck", "back", "light"}


# ---- what the guide says the engine gave

def test_chapter_10_quotes_the_retry_budget_engine():
    table = {row["failing"]: row for row in retry_budget.amplification_table(1)}
    assert (f"budget send it {table[1.0]['without']:.2f} times their requests, each request "
            f"trying three times; with the budget, {table[1.0]['with']:.2f} times. When it fails "
            f"half the calls: {table[0.5]['without']:.2f} times without, and still "
            f"{table[0.5]['with']:.2f} with.") in PROSE
    stuck = RetryBudget().state()
    assert (stuck["settings"]["load"], stuck["settings"]["stall"],
            retry_budget.TIMEOUT_SECONDS, retry_budget.ATTEMPTS) == (0.6, 5.0, 1.0, 3)
    assert f"the backend {last_seconds(stuck['seconds']):.2f} times its requests" in PROSE
    assert stuck["recovered_at"] is None
    end = int(retry_budget.STALL_AT + stuck["settings"]["stall"])
    assert sum(s["answered"] for s in stuck["seconds"][end:]) == 0
    assert f"from the end of the stall to the end of the run, {retry_budget.SECONDS - end} " \
           f"seconds later, it answers no request in time" in PROSE
    back = RetryBudget(budget=True).state()
    assert f"from {back['recovered_at']} s on, the backend answers its requests in time" in PROSE


def test_the_budget_is_spent_within_the_stall_and_jitter_sends_as_many():
    """Chapter 11: with the budget, what it saved is spent in the stall's
    first seconds, then the load stays near 1.1 times the requests; without
    one, jitter sends about as many calls as no jitter."""
    back = RetryBudget(budget=True).state()["seconds"]
    assert back[11]["calls"] > 1.5 * back[11]["offered"]
    assert all(s["calls"] <= 1.15 * s["offered"] for s in back[13:])
    plain, jittered = (sum(s["calls"] for s in RetryBudget(jitter=j).state()["seconds"])
                       for j in (False, True))
    assert abs(jittered / plain - 1) < 0.02


def test_the_retry_budget_state_holds_the_limits_its_picture_draws():
    """The view draws the backend's capacity, the healthy share and the
    limits from the state, so they must agree with what the run did."""
    state = RetryBudget(load=0.5, budget=True).state()
    offered = statistics.mean(each["offered"] for each in state["seconds"])
    assert offered == pytest.approx(0.5 * state["capacity"], rel=0.1)
    assert state["amplification"][-1]["without"] == state["attempts"]
    assert state["amplification"][-1]["with"] == pytest.approx(1 + state["budget_share"],
                                                                abs=0.01)
    recovered = state["recovered_at"]
    assert recovered is not None
    assert all(each["answered"] >= state["healthy"] * each["offered"]
               for each in state["seconds"][recovered:])
    before = state["seconds"][recovered - 1]
    assert before["answered"] < state["healthy"] * before["offered"]


def test_the_budgets_spare_retries_are_saved_before_the_stall_and_spent_in_it():
    """Each second ends with the retries the budget still allows: 10% of
    the requests so far before the stall, when nothing needs a retry; one
    at most from the stall's second second until it recovers; and what it
    let through, over the run, is the retries the backend got (or a few
    more, granted in the last seconds and sent after the run). Without a
    budget there is none to draw."""
    state = RetryBudget(budget=True).state()
    seconds = state["seconds"]
    spare = [each["spare"] for each in seconds]
    before = int(state["stall_at"])
    assert spare[before - 1] == math.ceil(
        state["budget_share"] * sum(each["offered"] for each in seconds[:before]))
    assert spare[before - 1] > 30
    assert all(left <= 1 for left in spare[before + 2:state["recovered_at"]])
    assert all(isinstance(left, int) and left >= 0 for left in spare)
    granted = math.ceil(state["budget_share"] * sum(each["offered"] for each in seconds)) \
        - spare[-1]
    sent = sum(each["calls"] - each["offered"] for each in seconds)
    assert 0 <= granted - sent <= 10
    assert {each["spare"] for each in RetryBudget().state()["seconds"]} == {None}
