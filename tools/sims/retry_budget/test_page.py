"""The retry budget in Chromium: its tasks, its pictures and its controls. The
checks every simulation passes (fit, axe, the standard library, the focus) are
tools/sims/test_pages.py's; they make the moves in SMOKE."""
import re

import pytest
from playwright.sync_api import expect

from tests.browser import (BOOT_SECONDS, OUTSIDE, answered, follows_the_theme_and_keeps_still,
                           start_simulation, task_done, tick, visit)
from tools.sims.retry_budget.engine import RetryBudget


CHAPTER = "limits-bounding-the-work.html"
# What the shared checks do here, a move at a time (tests/browser.py make_moves):
# enough to fill its tables and pictures and to import all it needs.
SMOKE = [tick("Retry budget"), tick("Jitter"), tick("Retry budget")]


def pictures_fit(sim, page):
    """Every word of both pictures lies inside them, with the budget and
    without, the run's last words said either way (the shared checks ask
    after every move)."""
    for picture in ("svg.rb-curves", "svg.rb-run"):
        assert sim.locator(picture).evaluate(OUTSIDE) == [], picture


POINTS = """(svg) => [...svg.querySelectorAll(".rb-point")].map((point) => ({
    line: point.dataset.line, failing: Number(point.dataset.failing),
    y: point.getBBox().y + point.getBBox().height / 2,
    shape: point.querySelector("circle") ? "circle" : point.querySelector("rect") ? "square"
        : "none"}))"""


def test_the_retry_budget_curves_are_the_engines_table(watched, site_url):
    """Eleven points a line, one line per kind of client, told apart by the
    shape of their points and by their words: without a budget the load
    climbs to the engine's 3.0× at total failure, with one it stays under
    the 1.2× line, and each line's last words give its number."""
    sim = start_simulation(watched, site_url, CHAPTER, "retry-budget")
    curves = sim.locator("svg.rb-curves")
    expect(curves).to_have_attribute("role", "img")
    table = RetryBudget().state()["amplification"]
    answered(sim)
    points = curves.evaluate(POINTS)
    assert sorted(point["failing"] for point in points if point["line"] == "without") == \
        [row["failing"] for row in table]
    assert sorted(point["failing"] for point in points if point["line"] == "with") == \
        [row["failing"] for row in table]
    assert {point["shape"] for point in points if point["line"] == "without"} == {"circle"}
    assert {point["shape"] for point in points if point["line"] == "with"} == {"square"}
    y = {(point["line"], point["failing"]): point["y"] for point in points}
    mark = curves.locator(".rb-mark").evaluate("(line) => line.getBBox().y")
    for row in table:                         # higher on the page: more load
        if row["without"] > row["with"] + 0.05:
            assert y["without", row["failing"]] < y["with", row["failing"]], row
        assert y["with", row["failing"]] > mark, row
    assert y["without", 1.0] < mark
    last = table[-1]
    expect(curves.locator('.rb-end[data-line="without"]')).to_contain_text(
        f"{last['without']:.1f}×")
    expect(curves.locator('.rb-end[data-line="with"]')).to_contain_text(f"{last['with']:.1f}×")
    expect(curves.locator(".rb-mark-label")).to_have_text("1.2×")
    expect(curves).to_have_attribute("aria-label", re.compile(
        rf"{last['without']:.1f}×.*{last['with']:.1f}×"))
    assert watched.problems == []


def recovery_said(sim):
    return sim.locator("svg.rb-run .rb-recovery")


def test_the_recovery_picture_draws_every_second_and_says_if_it_came_back(watched, site_url):
    """Sixty seconds, a bar of load and a bar of answers each, the stall
    shaded and named; without a budget the words on the picture say it
    never came back, and the last seconds' load bars stand above the line
    of what the backend can answer. With a budget (switched on from the
    keyboard) it comes back at the second the engine says, and its load
    bars drop below that line."""
    sim = start_simulation(watched, site_url, CHAPTER, "retry-budget")
    run = sim.locator("svg.rb-run")
    expect(run).to_have_attribute("role", "img")
    down = RetryBudget().state()
    answered(sim)
    counted = sum(1 for each in down["seconds"] if each["offered"])
    expect(run.locator(".rb-load")).to_have_count(counted)
    expect(run.locator(".rb-answered")).to_have_count(counted)
    stall = down["settings"]["stall"]
    expect(run.locator(".rb-stall text")).to_contain_text(
        f"{down['stall_at']:g}–{down['stall_at'] + stall:g} s")
    expect(recovery_said(sim)).to_contain_text("never")
    expect(run).to_have_attribute("aria-label", re.compile("never"))
    expect(sim.locator(".sim-result")).to_have_text(
        "Never healthy again: 3.0 calls a request at the end, where it can answer 1.7.")
    capacity = run.locator(".rb-capacity line").evaluate("(line) => line.getBBox().y")
    tops = """(svg) => [...svg.querySelectorAll(".rb-load")]
        .filter((bar) => Number(bar.dataset.second) >= 50).map((bar) => bar.getBBox().y)"""
    assert all(top < capacity for top in run.evaluate(tops))
    budget = sim.get_by_label("Retry budget", exact=True)
    budget.focus()
    watched.keyboard.press("Space")
    back = RetryBudget(budget=True).state()["recovered_at"]
    expect(recovery_said(sim)).to_contain_text(f"{back} s")
    expect(run.locator(".rb-recovered")).to_have_attribute("data-at", str(back))
    answered(sim)
    assert all(top > capacity for top in run.evaluate(tops))
    expect(sim.locator('[aria-live="polite"]')).to_contain_text(f"{back} s")
    late = back - down["stall_at"] - stall
    expect(sim.locator(".sim-result")).to_contain_text(f"Healthy again {late:g} s after the stall")
    assert watched.problems == []


def test_the_retry_budget_tasks_by_keyboard(watched, site_url):
    """Nothing is done where it starts, though the backend stays down there.
    Try jitter without a budget (still down), bring it back with the budget,
    then find a load at which it comes back without one: the load slider
    moved by its arrow keys until the engine says it came back."""
    sim = start_simulation(watched, site_url, CHAPTER, "retry-budget", keyboard=True)
    # A task that is a question ends the line with its question mark alone.
    expect(sim.locator(".sim-status")).to_have_text(
        "Try first: without a budget, try jitter: does it bring the backend back?")
    expect(sim.locator(".sim-tasks li.done")).to_have_count(0)
    sim.get_by_label("Jitter", exact=True).press("Space")
    expect(task_done(sim, "stuck")).to_have_class("done")
    expect(sim.locator(".sim-status")).to_contain_text("Next: ")
    sim.get_by_label("Retry budget", exact=True).press("Space")
    expect(task_done(sim, "back")).to_have_class("done")
    for label in ("Retry budget", "Jitter"):
        sim.get_by_label(label, exact=True).press("Space")
        answered(sim)
    load = sim.get_by_label("Load", exact=True)
    start, lowest, step = (float(load.get_attribute(name)) for name in ("value", "min", "step"))
    loads = [round(start - step * count, 2)
             for count in range(1, round((start - lowest) / step) + 1)]
    light = next(value for value in loads
                 if RetryBudget(load=value).state()["recovered_at"] is not None)
    for value in loads:
        load.press("ArrowLeft")
        answered(sim)
        if value == light:
            break
    expect(load).to_have_value(f"{light:g}")
    expect(task_done(sim, "light")).to_have_class("done")
    expect(recovery_said(sim)).not_to_contain_text("never")
    expect(sim.locator(".sim-status")).to_contain_text("That was the last task.")
    assert watched.problems == []


def test_the_retry_budget_picture_follows_the_theme_and_keeps_still_when_asked(watched,
                                                                             site_url):
    """Its lines and words take the page's colours in either theme; the
    words that say where it recovered fade in only for a reader who allows
    motion."""
    watched.emulate_media(color_scheme="light", reduced_motion="no-preference")
    sim = start_simulation(watched, site_url, CHAPTER, "retry-budget")
    answered(sim)

    follows_the_theme_and_keeps_still(watched, lambda: sim.evaluate("""(sim) => [
        getComputedStyle(sim.querySelector('.rb-line[data-line="without"]')).stroke,
        getComputedStyle(sim.querySelector('.rb-end[data-line="without"]')).fill,
        getComputedStyle(sim.querySelector(".rb-recovery")).animationName]"""))
    assert watched.problems == []


# ---- the run played in time

SHOWN = """(svg) => [...svg.querySelectorAll(".rb-load")]
    .filter((bar) => getComputedStyle(bar).display !== "none")
    .map((bar) => Number(bar.dataset.second))"""
LATER = """(svg) => [...svg.querySelectorAll(".rb-load.rb-later")]
    .map((bar) => Number(bar.dataset.second))"""


def second_of(sim):
    return int(sim.get_by_label("Second", exact=True).input_value())


def test_play_reveals_the_run_second_by_second_on_the_pages_clock(watched_alone, site_url):
    """Before any Python the first picture holds the whole run. On the
    page's own clock, held still: Play starts the run again from 0 s, and
    a second later of that clock it shows a few seconds, the bars after the
    cursor hidden and the cursor on the axis at the slider's second; paused,
    the seconds still to come are drawn faint; played on, the whole run at
    the end, with nothing faint and the button back to Play."""
    watched = watched_alone
    watched.clock.install()
    state = RetryBudget().state()
    counted = sum(1 for each in state["seconds"] if each["offered"])
    visit(watched, f"{site_url}/{CHAPTER}")
    sim = watched.locator('.sim-mount[data-sim="retry-budget"]')
    sim.scroll_into_view_if_needed()
    run = sim.locator("svg.rb-run")
    expect(run.locator(".rb-load")).to_have_count(counted)
    assert run.evaluate(LATER) == []
    sim.get_by_role("button", name="Start the simulation").click()
    expect(sim).to_have_attribute("data-state", "ready", timeout=BOOT_SECONDS * 1000)
    answered(sim)
    watched.clock.pause_at(watched.evaluate("Date.now()") + 10)
    play = sim.locator("button.rb-play")
    play.click()
    expect(play).to_have_attribute("aria-pressed", "true")
    watched.clock.run_for(1000)
    now = second_of(sim)
    assert 1 <= now < 20, now
    assert run.evaluate(SHOWN) == [i for i in range(now) if state["seconds"][i]["offered"]]
    cursor = run.locator(".rb-cursor")
    expect(cursor).to_have_attribute("data-second", str(now))
    bar = run.locator(f'.rb-load[data-second="{now - 1}"]').bounding_box()
    line = cursor.locator("line").bounding_box()
    assert abs(line["x"] + line["width"] / 2 - (bar["x"] + bar["width"])) < 2
    sim.get_by_role("button", name="Pause").click()
    expect(play).to_have_attribute("aria-pressed", "false")
    paused = second_of(sim)
    assert run.evaluate(LATER) == [i for i in range(paused, len(state["seconds"]))
                                   if state["seconds"][i]["offered"]]
    assert len(run.evaluate(SHOWN)) == counted       # faint, not hidden
    play.click()
    watched.clock.run_for(30_000)
    expect(play).to_have_text("Play")
    expect(play).to_have_attribute("aria-pressed", "false")
    assert second_of(sim) == len(state["seconds"])
    assert run.evaluate(LATER) == []
    assert len(run.evaluate(SHOWN)) == counted
    assert watched.problems == []


def test_the_runs_cursor_is_a_slider_its_keys_and_the_chart_move(watched, site_url):
    """The slider says, for the second before its cursor, the calls per
    request and the share answered in time that the engine gives; Home,
    End and the arrow keys move it; a click on the chart puts the cursor
    there; Show all shows the whole run again."""
    sim = start_simulation(watched, site_url, CHAPTER, "retry-budget")
    state = RetryBudget().state()
    answered(sim)
    slider = sim.get_by_label("Second", exact=True)
    expect(slider).to_have_value(str(len(state["seconds"])))
    slider.focus()
    watched.keyboard.press("Home")
    expect(slider).to_have_value("0")
    for _ in range(12):
        watched.keyboard.press("ArrowRight")
    expect(slider).to_have_value("12")
    second = state["seconds"][11]
    load = second["calls"] / second["offered"]
    share = min(1, second["answered"] / second["offered"])
    expect(slider).to_have_attribute("aria-valuetext", re.compile(
        rf"^11–12 s: {load:.1f} calls per request, {round(share * 100)}% answered in time, "
        r"stalled$"))
    run = sim.locator("svg.rb-run")
    expect(run.locator(".rb-cursor")).to_have_attribute("data-second", "12")
    assert run.evaluate(LATER)[0] == 12
    bar = run.locator('.rb-load[data-second="39"]').bounding_box()
    watched.mouse.click(bar["x"] + bar["width"] - 1, bar["y"] + bar["height"] / 2)
    expect(slider).to_have_value("40")
    expect(run.locator(".rb-cursor")).to_have_attribute("data-second", "40")
    sim.get_by_role("button", name="Show all").click()
    expect(slider).to_have_value(str(len(state["seconds"])))
    assert run.evaluate(LATER) == []
    assert watched.problems == []


def test_with_reduced_motion_play_moves_ten_seconds_at_a_time(watched_alone, site_url):
    """A reader who asks for less motion is told that Play moves in steps
    of 10 s; on the page's own clock every second it is at is a multiple
    of 10, and it still gets to the end."""
    watched = watched_alone
    watched.emulate_media(reduced_motion="reduce")
    watched.clock.install()
    sim = start_simulation(watched, site_url, CHAPTER, "retry-budget")
    answered(sim)
    watched.clock.pause_at(watched.evaluate("Date.now()") + 10)
    play = sim.locator("button.rb-play")
    expect(play).to_have_accessible_description(re.compile("10 s at a time"))
    play.click()
    seen = set()
    for _ in range(8):
        watched.clock.run_for(1000)
        seen.add(second_of(sim))
    assert seen and all(second % 10 == 0 for second in seen), seen
    assert len(seen) > 1, seen
    watched.clock.run_for(30_000)
    assert second_of(sim) == 60
    expect(play).to_have_text("Play")
    assert watched.problems == []


SPARE = """(svg) => [...svg.querySelectorAll(".rb-spare")].map((bar) => ({
    second: Number(bar.dataset.second), height: bar.getBBox().height}))"""


def test_with_a_budget_a_third_strip_shows_the_retries_it_still_allows(watched, site_url):
    """No strip without a budget. With one, a bar a second for each second
    the engine says the budget still allows retries, as tall as their
    number: the tallest at the engine's most, none while it is spent, and
    the slider says how many are left."""
    sim = start_simulation(watched, site_url, CHAPTER, "retry-budget")
    run = sim.locator("svg.rb-run")
    answered(sim)
    expect(run.locator(".rb-spare")).to_have_count(0)
    sim.get_by_label("Retry budget", exact=True).check()
    state = RetryBudget(budget=True).state()
    spare = [each["spare"] for each in state["seconds"]]
    expect(run.locator(".rb-spare")).to_have_count(sum(1 for left in spare if left > 0))
    answered(sim)
    bars = run.evaluate(SPARE)
    assert [bar["second"] for bar in bars] == [i for i, left in enumerate(spare) if left > 0]
    tallest = max(bars, key=lambda bar: bar["height"])
    assert spare[tallest["second"]] == max(spare)
    for bar in bars:
        assert bar["height"] == pytest.approx(tallest["height"] * spare[bar["second"]]
                                              / max(spare), abs=0.5)
    expect(run.locator("text.rb-title").last).to_have_text("retries the budget still allows")
    slider = sim.get_by_label("Second", exact=True)
    slider.focus()
    watched.keyboard.press("Home")
    for _ in range(10):
        watched.keyboard.press("ArrowRight")
    expect(slider).to_have_attribute("aria-valuetext", re.compile(
        rf", {spare[9]} retries left in the budget$"))
    assert watched.problems == []
