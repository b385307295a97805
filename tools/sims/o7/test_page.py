"""Chapter 10's O7 story in Chromium: its tasks, its pictures and its controls.
The checks every simulation passes (fit, axe, the standard library, the focus)
are tools/sims/test_pages.py's; they make the moves in SMOKE."""
from playwright.sync_api import expect

from tests.browser import start_simulation, task_done, answered


CHAPTER = "one-charge-exactly-once.html"
# What the shared checks do here, a move at a time (tests/browser.py make_moves):
# enough to fill its tables and pictures and to import all it needs.
SMOKE = ["Next step of O7", "Next step of O7"]


def test_the_o7_story_in_chapter_10(watched, site_url):
    sim = start_simulation(watched, site_url, CHAPTER, "o7")
    next_step = sim.get_by_role("button", name="Next step of O7")
    while next_step.is_enabled():
        next_step.click()
        answered(sim)
    story = sim.locator(".sim-story")
    expect(story).to_contain_text("C9")
    expect(task_done(sim, "stored")).to_have_class("done")
    sim.get_by_label("Pay in one request").check()
    sim.get_by_role("button", name="Start O7 over").click()
    expect(next_step).to_be_enabled()
    while next_step.is_enabled():
        next_step.click()
        answered(sim)
    expect(task_done(sim, "twice")).to_have_class("done")
    assert watched.problems == []
