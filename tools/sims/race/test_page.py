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
    code = sim.locator('.race-picture g.race-worker[data-worker="1"]')   # worker 1's code
    naive_code = code.text_content()
    assert "def claim_naive(db):" in naive_code
    atomic.check()
    expect(naive).not_to_be_checked()
    expect(code).not_to_have_text(naive_code)
    expect(code).to_contain_text("def claim_atomic(db):")
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


def race_worker(sim, number):
    """One worker's part of the race picture: its code, pointer and locals."""
    return sim.locator(f'.race-picture g.race-worker[data-worker="{number}"]')


def pointed_line(worker):
    """The code line this worker's pointer points at, and its text."""
    line = worker.locator(".race-pointer").get_attribute("data-line")
    return line, worker.locator(f'.race-line[data-line="{line}"]').text_content()


def test_the_race_picture_moves_each_workers_pointer_and_shows_its_oldest(watched, site_url):
    watched.emulate_media(reduced_motion="reduce")     # the pointer jumps: no glide to wait for
    sim = start_simulation(watched, site_url, CHAPTER, "race")
    picture = sim.locator(".race-picture svg")
    expect(picture).to_have_attribute("role", "img")
    first, second = race_worker(sim, 1), race_worker(sim, 2)
    for worker in (first, second):                  # both about to run the SELECT
        expect(worker.locator(".race-pointer")).to_have_count(1)
        assert "SELECT" in pointed_line(worker)[1]
        expect(worker.locator(".race-locals")).not_to_contain_text("oldest")
    before = pointed_line(second)
    described = picture.locator("desc").text_content()
    sim.get_by_role("button", name="Step worker 1").click()
    answered(sim)
    # worker 1's pointer is on the check now, with the line marked; worker 2's stays
    line, text = pointed_line(first)
    assert "if oldest is None" in text
    marked = first.locator(".race-line.next")
    assert marked.first.get_attribute("data-line") == line
    arrow, row = (first.locator(selector).bounding_box()
                  for selector in (".race-pointer", f'.race-line[data-line="{line}"]'))
    assert row["y"] <= arrow["y"] + arrow["height"] / 2 <= row["y"] + row["height"]
    assert pointed_line(second) == before
    assert first.locator(".race-pointer").evaluate(
        "pointer => getComputedStyle(pointer).transitionDuration") == "0s"
    expect(first.locator(".race-locals")).to_contain_text("oldest = (1, 'welcome_email', …)")
    expect(second.locator(".race-locals")).not_to_contain_text("oldest")
    # worker 1 is in the gap the race lives in: it has looked, not marked
    expect(first.locator(".race-holds")).to_have_text(
        "in the gap: it has looked, and not marked the row yet")
    expect(second.locator(".race-holds")).to_have_text("holds no job")
    # the picture's description says what changed
    assert picture.locator("desc").text_content() != described
    expect(picture.locator("desc")).to_contain_text("worker 1")
    assert watched.problems == []


def test_the_race_picture_shows_the_row_between_and_a_log_in_words(watched, site_url):
    sim = start_simulation(watched, site_url, CHAPTER, "race")
    row = sim.locator(".race-picture .race-row")
    log = sim.locator("ol.race-log li")
    expect(row).to_have_count(1)
    expect(row).to_have_attribute("data-status", "queued")
    expect(row).to_contain_text("queued")
    expect(log).to_have_count(0)
    said = []
    for number, words in [(1, "worker 1: SELECT found job 1"),
                          (2, "worker 2: SELECT found job 1"),
                          (1, "worker 1: it has job 1, so it goes on")]:
        sim.get_by_role("button", name=f"Step worker {number}").click()
        answered(sim)
        said.append(words)
        expect(log).to_have_count(len(said))
        expect(log.last).to_contain_text(words)
        if "SELECT" in words:                                   # a read: the arrow points out
            touch = sim.locator(".race-picture .race-touch")
            expect(touch).to_have_text(f"worker {number} read the row")
            expect(sim.locator(".race-picture .race-arrow")).to_have_attribute(
                "data-table", "read")
    expect(sim.locator(".race-picture .race-arrow")).to_have_count(0)   # the check: no SQL
    expect(row).to_have_attribute("data-status", "queued")     # nobody has marked it yet
    sim.get_by_role("button", name="Step worker 1").click()    # worker 1's UPDATE
    answered(sim)
    expect(row).to_have_attribute("data-status", "running")
    expect(row).to_contain_text("running")
    expect(row).to_contain_text("worker 1")
    expect(log).to_have_count(4)
    expect(log.last).to_contain_text("UPDATE marked job 1 running for worker 1")
    expect(sim.locator(".race-picture .race-touch")).to_have_text("worker 1 wrote the row")
    expect(sim.locator(".race-picture .race-arrow")).to_have_attribute("data-table", "wrote")
    sim.get_by_role("button", name="Step worker 2").click()    # worker 2's check
    sim.get_by_role("button", name="Step worker 2").click()    # and its UPDATE, over it
    answered(sim)
    expect(row).to_contain_text("worker 2")
    # both believe they hold job 1; the row names one of them
    for number in (1, 2):
        expect(race_worker(sim, number).locator(".race-holds")).to_contain_text("holds job 1")
    # both send: the picture's outbox has two envelopes, the second a duplicate
    emails = sim.locator(".race-picture .race-email")
    expect(emails).to_have_count(0)
    for number in (1, 2):
        sim.get_by_role("button", name=f"Step worker {number}").click()
        answered(sim)
        expect(emails).to_have_count(number)
        expect(emails.last).to_contain_text(f"sent by worker {number}")
    expect(emails.first).to_have_attribute("data-duplicate", "false")
    expect(emails.last).to_have_attribute("data-duplicate", "true")
    expect(emails.last).to_contain_text("duplicate")
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
def test_the_race_picture_sets_the_workers_side_by_side_or_stacks_them(new_page, site_url,
                                                                      width):
    """Wide, the row sits between the two code columns; on a phone the
    columns stack, the row between them, and nothing is wider than the sim."""
    page = new_page(width, 900)
    sim = start_simulation(page, site_url, CHAPTER, "race")
    sim.get_by_role("button", name="Step worker 1").click()
    answered(sim)
    first, second = (race_worker(sim, n).bounding_box() for n in (1, 2))
    row = sim.locator(".race-picture .race-row").bounding_box()
    picture = sim.locator(".race-picture svg").bounding_box()
    body = sim.bounding_box()
    assert body["x"] <= picture["x"] and picture["x"] + picture["width"] <= body["x"] + body["width"]
    # worker 1's SELECT read the row: an arrow from the row to worker 1's column
    arrow = sim.locator(".race-picture .race-arrow")
    expect(arrow).to_have_attribute("data-table", "read")
    drawn = arrow.bounding_box()
    if width == 1280:
        assert first["x"] + first["width"] <= row["x"]
        assert row["x"] + row["width"] <= second["x"]
        assert first["x"] + first["width"] - 4 <= drawn["x"] <= row["x"]
    else:
        assert first["y"] + first["height"] <= row["y"]
        assert row["y"] + row["height"] <= second["y"]
        assert first["y"] + first["height"] - 4 <= drawn["y"] <= row["y"]
    # Each claim's radio button and its words stay on one line together.
    for choice in ("the naive claim", "the atomic claim"):
        label = sim.locator("fieldset label", has_text=choice)
        assert label.evaluate("(label) => label.getClientRects().length") == 1, choice
