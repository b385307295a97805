"""The race stepper in Chromium: its tasks, its pictures and its controls. The
checks every simulation passes (fit, axe, the standard library, the focus) are
tools/sims/test_pages.py's; they make the moves in SMOKE."""
import re

import pytest
from playwright.sync_api import expect

from tests.browser import start_simulation, task_done, answered


CHAPTER = "the-worker-where-work-happens.html"
# What the shared checks do here, a move at a time (tests/browser.py make_moves):
# enough to fill its tables and pictures and to import all it needs.
SMOKE = ["Step worker 1", "Step worker 2", "Try every interleaving"]


def test_the_race_stepper_by_keyboard_alone(watched, site_url):
    sim = start_simulation(watched, site_url, CHAPTER, "race", keyboard=True)
    expect(task_done(sim, "duplicate")).not_to_have_class("done")

    def press(name):
        sim.get_by_role("button", name=name).focus()
        watched.keyboard.press("Enter")

    def run_to_the_end(order):
        for worker in order:
            if sim.get_by_role("button", name=f"Step worker {worker}").is_enabled():
                press(f"Step worker {worker}")
        expect(sim.get_by_role("button", name="Step worker 1")).to_be_disabled()
        expect(sim.get_by_role("button", name="Step worker 2")).to_be_disabled()

    # both look before either marks: the naive claim sends job 1 twice
    run_to_the_end([1, 2, 1, 2] + [1, 2] * 4)
    expect(sim.locator(".sim-outbox li.duplicate")).to_contain_text("⚠ duplicate")
    expect(sim.locator(".sim-result")).to_have_text("2 emails for 1 job: job 1 was sent twice")
    expect(task_done(sim, "duplicate")).to_have_class("done")
    # the same order with the atomic claim sends it once
    sim.get_by_label("the atomic claim").focus()
    watched.keyboard.press("Space")
    expect(sim.locator(".sim-result")).not_to_contain_text("2 emails")
    run_to_the_end([1, 2] * 5)
    expect(sim.locator(".sim-result")).to_have_text("1 email for 1 job")
    expect(task_done(sim, "atomic-safe")).to_have_class("done")
    press("Try every interleaving")
    expect(sim.locator(".sim-every")).to_contain_text("the atomic claim: 0 of", timeout=30000)
    assert re.search(r"the naive claim: [1-9]\d* of \d+ orders send an email twice",
                     sim.locator(".sim-every").inner_text())
    assert watched.problems == []


def test_a_worker_that_finishes_under_the_focus_hands_it_on(watched, site_url):
    """Enter pressed on Step worker 1 until worker 1 has no step left: the
    button disables itself and the focus goes on to Step worker 2, where the
    next Enter works, not to the top of the page."""
    sim = start_simulation(watched, site_url, CHAPTER, "race", keyboard=True)
    step_1 = sim.get_by_role("button", name="Step worker 1")
    step_1.focus()
    for _ in range(20):                 # a worker has fewer steps than this
        watched.keyboard.press("Enter")
        answered(sim)
        if step_1.is_disabled():
            break
    expect(step_1).to_be_disabled()
    expect(sim.get_by_role("button", name="Step worker 2")).to_be_focused()
    assert watched.problems == []


def test_a_speed_chosen_while_playing_applies_at_once(watched_alone, site_url):
    """On the page's own clock, held still: Play at 1× (a step every 700 ms),
    then 3× (every 233 ms). The first step comes within 300 ms."""
    watched = watched_alone
    watched.clock.install()
    sim = start_simulation(watched, site_url, CHAPTER, "race")
    watched.clock.pause_at(watched.evaluate("Date.now()") + 10)
    said = sim.locator("[aria-live]")
    before = said.inner_text()                   # neither worker has started
    sim.get_by_role("button", name="Play a random order").click()
    sim.get_by_label("Speed").select_option("3")
    watched.clock.run_for(300)
    expect(said, "a step within 300 ms").not_to_have_text(before)
    assert watched.problems == []


def test_the_race_steppers_two_claims_are_one_choice(watched, site_url):
    """The claims are one group of radio buttons: one tab stop, the arrow
    keys move the choice, and choosing either, in any order, takes effect."""
    sim = start_simulation(watched, site_url, CHAPTER, "race")
    naive, atomic = (sim.get_by_role("radio", name=f"the {claim} claim")
                     for claim in ("naive", "atomic"))
    code = sim.locator(".race-program")                  # the steps, as code
    naive_code = code.text_content()
    assert "oldest = db.execute(" in naive_code and "RETURNING" not in naive_code
    atomic.check()
    expect(naive).not_to_be_checked()
    expect(code).not_to_have_text(naive_code)
    expect(code).to_contain_text("RETURNING id, kind, args")
    watched.keyboard.press("ArrowLeft")               # atomic has the focus
    expect(naive).to_be_checked()
    expect(atomic).not_to_be_checked()
    expect(code).to_have_text(naive_code)
    watched.keyboard.press("Tab")                      # past atomic, to the next control
    expect(sim.get_by_role("button", name="Step worker 1")).to_be_focused()
    assert watched.problems == []


def test_the_race_stepper_plays_a_seeded_order_again_the_same_way(watched, site_url):
    sim = start_simulation(watched, site_url, CHAPTER, "race")
    sim.get_by_label("Speed").select_option("3")

    def play_to_the_end():
        sim.get_by_role("button", name="Play a random order").click()
        for worker in (1, 2):
            expect(sim.get_by_role("button", name=f"Step worker {worker}")).to_be_disabled(
                timeout=20000)
        # The last step's answer may still be on its way; until it is, the
        # page would drop a click on Reset (issue 19 fixes that).
        answered(sim)
        return sim.locator(".sim-outbox").inner_text(), sim.locator(".sim-result").inner_text()

    expect(sim.locator(".sim-clock")).to_have_text("seed 1")
    first = play_to_the_end()
    sim.get_by_role("button", name="Reset").click()
    expect(sim.get_by_role("button", name="Step worker 1")).to_be_enabled()
    assert play_to_the_end() == first
    sim.get_by_role("button", name="Another order").click()
    expect(sim.locator(".sim-clock")).to_have_text("seed 2")
    assert watched.problems == []


def steps(sim, *workers):
    for worker in workers:
        sim.get_by_role("button", name=f"Step worker {worker}").click()
        answered(sim)


def box(locator):
    return locator.bounding_box()


def test_each_worker_is_marked_on_the_line_it_runs_next(watched, site_url):
    sim = start_simulation(watched, site_url, CHAPTER, "race")
    lines = sim.locator(".race-program li")
    expect(lines).to_have_count(5)                     # the naive claim's five steps

    def where(worker):
        return [index for index in range(5) if "here" in (lines.nth(index).locator(
            f'.race-chip[data-worker="{worker}"]').get_attribute("class"))]

    assert where(1) == where(2) == [0]
    expect(lines.nth(0)).to_contain_text("SELECT id, kind, args FROM jobs")
    steps(sim, 1)
    assert where(1) == [1] and where(2) == [0]
    expect(lines.nth(1)).to_contain_text("if oldest is None: return None")
    # a chip not here is hidden from the eye and from a screen reader
    assert lines.nth(1).locator('.race-chip[data-worker="2"]').evaluate(
        "chip => getComputedStyle(chip).visibility") == "hidden"
    assert watched.problems == []


def test_the_race_is_drawn_in_time_with_the_overlap_in_red(watched, site_url):
    """Both SELECTs before either UPDATE: each worker's gap, from its look to
    its mark, is shaded in its lane, and the time when both are in their gaps
    is red, from the second look to the first mark."""
    sim = start_simulation(watched, site_url, CHAPTER, "race")
    picture = sim.locator(".race-picture svg")
    marks = sim.locator(".race-picture .race-step")
    expect(marks).to_have_count(0)
    expect(sim.locator(".race-picture .race-next")).to_have_count(2)
    steps(sim, 1)
    expect(sim.locator(".race-picture .race-gap")).to_have_count(1)
    expect(sim.locator(".race-picture .race-overlap")).to_have_count(0)
    steps(sim, 2)
    expect(sim.locator(".race-picture .race-overlap")).to_have_count(1)
    expect(sim.locator(".race-key")).to_contain_text("Red: both workers have looked")
    expect(picture.locator("desc")).to_contain_text("neither has marked the row")
    steps(sim, 1, 2, 1)                                 # checks, then worker 1's UPDATE
    expect(marks).to_have_count(5)
    # each mark in its worker's lane, one below the other in the order they ran
    lanes = [marks.nth(slot) for slot in range(5)]
    assert [mark.get_attribute("data-worker") for mark in lanes] == ["1", "2", "1", "2", "1"]
    tops = [box(mark)["y"] for mark in lanes]
    assert tops == sorted(tops) and len(set(tops)) == 5
    first, second = box(lanes[0]), box(lanes[1])
    assert first["x"] + first["width"] < second["x"]
    gaps = sim.locator(".race-picture .race-gap")
    expect(gaps).to_have_count(2)
    red = box(sim.locator(".race-picture .race-overlap"))
    middle = [mark["y"] + mark["height"] / 2 for mark in map(box, lanes)]
    assert red["y"] == pytest.approx(middle[1], abs=2)          # worker 2's SELECT
    assert red["y"] + red["height"] == pytest.approx(middle[4], abs=2)   # worker 1's UPDATE
    assert red["x"] <= first["x"] and second["x"] + second["width"] <= red["x"] + red["width"]
    assert watched.problems == []


def test_the_row_between_the_lanes_shows_each_change_and_the_mark_overwritten(watched,
                                                                            site_url):
    sim = start_simulation(watched, site_url, CHAPTER, "race")
    rows = sim.locator(".race-picture .race-row")
    expect(rows).to_have_count(1)
    expect(rows.first).to_have_text("queued")           # the start, before any step
    steps(sim, 1, 2)
    arrows = sim.locator(".race-picture .race-arrow")
    expect(arrows).to_have_count(2)                     # both SELECTs read the row
    assert [arrows.nth(n).get_attribute("class") for n in range(2)] == ["race-arrow read"] * 2
    expect(rows).to_have_count(1)                       # a read changes nothing
    steps(sim, 1, 2, 1)
    expect(rows).to_have_count(2)
    expect(rows.last).to_have_text("running: worker 1")
    expect(arrows.last).to_have_class("race-arrow wrote")
    steps(sim, 2)                                       # worker 2's UPDATE, over 1's mark
    expect(rows).to_have_count(3)
    expect(rows.last).to_have_attribute("data-over", "true")
    expect(rows.last).to_contain_text("running: worker 2")
    expect(rows.last).to_contain_text("over worker 1")
    log = sim.locator("ol.race-log li")
    expect(log.last).to_contain_text("over worker 1's mark")
    steps(sim, 1, 2)                                    # both send
    sends = sim.locator('.race-picture .race-step[data-twice="true"]')
    expect(sends).to_have_count(1)
    expect(sends).to_have_attribute("data-worker", "2")
    expect(sends).to_contain_text("job 1: twice!")
    expect(sim.locator(".sim-outbox li.duplicate")).to_contain_text("sent by worker 2")
    assert watched.problems == []


def test_a_click_on_a_step_goes_back_to_it_and_on_a_next_step_runs_it(watched, site_url):
    sim = start_simulation(watched, site_url, CHAPTER, "race")
    marks = sim.locator(".race-picture .race-step")
    sim.locator('.race-picture .race-next[data-worker="2"]').click()
    answered(sim)
    expect(marks).to_have_count(1)
    expect(marks.first).to_have_attribute("data-worker", "2")
    steps(sim, 1, 1, 1)
    expect(marks).to_have_count(4)
    marks.nth(1).click()                                # back to just after step 2
    answered(sim)
    expect(marks).to_have_count(2)
    expect(sim.locator(".race-picture .race-overlap")).to_have_count(1)
    expect(sim.locator("ol.race-log li")).to_have_count(2)
    back = sim.get_by_role("button", name="Back a step")
    back.click()
    answered(sim)
    expect(marks).to_have_count(1)
    back.click()
    answered(sim)
    expect(marks).to_have_count(0)
    expect(back).to_be_disabled()
    assert watched.problems == []


def test_the_race_pictures_counts_are_the_engines(watched, site_url):
    from tools.sims.race.engine import every_interleaving
    sim = start_simulation(watched, site_url, CHAPTER, "race")
    sim.get_by_role("button", name="Try every interleaving").click()
    answered(sim)
    naive, atomic = every_interleaving("naive"), every_interleaving("atomic")
    every = sim.locator(".sim-every")
    expect(every).to_contain_text(
        f"the naive claim: {naive['duplicates']} of {naive['schedules']} orders "
        "send an email twice", timeout=30000)
    expect(every).to_contain_text(
        f"the atomic claim: {atomic['duplicates']} of {atomic['schedules']} orders")
    why = sim.locator(".race-why")
    expect(why).to_contain_text(f"The {naive['safe']} naive orders that send it once")
    expect(why).to_contain_text("not equally likely")
    # and as a bar: one part per kind of order, as wide as its share
    bar = sim.locator(".race-orders")
    expect(bar).to_have_attribute("role", "img")
    twice, once = (float(bar.locator(f'rect[data-orders="{kind}"]').get_attribute("width"))
                   for kind in ("twice", "once"))
    assert twice / (twice + once) == pytest.approx(naive["duplicates"] / naive["schedules"],
                                                   abs=0.01)
    expect(bar).to_contain_text(f"{naive['duplicates']} send twice")
    expect(bar).to_contain_text(f"{naive['safe']} send once")
    assert watched.problems == []


@pytest.mark.parametrize("width", [1280, 390])
def test_the_race_keeps_its_lanes_side_by_side_at_any_width(new_page, site_url, width):
    """On a phone too: worker 1's lane, the row, worker 2's lane, left to
    right, and nothing wider than the simulation."""
    page = new_page(width, 900)
    sim = start_simulation(page, site_url, CHAPTER, "race")
    steps(sim, 1, 2)
    first, second = (box(sim.locator(f'.race-picture .race-step[data-worker="{n}"]'))
                     for n in (1, 2))
    row = box(sim.locator(".race-picture .race-row"))
    picture, body = box(sim.locator(".race-picture svg")), box(sim)
    assert body["x"] <= picture["x"] and picture["x"] + picture["width"] <= body["x"] + body["width"]
    assert first["x"] + first["width"] <= row["x"] and row["x"] + row["width"] <= second["x"]
    # the lanes' text is at least 9 px tall as drawn: readable, not shrunk away
    assert box(sim.locator(".race-picture .race-step-name").first)["height"] >= 9
    # Each claim's radio button and its words stay on one line together.
    for choice in ("the naive claim", "the atomic claim"):
        label = sim.locator("fieldset label", has_text=choice)
        assert label.evaluate("(label) => label.getClientRects().length") == 1, choice
