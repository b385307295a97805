"""The crash-timing explorer in Chromium: its tasks, its pictures and its
controls. The checks every simulation passes (fit, axe, the standard library,
the focus) are tools/sims/test_pages.py's; they make the moves in SMOKE."""
import re

import pytest
from playwright.sync_api import expect

from tests.browser import (LINES, start_simulation, task_done, answered, watch,
                           menu_when_the_first_answer_is_drawn)


CHAPTER = "idempotency-making-repeats-harmless.html"
# What the shared checks do here, a move at a time (tests/browser.py make_moves):
# enough to fill its tables and pictures and to import all it needs.
SMOKE = ["Run", "Step", "Show every crash and protection"]


NAMES = ["no protection", "idempotency key", "key recorded apart", "one transaction",
         "ack first"]


def crash_marker(sim):
    return sim.get_by_role("slider", name="When the worker dies")


def move_marker(page, sim, stops_from_the_start):
    """The crash marker, from the keyboard: Home, then that many stops on."""
    marker = crash_marker(sim)
    marker.focus()
    page.keyboard.press("Home")
    for _ in range(stops_from_the_start):
        page.keyboard.press("ArrowRight")
    return marker


def row(sim, protection):
    return sim.locator(f'.ct-row[data-protection="{protection}"]')


def test_every_protection_is_a_row_under_one_crash_marker(watched, site_url):
    """Five rows, one per protection, each its own steps, and one marker
    over them all: moved once, every row says what that crash does to it."""
    sim = start_simulation(watched, site_url, CHAPTER, "crash-timing")
    expect(sim.locator(".ct-row-name")).to_have_text(NAMES)
    expect(row(sim, "key-apart").locator(".ct-station")).to_have_text(
        ["claim", "add points", "record key", "ack"])
    expect(row(sim, "ack-first").locator(".ct-station")).to_have_text(["claim", "ack", "add points"])
    outcomes = sim.locator(".ct-row-outcome")
    expect(outcomes).to_have_text(["added once"] * 5)           # the page opens on no crash
    marker = crash_marker(sim)
    expect(marker).to_have_attribute("aria-valuemax", "6")      # six moments, then no crash
    expect(marker).to_have_attribute("aria-valuenow", "6")
    move_marker(watched, sim, 3)
    expect(marker).to_have_attribute("aria-valuetext",
                                     "crash after the effect: no protection twice, idempotency "
                                     "key once, key recorded apart once, one transaction n/a, "
                                     "ack first once")
    expect(outcomes).to_have_text(["added twice", "added once", "added once", "n/a",
                                   "added once"])
    expect(row(sim, "transaction")).to_have_class(re.compile(r"\bct-na\b"))
    expect(row(sim, "none").locator(".ct-two")).to_have_count(1)   # a shape, not a colour
    answered(sim)
    expect(task_done(sim, "duplicate")).to_have_class("done")     # run, for real
    expect(sim.locator("[aria-live=polite]")).to_have_text(re.compile(
        r"^Crash after the effect: no protection twice, .*, ack first once\.$"))
    assert watched.problems == []


def test_the_marker_stands_over_the_same_moment_in_every_row(watched, site_url):
    """Each row draws a moment where the one marker stands for it: the
    rows' steps fall between the moments their code passes."""
    watched.emulate_media(reduced_motion="reduce")     # the marker jumps: no glide to wait for
    sim = start_simulation(watched, site_url, CHAPTER, "crash-timing")
    marker = move_marker(watched, sim, 2)                       # between the effect and its key
    expect(marker).to_have_attribute("aria-valuetext", re.compile(r"^crash after the effect"))
    answered(sim)                       # the rows as drawn for this crash, not being redrawn
    box = marker.bounding_box()
    middle = box["x"] + box["width"] / 2
    for protection in ("key-apart", "transaction"):
        point = row(sim, protection).locator('.ct-point[data-crash="between-effect-and-key"]')
        found = point.bounding_box()
        assert abs(found["x"] + found["width"] / 2 - middle) < 1.5, (protection, found, box)
    expect(sim.locator(".ct-row.ct-na")).to_have_count(3)
    assert watched.problems == []


def test_the_protections_have_short_names_and_say_the_rest(watched, site_url):
    sim = start_simulation(watched, site_url, CHAPTER, "crash-timing")
    choice = sim.get_by_label("Protection")
    expect(choice.locator("option")).to_have_text(NAMES)
    choice.select_option("key-apart")
    expect(choice).to_have_accessible_description(
        re.compile(r"^A key recorded apart: the points go to the queue's own database"))
    expect(row(sim, "key-apart")).to_have_class(re.compile(r"\bct-chosen\b"))
    assert choice.evaluate("(select) => select.getBoundingClientRect().width") < 250
    assert watched.problems == []


def test_the_matrix_is_a_grid_of_the_rows_glyphs(watched, site_url):
    """Every crash against every protection, each cell run: a glyph a cell,
    n/a greyed, its words for a screen reader, and a legend of one line."""
    sim = start_simulation(watched, site_url, CHAPTER, "crash-timing")
    sim.get_by_role("button", name="Show every crash and protection").click()
    grid = sim.locator(".sim-matrix table")
    expect(grid.locator("thead th")).to_have_text(["Crash", *NAMES])
    expect(grid.locator("tbody tr")).to_have_count(7)
    expect(grid.locator("td")).to_have_count(35)
    expect(grid.locator("td.ct-na")).to_have_count(13)
    expect(grid.locator("td .ct-two")).to_have_count(2)
    expect(grid.locator("td .ct-none")).to_have_count(1)
    expect(grid.locator("td .ct-one")).to_have_count(19)
    inside = grid.locator("tr", has_text="inside the open transaction").locator("td")
    expect(inside.nth(3)).to_have_text("exactly once (1 effect)")
    expect(inside.nth(0)).to_have_text("n/a")
    legend = sim.locator(".ct-legend")
    expect(legend).to_have_text(re.compile(r"once.*twice.*never.*n/a"))
    assert legend.evaluate(LINES) == 1, legend.inner_text()
    assert watched.problems == []


def test_the_crash_timing_tasks_tick_as_the_marker_moves(watched, site_url):
    """Each stop of the marker runs that crash under every protection: the
    tasks tick from those runs, one stop at a time."""
    sim = start_simulation(watched, site_url, CHAPTER, "crash-timing")
    status = sim.get_by_role("status")       # says what to try, and each task done
    expect(status).to_have_text("Try first: make a crash send the effect twice.")
    marker = crash_marker(sim)
    marker.focus()
    for key in ("End", "ArrowLeft", "ArrowLeft", "ArrowLeft"):   # to after the effect, from
        watched.keyboard.press(key)                               # the end: no task on the way
    answered(sim)
    expect(marker).to_have_attribute("aria-valuetext", re.compile("^crash after the effect: "))
    expect(task_done(sim, "duplicate")).to_have_class("done")
    expect(task_done(sim, "lost")).not_to_have_class("done")
    expect(status).to_have_text("Done: make a crash send the effect twice. "
                                "Next: make a crash lose the job's effect.")
    move_marker(watched, sim, 1)                                 # after the ack, before the effect
    answered(sim)
    expect(row(sim, "ack-first").locator(".ct-row-outcome")).to_have_text("never added")
    expect(task_done(sim, "lost")).to_have_class("done")
    expect(task_done(sim, "key-not-enough")).not_to_have_class("done")
    watched.keyboard.press("ArrowRight")                         # before the key is recorded
    answered(sim)
    expect(task_done(sim, "key-not-enough")).to_have_class("done")
    expect(status).to_have_text(re.compile(r"^Done: find a crash point .* the transaction "
                                           r"does\. That was the last task\.$"))
    assert watched.problems == []


def test_the_story_below_is_the_chosen_protections_at_the_marker(watched, site_url):
    sim = start_simulation(watched, site_url, CHAPTER, "crash-timing")
    move_marker(watched, sim, 2)
    answered(sim)
    sim.get_by_label("Protection").select_option("key-apart")
    answered(sim)
    expect(sim.get_by_label("Protection")).to_have_accessible_description(
        re.compile("before the worker records their key in a step of its own"))
    sim.get_by_role("button", name="Run", exact=True).click()
    answered(sim)
    expect(sim.locator(".sim-result")).to_have_text("Outcome: ⚠ duplicate (2 effects)")
    sim.get_by_label("Protection").select_option("none")       # its code never passes there
    answered(sim)
    expect(sim.get_by_label("Protection")).to_have_accessible_description(
        re.compile("never passes the marker's moment"))
    sim.get_by_role("button", name="Run", exact=True).click()
    expect(sim.locator(".sim-result")).to_have_text("Outcome: – n/a")
    assert watched.problems == []


def test_the_crash_timing_menus_never_undo_a_choice_made_while_python_was_busy(watched,
                                                                             site_url):
    """Two protections chosen faster than Python answers: drawing the first
    answer leaves the menu at the second, the reader's latest."""
    sim = start_simulation(watched, site_url, CHAPTER, "crash-timing")
    answered(sim)
    shown = menu_when_the_first_answer_is_drawn(
        sim, "#ct-protection", "#ct-detail", [("#ct-protection", "key"),
                                              ("#ct-protection", "transaction")])
    assert shown == "transaction"
    answered(sim)
    expect(sim.get_by_label("Protection")).to_have_value("transaction")
    assert watched.problems == []


def test_the_crash_timing_explorer_answers_run_step_and_play(watched, site_url):
    """Run shows the whole story and its outcome at once; Step and Play, even
    before any Run, run the story chosen and show it a step at a time. The
    choice the explorer opens with answers no task."""
    sim = start_simulation(watched, site_url, CHAPTER, "crash-timing")
    timeline, outcome = sim.locator(".sim-events li"), sim.locator(".sim-result")
    expect(crash_marker(sim)).to_have_attribute("aria-valuetext", re.compile("^no crash: "))
    sim.get_by_role("button", name="Step", exact=True).click()
    expect(timeline).to_have_count(1)
    expect(outcome).to_have_text("")
    sim.get_by_role("button", name="Run", exact=True).click()
    expect(outcome).to_have_text("Outcome: ✓ exactly once (1 effect)")
    assert timeline.count() > 1
    expect(task_done(sim, "duplicate")).not_to_have_class("done")
    sim.get_by_label("Protection").select_option("key")
    expect(timeline).to_have_count(0)                  # the last story was another choice's
    sim.get_by_role("button", name="Play").click()
    expect(timeline.first).to_be_visible()
    expect(outcome).to_have_text("Outcome: ✓ exactly once (1 effect)")
    expect(task_done(sim, "duplicate")).not_to_have_class("done")
    assert watched.problems == []


def test_the_crash_timing_picture_says_in_words_what_it_draws(watched, site_url):
    """An image whose name says every protection's outcome at the marker,
    and whose description each row's steps and crash points."""
    sim = start_simulation(watched, site_url, CHAPTER, "crash-timing")
    picture = sim.get_by_role("img")
    expect(picture).to_have_accessible_name(
        "One job's life under five protections, no crash: no protection once, idempotency "
        "key once, key recorded apart once, one transaction once, ack first once.")
    expect(picture).to_have_accessible_description(re.compile(
        r"^no protection: claim, add points, ack; no crash once, a crash after the claim once, "
        r"a crash after the effect twice, a crash after the ack once\. idempotency key: "))
    expect(picture).to_have_accessible_description(re.compile(
        r"ack first: claim, ack, add points; .*a crash after the ack, before the effect never"))
    assert watched.problems == []


def test_dragging_the_crash_marker_changes_every_rows_outcome(watched, site_url):
    sim = start_simulation(watched, site_url, CHAPTER, "crash-timing")
    marker, outcomes = crash_marker(sim), sim.locator(".ct-row-outcome")
    sim.scroll_into_view_if_needed()

    def centre(locator):
        box = locator.bounding_box()
        return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2

    def drag_to(protection, crash):
        watched.mouse.move(*centre(marker))
        watched.mouse.down()
        x, _ = centre(row(sim, protection).locator(f'.ct-point[data-crash="{crash}"]'))
        watched.mouse.move(x, centre(marker)[1], steps=8)
        watched.mouse.up()

    drag_to("none", "after-effect")
    expect(marker).to_have_attribute("aria-valuenow", "3")
    expect(outcomes).to_have_text(["added twice", "added once", "added once", "n/a",
                                   "added once"])
    expect(task_done(sim, "duplicate")).to_have_class("done")
    drag_to("ack-first", "between-ack-and-effect")
    expect(marker).to_have_attribute("aria-valuenow", "1")
    expect(outcomes).to_have_text(["n/a", "n/a", "n/a", "n/a", "never added"])
    expect(task_done(sim, "lost")).to_have_class("done")
    assert watched.problems == []


def test_the_crash_marker_glides_only_for_readers_who_allow_motion(watched, site_url):
    sim = start_simulation(watched, site_url, CHAPTER, "crash-timing")
    glide = "(marker) => getComputedStyle(marker).transitionDuration"
    assert crash_marker(sim).evaluate(glide) != "0s"
    watched.emulate_media(reduced_motion="reduce")
    assert crash_marker(sim).evaluate(glide) == "0s"
    marker = crash_marker(sim)
    marker.focus()
    watched.keyboard.press("Home")                         # redrawn in place, at once
    expect(marker).to_have_attribute("aria-valuenow", "0")
    assert watched.problems == []


@pytest.mark.parametrize("width, most", [(1280, 1), (390, 2)])
def test_the_hint_is_a_headline_of_one_line_beside_the_text(new_page, site_url, width, most):
    """The hint above the picture says what to do in one line beside the
    text, and in at most two on a phone."""
    page = watch(new_page(width, 900))
    sim = start_simulation(page, site_url, CHAPTER, "crash-timing")
    hint = sim.locator(".ct-hint")
    expect(hint).to_contain_text("arrow keys")
    assert hint.evaluate(LINES) <= most, hint.inner_text()
    assert page.problems == []


def test_on_a_phone_the_matrix_fits_and_keeps_every_name(new_page, site_url):
    """At 390 px the grid of every crash and protection fits its box, with
    no sideways scroll and no line saying it scrolls: still a table, each
    column headed by its protection's whole name, each row by its crash,
    each cell's outcome in words for a screen reader."""
    page = watch(new_page(390, 900))
    sim = start_simulation(page, site_url, CHAPTER, "crash-timing")
    sim.get_by_role("button", name="Show every crash and protection").click()
    answered(sim)
    grid = sim.locator(".sim-matrix table")
    expect(grid.locator("tbody tr")).to_have_count(7)
    wide, room = sim.locator(".sim-matrix .sim-scroll").evaluate(
        "(box) => [box.scrollWidth, box.clientWidth]")
    assert wide <= room, (wide, room)
    expect(sim.locator(".sim-matrix .sim-sideways")).to_be_hidden()
    expect(grid.locator("thead th")).to_have_text(["Crash", *NAMES])
    for name in NAMES:
        expect(grid.get_by_role("columnheader", name=name)).to_be_visible()
    expect(grid.get_by_role("rowheader", name="after the effect, before its key is recorded")
           ).to_be_visible()
    inside = grid.locator("tr", has_text="inside the open transaction").locator("td")
    expect(inside.nth(3)).to_have_text("exactly once (1 effect)")
    # Each protection's name lies inside the table's box, whole.
    table = grid.bounding_box()
    for header in grid.locator("thead th").all():
        box = header.bounding_box()
        assert table["x"] <= box["x"] and box["x"] + box["width"] <= table["x"] + table["width"]
    assert page.problems == []
