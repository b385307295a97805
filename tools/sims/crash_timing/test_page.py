"""The crash-timing explorer in Chromium: its tasks, its pictures and its
controls. The checks every simulation passes (fit, axe, the standard library,
the focus) are tools/sims/test_pages.py's; they make the moves in SMOKE."""
import re

from playwright.sync_api import expect

from tests.browser import (start_simulation, task_done, answered,
                           menu_when_the_first_answer_is_drawn)


CHAPTER = "idempotency-making-repeats-harmless.html"
# What the shared checks do here, a move at a time (tests/browser.py make_moves):
# enough to fill its tables and pictures and to import all it needs.
SMOKE = ["Run", "Step", "Show every crash and protection"]
SIDEWAYS_ON_A_PHONE = 1          # the matrix of every crash and protection


def test_the_crash_timing_explorer_tasks_and_matrix(watched, site_url):
    sim = start_simulation(watched, site_url, CHAPTER, "crash-timing")

    def run(protection, crash):
        sim.get_by_label("Protection").select_option(protection)
        sim.get_by_label("Crash").select_option(crash)
        expect(sim.get_by_label("Crash")).to_have_value(crash)
        sim.get_by_role("button", name="Run", exact=True).click()
        answered(sim)
        sim.get_by_role("button", name="Show all").click()
        return sim.locator(".sim-result")

    status = sim.get_by_role("status")       # says what to try, and each task done
    expect(status).to_have_text("Try first: make a crash send the effect twice.")
    expect(run("none", "after-effect")).to_have_text("Outcome: ⚠ duplicate (2 effects)")
    expect(task_done(sim, "duplicate")).to_have_class("done")
    expect(status).to_have_text("Done: make a crash send the effect twice. "
                                "Next: make a crash lose the job's effect.")
    expect(run("ack-first", "between-ack-and-effect")).to_have_text("Outcome: ✗ lost (0 effects)")
    expect(task_done(sim, "lost")).to_have_class("done")
    expect(run("key-apart", "between-effect-and-key")).to_contain_text("duplicate")
    expect(run("transaction", "between-effect-and-key")).to_contain_text("exactly once")
    expect(sim.get_by_label("Crash")).to_have_accessible_description(
        re.compile("inside the job's transaction"))
    expect(task_done(sim, "key-not-enough")).to_have_class("done")
    expect(status).to_have_text(re.compile(r"^Done: find a crash point .* the transaction "
                                           r"does\. That was the last task\.$"))
    sim.get_by_role("button", name="Show every crash and protection").click()
    matrix = sim.locator(".sim-matrix table")
    expect(matrix.locator("thead th")).to_have_text(
        ["Crash", "no protection", "idempotency key", "key recorded apart", "one transaction",
         "ack first"])
    expect(matrix.locator("tbody tr")).to_have_count(7)
    expect(matrix.locator("tr", has_text="inside the open transaction")).to_contain_text(
        "✓ exactly once (1 effect)")
    rows = matrix.locator("tbody th").all_text_contents()
    for protection in ("none", "key", "key-apart", "transaction", "ack-first"):
        sim.get_by_label("Protection").select_option(protection)
        expect(sim.get_by_label("Protection")).to_have_value(protection)
        answered(sim)
        offered = sim.get_by_label("Crash").locator("option").all_text_contents()
        assert set(offered) <= set(rows), (protection, offered)   # the matrix's own words
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
    expect(sim.get_by_label("Crash")).to_have_value("none")
    sim.get_by_role("button", name="Step", exact=True).click()
    expect(timeline).to_have_count(1)
    expect(outcome).to_have_text("")
    sim.get_by_role("button", name="Run", exact=True).click()
    expect(outcome).to_have_text("Outcome: ✓ exactly once (1 effect)")
    assert timeline.count() > 1
    expect(task_done(sim, "duplicate")).not_to_have_class("done")
    sim.get_by_label("Crash").select_option("after-effect")
    expect(timeline).to_have_count(0)                  # the last story was another choice's
    sim.get_by_role("button", name="Play").click()
    expect(timeline.first).to_be_visible()
    expect(outcome).to_have_text("Outcome: ⚠ duplicate (2 effects)")
    expect(task_done(sim, "duplicate")).to_have_class("done")
    assert watched.problems == []


def crash_marker(sim):
    return sim.get_by_role("slider", name="When the worker dies")


def test_the_crash_timing_picture_draws_the_steps_and_every_crash_points_outcome(watched,
                                                                              site_url):
    """The job's life as a line of stations, one per step of the chosen
    protection's code; on it, each crash point drawn by the shape of its
    outcome; and an image whose name and description say it all in words."""
    sim = start_simulation(watched, site_url, CHAPTER, "crash-timing")
    picture = sim.get_by_role("img")
    expect(sim.locator(".ct-station")).to_have_text(["claim", "add points", "ack"])
    expect(sim.locator(".ct-point")).to_have_count(4)          # its four moments
    expect(sim.locator('.ct-point[data-crash="after-effect"]')).to_have_class(
        re.compile(r"\bduplicate\b"))
    expect(sim.locator(".ct-point.duplicate .ct-two")).to_have_count(1)   # a shape, not a colour
    expect(picture).to_have_accessible_name(re.compile(r"no protection: claim, add points, ack"))
    expect(picture).to_have_accessible_description(
        re.compile(r"A crash after the effect, before the ack: duplicate"))
    sim.get_by_label("Protection").select_option("key-apart")
    expect(sim.locator(".ct-station")).to_have_text(
        ["claim", "add points", "record key", "ack"])
    expect(sim.locator(".ct-point.duplicate")).to_have_attribute(
        "data-crash", "between-effect-and-key")
    sim.get_by_label("Protection").select_option("transaction")
    expect(sim.locator(".ct-point.duplicate, .ct-point.lost")).to_have_count(0)
    expect(sim.locator(".ct-point")).to_have_count(5)
    assert watched.problems == []


def test_the_crash_marker_is_a_slider_with_the_moment_in_words(watched, site_url):
    sim = start_simulation(watched, site_url, CHAPTER, "crash-timing")
    marker = crash_marker(sim)
    expect(marker).to_have_attribute("aria-valuemin", "0")
    expect(marker).to_have_attribute("aria-valuemax", "3")     # no protection: 4 moments
    expect(marker).to_have_attribute("aria-valuenow", "3")     # the page opens on no crash
    expect(marker).to_have_attribute("aria-valuetext",
                                     "no crash: exactly once, the points added once")
    marker.focus()
    watched.keyboard.press("Home")
    expect(marker).to_have_attribute("aria-valuenow", "0")
    expect(marker).to_have_attribute(
        "aria-valuetext", "crash after the claim, before the effect: exactly once, "
                          "the points added once")
    expect(sim.get_by_label("Crash")).to_have_value("after-claim")
    watched.keyboard.press("End")
    expect(marker).to_have_attribute("aria-valuenow", "3")
    expect(sim.get_by_label("Crash")).to_have_value("none")
    sim.get_by_label("Protection").select_option("key-apart")
    expect(marker).to_have_attribute("aria-valuemax", "4")
    expect(sim.locator(".ct-station")).to_have_count(4)
    marker.focus()
    watched.keyboard.press("Home")
    watched.keyboard.press("ArrowRight")
    expect(marker).to_have_attribute("aria-valuetext", re.compile(
        r"^crash after the points were committed, before the worker records their key .*: "
        r"duplicate, the points added twice$"))
    assert watched.problems == []


def test_the_arrow_keys_move_the_crash_and_the_outcome_redraws(watched, site_url):
    sim = start_simulation(watched, site_url, CHAPTER, "crash-timing")
    marker, outcome = crash_marker(sim), sim.locator(".ct-outcome")
    expect(outcome).to_have_text("✓ exactly once: the points added once")
    marker.focus()
    watched.keyboard.press("ArrowLeft")                        # from no crash: after the ack
    expect(marker).to_have_attribute("aria-valuenow", "2")
    watched.keyboard.press("ArrowLeft")
    expect(marker).to_have_attribute("aria-valuenow", "1")
    expect(outcome).to_have_text("⚠ duplicate: the points added twice")
    expect(sim.locator(".ct-coin")).to_have_count(2)          # Bob's points, as coins
    answered(sim)
    expect(sim.locator(".sim-result")).to_have_text("Outcome: ⚠ duplicate (2 effects)")
    expect(task_done(sim, "duplicate")).to_have_class("done")  # it ran, for real
    expect(sim.locator("[aria-live=polite]")).to_have_text(
        "Crash after the effect, before the ack: ⚠ duplicate (2 effects)")
    sim.get_by_label("Protection").select_option("ack-first")
    expect(sim.locator(".ct-station")).to_have_text(["claim", "ack", "add points"])
    marker.focus()
    watched.keyboard.press("Home")
    watched.keyboard.press("ArrowRight")
    expect(outcome).to_have_text("✗ lost: the points never added")
    expect(sim.locator(".ct-coin")).to_have_count(0)
    expect(sim.locator(".ct-no-coin")).to_have_count(1)
    expect(task_done(sim, "lost")).to_have_class("done")
    assert watched.problems == []


def test_dragging_the_crash_marker_changes_the_outcome(watched, site_url):
    sim = start_simulation(watched, site_url, CHAPTER, "crash-timing")
    marker, outcome = crash_marker(sim), sim.locator(".ct-outcome")
    sim.scroll_into_view_if_needed()

    def centre(locator):
        box = locator.bounding_box()
        return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2

    def drag_to(crash):
        watched.mouse.move(*centre(marker))
        watched.mouse.down()
        x, _ = centre(sim.locator(f'.ct-point[data-crash="{crash}"]'))
        watched.mouse.move(x, centre(marker)[1], steps=8)
        watched.mouse.up()

    drag_to("after-effect")
    expect(marker).to_have_attribute("aria-valuenow", "1")
    expect(outcome).to_have_text("⚠ duplicate: the points added twice")
    expect(sim.get_by_label("Crash")).to_have_value("after-effect")
    expect(task_done(sim, "duplicate")).to_have_class("done")
    drag_to("after-claim")
    expect(outcome).to_have_text("✓ exactly once: the points added once")
    expect(marker).to_have_attribute("aria-valuenow", "0")
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
