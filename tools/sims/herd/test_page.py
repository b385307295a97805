"""The thundering herd in Chromium: its tasks, its pictures and its controls.
The checks every simulation passes (fit, axe, the standard library, the focus)
are tools/sims/test_pages.py's; they make the moves in SMOKE."""
import re

from playwright.sync_api import expect

from tests.browser import (start_simulation, task_done, answered,
                           menu_when_the_first_answer_is_drawn, python_requests, choose,
                           OUTSIDE, WIDER)


CHAPTER = "retry-trying-again-politely.html"
# What the shared checks do here, a move at a time (tests/browser.py make_moves):
# enough to fill its tables and pictures and to import all it needs.
SMOKE = ["New seed", choose("Policy", "exponential")]


def pictures_fit(sim, page):
    """Every word of both pictures lies inside them, neither is wider than
    its box, and the spikes take the theme's own ink (the shared checks ask
    after every move, at both widths and in both themes)."""
    for picture in ("svg.herd-spikes", "svg.herd-compare"):
        assert sim.locator(picture).evaluate(OUTSIDE) == [], picture
        assert not sim.locator(picture).evaluate(WIDER), picture
    ink = sim.locator(".herd-crowd line").first.evaluate("(line) => getComputedStyle(line).stroke")
    assert ink == page.evaluate("getComputedStyle(document.body).color")


def herd_state(**settings):
    """What the herd engine reports, under CPython, for these settings (the
    page's first run is full jitter)."""
    from tools.sims.herd.engine import Herd
    return Herd(**{"policy": "full", **settings}).state()


def herd_said(value):
    """A time as the engine's terminal program says it."""
    from tools.sims.herd.engine import seconds
    return seconds(value)


BURSTS = """(svg) => [...svg.querySelectorAll(".herd-burst")].map((mark) => ({
    column: Number(mark.dataset.column), most: Number(mark.dataset.most),
    crowd: mark.classList.contains("herd-crowd"), height: mark.getBBox().height,
    topped: !!mark.querySelector(".herd-top")}))"""


def drawn_bursts(sim):
    return sim.locator("svg.herd-spikes").evaluate(BURSTS)


def test_the_herd_picture_draws_a_smear_with_jitter_and_spikes_without(watched, site_url):
    """Full jitter: after everyone's first call, no two calls at one instant,
    a low smear. Exponential backoff without jitter: tall spikes, each
    topped by a mark and taller than any jittered call, round after round,
    its tallest after the first said in words; each run on its own axis,
    whose span is said. Every column is the engine's."""
    fetched = python_requests(watched)
    sim = start_simulation(watched, site_url, CHAPTER, "herd")
    picture = sim.locator("svg.herd-spikes")
    expect(picture).to_have_attribute("role", "img")
    full = herd_state()
    answered(sim)
    marks = drawn_bursts(sim)
    assert [(m["column"], m["most"]) for m in marks] == [
        (n, each["most"]) for n, each in enumerate(full["bursts"]) if each["most"]]
    assert [m["column"] for m in marks if m["crowd"]] == [0]      # only the start
    expect(sim.locator(".herd-span")).to_contain_text(herd_said(full["seconds"]))
    expect(picture).to_have_attribute("aria-label", re.compile(
        rf"full jitter.*{re.escape(herd_said(full['seconds']))}.*"
        rf"at most {full['in_step']} at one instant after the first"))
    low = max(m["height"] for m in marks[1:])
    sim.get_by_label("Policy", exact=True).select_option("exponential")
    exponential = herd_state(policy="exponential")
    expect(sim.locator(".herd-span")).to_contain_text(herd_said(exponential["seconds"]))
    answered(sim)
    marks = drawn_bursts(sim)
    assert [(m["column"], m["most"]) for m in marks] == [
        (n, each["most"]) for n, each in enumerate(exponential["bursts"]) if each["most"]]
    crowds = [m for m in marks[1:] if m["crowd"]]
    assert len(crowds) >= 20 and all(m["topped"] and m["height"] > low for m in crowds)
    heights = [m["height"] for m in crowds]
    assert heights == sorted(heights, reverse=True)               # one fewer each round
    expect(sim.locator(".herd-tallest")).to_contain_text(f"{exponential['in_step']} at once")
    expect(picture).to_have_attribute("aria-label", re.compile(
        rf"exponential, no jitter.*at most {exponential['in_step']} at one instant"))
    expect(task_done(sim, "herd")).to_have_class("done")
    expect(sim.locator(".sim-status")).to_contain_text("Done: make the herd visible")
    assert not any(url.endswith("/python_stdlib.zip") for url in fetched)
    assert watched.problems == []


COMPARED = """(svg) => [...svg.querySelectorAll(".herd-policy")].map((row) => ({
    policy: row.dataset.policy, chosen: row.dataset.chosen === "true",
    calls: row.querySelector(".herd-calls").textContent,
    time: row.querySelector(".herd-time").textContent,
    callsBar: row.querySelector(".herd-calls-bar").getBBox().width,
    timeBar: row.querySelector(".herd-time-bar").getBBox().width,
    marked: row.querySelector(".herd-chosen")?.textContent ?? ""}))"""


def test_the_herd_comparison_gives_every_policys_calls_and_time(watched, site_url):
    """Five rows, one a policy, with the engine's calls and time in words and
    as bars in step with them; the chosen policy marked by a sign and
    words, not by colour alone. A new number of clients redraws them all."""
    sim = start_simulation(watched, site_url, CHAPTER, "herd")
    compare = sim.locator("svg.herd-compare")
    expect(compare).to_have_attribute("role", "img")

    def check(state):
        rows = compare.evaluate(COMPARED)
        assert [row["policy"] for row in rows] == list(state["policies"])
        for row in rows:
            truth = state["policies"][row["policy"]]
            assert row["calls"] == f"{truth['calls']:,} calls"
            assert row["time"] == herd_said(truth["seconds"])
            assert row["chosen"] == (row["policy"] == state["settings"]["policy"])
            assert ("▶" in row["marked"]) == row["chosen"]
        for a in rows:
            for b in rows:
                truth_a, truth_b = state["policies"][a["policy"]], state["policies"][b["policy"]]
                if truth_a["calls"] > truth_b["calls"]:
                    assert a["callsBar"] > b["callsBar"], (a, b)
                if truth_a["seconds"] > truth_b["seconds"]:
                    assert a["timeBar"] > b["timeBar"], (a, b)
        return rows

    answered(sim)
    check(herd_state())
    expect(compare).to_have_attribute("aria-label", re.compile(r"full jitter \(shown\)"))
    clients = sim.get_by_label("Clients", exact=True)
    clients.fill("30")
    clients.press("Enter")
    thirty = herd_state(clients=30)
    expect(compare.locator('[data-policy="none"] .herd-calls')).to_have_text(
        f"{thirty['policies']['none']['calls']:,} calls")
    answered(sim)
    check(thirty)
    sim.get_by_label("Policy", exact=True).select_option("decorrelated")
    expect(compare.locator('[data-policy="decorrelated"]')).to_have_attribute(
        "data-chosen", "true")
    answered(sim)
    check(herd_state(clients=30, policy="decorrelated"))
    assert watched.problems == []


def test_the_herd_tasks_by_keyboard(watched, site_url):
    """Every task, through the page's controls, by keyboard alone: no
    jitter makes the herd; full jitter with a small enough cap makes more
    than half the calls; decorrelated jitter gets 100 clients through
    quickly. Each change is announced."""
    sim = start_simulation(watched, site_url, CHAPTER, "herd", keyboard=True)
    policy = sim.get_by_label("Policy", exact=True)
    expect(policy).to_be_focused()
    for task in ("herd", "cap", "quick"):
        expect(task_done(sim, task)).not_to_have_class("done")
    announcer = sim.locator('[aria-live="polite"]')
    watched.keyboard.press("ArrowUp")             # full jitter, to exponential
    expect(policy).to_have_value("exponential")
    expect(task_done(sim, "herd")).to_have_class("done")
    expect(announcer).to_contain_text("exponential, no jitter")
    watched.keyboard.press("ArrowDown")
    expect(policy).to_have_value("full")
    cap = sim.get_by_label("Cap (s)", exact=True)
    cap.focus()
    watched.keyboard.press("ControlOrMeta+a")
    watched.keyboard.type("0.01")
    watched.keyboard.press("Tab")
    expect(task_done(sim, "cap")).to_have_class("done")
    expect(announcer).to_contain_text(f"{herd_state(cap=0.01)['calls']:,} calls")
    cap.focus()
    watched.keyboard.press("ControlOrMeta+a")
    watched.keyboard.type("0.2")
    watched.keyboard.press("Tab")
    expect(announcer).to_contain_text(f"{herd_state(cap=0.2)['calls']:,} calls")
    expect(task_done(sim, "quick")).not_to_have_class("done")    # full jitter: too many calls
    policy.focus()
    watched.keyboard.press("ArrowDown")
    watched.keyboard.press("ArrowDown")
    expect(policy).to_have_value("decorrelated")
    expect(task_done(sim, "quick")).to_have_class("done")
    expect(sim.locator(".sim-status")).to_contain_text("That was the last task")
    assert watched.problems == []


def test_the_herd_never_undoes_a_choice_made_while_python_was_busy(watched, site_url):
    """The reader changes the cap, then the policy before the cap's answer
    is back. Drawing that older answer must leave the policy menu at what
    the reader chose since: otherwise their next arrow key moves from the
    wrong place (CI caught one keyboard run landing on equal jitter)."""
    sim = start_simulation(watched, site_url, CHAPTER, "herd")
    answered(sim)
    shown = menu_when_the_first_answer_is_drawn(
        sim, "#herd-policy", ".sim-result", [("#herd-cap", "0.5"), ("#herd-policy", "equal")])
    assert shown == "equal"
    answered(sim)
    expect(sim.get_by_label("Policy", exact=True)).to_have_value("equal")
    expect(sim.locator(".sim-result")).to_contain_text("equal jitter")
    assert watched.problems == []


def test_the_herd_refuses_a_box_out_of_range_and_says_why(watched, site_url):
    """A number of clients the engine refuses is never sent: the box says
    what it takes, and the picture stays as it was."""
    sim = start_simulation(watched, site_url, CHAPTER, "herd")
    answered(sim)
    before = sim.locator("svg.herd-spikes").get_attribute("aria-label")
    clients = sim.get_by_label("Clients", exact=True)
    clients.fill("900")
    clients.press("Enter")
    answered(sim)
    assert clients.evaluate("(input) => input.validity.rangeOverflow")
    expect(sim.locator(".sim-status")).not_to_contain_text("did not work")
    expect(sim.locator("svg.herd-spikes")).to_have_attribute("aria-label", before)
    assert watched.problems == []


def test_the_herd_picture_keeps_still_when_asked(watched, site_url):
    """A redrawn picture fades in only for a reader who allows motion."""
    watched.emulate_media(reduced_motion="no-preference")
    sim = start_simulation(watched, site_url, CHAPTER, "herd")
    answered(sim)
    spikes = sim.locator("svg.herd-spikes .herd-bursts")
    assert spikes.evaluate("(g) => getComputedStyle(g).animationName") != "none"
    watched.emulate_media(reduced_motion="reduce")
    assert spikes.evaluate("(g) => getComputedStyle(g).animationName") == "none"
    assert watched.problems == []
