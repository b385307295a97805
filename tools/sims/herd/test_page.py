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
SMOKE = [choose("Policy", "exponential")]


def pictures_fit(sim, page):
    """Every word of the pictures lies inside them, none is wider than its
    box, and the calls take the theme's own ink (the shared checks ask
    after every move, at both widths and in both themes)."""
    for picture in (sim.locator("svg.herd-raster").nth(0), sim.locator("svg.herd-raster").nth(1),
                    sim.locator("svg.herd-compare")):
        assert picture.evaluate(OUTSIDE) == []
        assert not picture.evaluate(WIDER)
    ink = sim.locator(".herd-called").first.evaluate("(path) => getComputedStyle(path).fill")
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


# A raster as drawn: its policy, its caption, its words, and how many
# rectangles of calls (a run of neighbouring slices each) and of writes taken.
RASTER = """(svg) => ({
    policy: svg.dataset.policy, label: svg.getAttribute("aria-label"),
    caption: [...svg.querySelectorAll(".herd-caption")].map((line) => line.textContent).join(" "),
    called: (svg.querySelector(".herd-called").getAttribute("d").match(/M/g) || []).length,
    taken: (svg.querySelector(".herd-taken").getAttribute("d").match(/M/g) || []).length})"""


def drawn_rasters(sim):
    return [sim.locator("svg.herd-raster").nth(n).evaluate(RASTER) for n in range(2)]


def spread(run):
    """How the engine's calls share out among the slices: the slices with
    any call, and the clients on average in each of those."""
    busy = {slice for row in run["rows"] for slice in row["called"]}
    cells = sum(len(row["called"]) for row in run["rows"])
    return len(busy), round(cells / len(busy))


def test_the_herd_picture_shows_stripes_without_jitter_and_a_smear_with_it(watched, site_url):
    """Every call, a row for each client: full jitter, the policy the page
    starts on, beside exponential backoff without jitter; then the other
    way round. Without jitter the clients call in the same slices, round
    after round, many in each (stripes); full jitter spreads them thin (a
    smear). Each raster says its numbers in words, and they are the
    engine's; each client's write taken is marked once."""
    fetched = python_requests(watched)
    sim = start_simulation(watched, site_url, CHAPTER, "herd")
    expect(sim.locator("svg.herd-raster").first).to_have_attribute("role", "img")
    full = herd_state()
    answered(sim)
    drawn = drawn_rasters(sim)
    assert [run["policy"] for run in drawn] == ["full", "exponential"]
    for run, truth in zip(drawn, full["rasters"]):
        busy, average = spread(truth)
        assert f"Calls fall in {busy} of them, {average} clients on average in each." \
            in run["label"]
        assert run["caption"].endswith(f"{truth['calls']:,} calls in {herd_said(truth['seconds'])}")
        assert run["taken"] == 100 and run["called"] >= busy
    assert drawn[0]["caption"].startswith("▶ full jitter") and "(chosen)" in drawn[0]["label"]
    smear, stripes = (spread(truth)[1] for truth in full["rasters"])
    assert stripes >= 3 * smear, (stripes, smear)
    sim.get_by_label("Policy", exact=True).select_option("exponential")
    expect(sim.locator("svg.herd-raster").first).to_have_attribute("data-policy", "exponential")
    answered(sim)
    assert [run["policy"] for run in drawn_rasters(sim)] == ["exponential", "full"]
    expect(sim.locator(".herd-span")).to_contain_text(
        re.compile(r"exponential, no jitter, [\d.]+ ms each; full jitter, 29\.1 ms each"))
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
    cap = sim.get_by_label("Cap (ms)", exact=True)
    cap.focus()
    watched.keyboard.press("ControlOrMeta+a")
    watched.keyboard.type("10")
    watched.keyboard.press("Tab")
    expect(task_done(sim, "cap")).to_have_class("done")
    expect(announcer).to_contain_text(f"{herd_state(cap=0.01)['calls']:,} calls")
    cap.focus()
    watched.keyboard.press("ControlOrMeta+a")
    watched.keyboard.type("200")
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
        sim, "#herd-policy", ".sim-result", [("#herd-cap", "500"), ("#herd-policy", "equal")])
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
    before = sim.locator("svg.herd-raster").first.get_attribute("aria-label")
    clients = sim.get_by_label("Clients", exact=True)
    clients.fill("900")
    clients.press("Enter")
    answered(sim)
    assert clients.evaluate("(input) => input.validity.rangeOverflow")
    expect(sim.locator(".sim-status")).not_to_contain_text("did not work")
    expect(sim.locator("svg.herd-raster").first).to_have_attribute("aria-label", before)
    assert watched.problems == []


def test_the_herd_picture_keeps_still_when_asked(watched, site_url):
    """A redrawn picture fades in only for a reader who allows motion."""
    watched.emulate_media(reduced_motion="no-preference")
    sim = start_simulation(watched, site_url, CHAPTER, "herd")
    answered(sim)
    calls = sim.locator("svg.herd-raster .herd-called").first
    assert calls.evaluate("(path) => getComputedStyle(path).animationName") != "none"
    watched.emulate_media(reduced_motion="reduce")
    assert calls.evaluate("(path) => getComputedStyle(path).animationName") == "none"
    assert watched.problems == []
