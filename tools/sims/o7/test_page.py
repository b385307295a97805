"""Chapter 10's O7 story in Chromium: its tasks, its sequence diagram and its
controls. The checks every simulation passes (fit, axe, the standard
library, the focus) are tools/sims/test_pages.py's; they make the moves in
SMOKE."""
from playwright.sync_api import expect

from tests.browser import (start_simulation, task_done, answered, follows_the_theme_and_keeps_still,
                           OUTSIDE, WIDER)


CHAPTER = "one-charge-exactly-once.html"
# What the shared checks do here, a move at a time (tests/browser.py make_moves):
# enough to fill its tables and pictures and to import all it needs.
SMOKE = ["Next step of O7", "Next step of O7", "Next step of O7"]


def pictures_fit(sim, page):
    """Every word of the diagram lies inside it, and it is no wider than its
    box (the shared checks ask after every move, at both widths)."""
    diagram = sim.locator("svg.o7-diagram")
    assert diagram.evaluate(OUTSIDE) == []
    assert not diagram.evaluate(WIDER)


def engine_after(steps, **options):
    """The O7 engine's state, under CPython, after that many steps."""
    from tools.sims.o7.engine import O7Story
    story = O7Story(**options)
    for _ in range(steps):
        story.next()
    state = story.state()
    story.close()
    return state


# Each arrow or mark drawn, with its step, its lanes, its kind and its
# words; and how far across its two ends lie, beside each lane's line.
DRAWN = """(svg) => ({
    arrows: [...svg.querySelectorAll(".o7-arrow")].map((g) => ({
        step: Number(g.dataset.step), from: g.dataset.from || null, to: g.dataset.to || null,
        kind: g.dataset.kind, label: g.querySelector(".o7-label").textContent,
        warning: g.querySelector(".o7-warning")?.textContent || "",
        ends: g.dataset.from && g.dataset.to !== g.dataset.from
            ? [Number(g.querySelector(".o7-shaft").getAttribute("x1")),
               Number(g.querySelector(".o7-shaft").getAttribute("x2"))] : null})),
    lanes: Object.fromEntries([...svg.querySelectorAll(".o7-lane")].map((g) =>
        [g.dataset.lane, Number(g.querySelector(".o7-lifeline").getAttribute("x1"))])),
})"""


def engine_arrows(state):
    return [{"step": step["n"], "from": arrow["from"], "to": arrow["to"],
             "kind": arrow["kind"], "label": arrow["label"], "warning": arrow["warning"]}
            for step in state["steps"] for arrow in step["arrows"]]


def next_steps(sim, count):
    for _ in range(count):
        sim.get_by_role("button", name="Next step of O7").click()
        answered(sim)


def test_the_diagram_draws_each_step_the_engine_tells(watched, site_url):
    """Step by step, the arrows and marks drawn are the engine's, each
    between the lines of its own lanes; a lane for each worker that has
    acted, between the queue's and the provider's. Each step's words are
    the diagram's description and a list under it."""
    sim = start_simulation(watched, site_url, CHAPTER, "o7")
    diagram = sim.locator("svg.o7-diagram")
    expect(diagram).to_have_attribute("role", "img")
    for steps, more in ((1, 1), (4, 3), (12, 8)):
        next_steps(sim, more)
        state = engine_after(steps)
        drawn = diagram.evaluate(DRAWN)
        assert [{key: arrow[key] for key in arrow if key != "ends"}
                for arrow in drawn["arrows"]] == engine_arrows(state)
        assert list(drawn["lanes"]) == [lane["id"] for lane in state["lanes"]]
        xs = list(drawn["lanes"].values())
        assert xs == sorted(xs) and len(set(xs)) == len(xs)
        for arrow in drawn["arrows"]:
            if arrow["ends"]:
                assert arrow["ends"] == [drawn["lanes"][arrow["from"]],
                                         drawn["lanes"][arrow["to"]]], arrow
        texts = [step["text"] for step in state["steps"]]
        description = sim.locator(f"#{diagram.get_attribute('aria-describedby')}")
        for text in texts:
            expect(description).to_contain_text(text)
        expect(sim.locator(".o7-steps li")).to_have_text(
            [f"{step['time']}: {step['text']}" if step["time"] else step["text"]
             for step in state["steps"]], use_inner_text=True)
        newest = [arrow for arrow in engine_arrows(state) if arrow["step"] == steps]
        expect(sim.locator(".o7-arrow.o7-new")).to_have_count(len(newest))
        expect(sim.locator(f'.o7-arrow.o7-new[data-step="{steps}"]')).to_have_count(len(newest))
    expect(sim.get_by_role("button", name="Next step of O7")).to_be_disabled()
    assert watched.problems == []


def box(locator):
    found = locator.bounding_box()
    return found["y"], found["y"] + found["height"]


def test_the_late_redelivery_falls_outside_the_key_window(watched, site_url):
    """Each operation's keys are a band on the provider's lane, from the
    request that stored them for 24 hours: O8's calls on day 1 lie in its
    band; the redelivery at day 2 14:00 reaches the provider below its end,
    which the time axis marks at day 2 12:10. Until the story reaches day
    2, no band has ended."""
    sim = start_simulation(watched, site_url, CHAPTER, "o7")
    next_steps(sim, 9)
    bands = sim.locator(".o7-window")
    expect(bands).to_have_count(2)
    expect(sim.locator('.o7-window[data-forgotten="true"]')).to_have_count(0)
    next_steps(sim, 1)
    state = engine_after(10)
    o8 = state["key_windows"][1]
    band = sim.locator(f'.o7-window[data-operation="North/O8"][data-step="{o8["step"]}"]')
    expect(band).to_have_attribute("data-forgotten", "true")
    top, bottom = box(band)
    for call in sim.locator('.o7-arrow[data-step="8"][data-to="provider"] .o7-shaft').all():
        y, _ = box(call)
        assert top - 1 <= y <= bottom, (top, y, bottom)
    late = sim.locator('.o7-arrow[data-step="10"][data-to="provider"] .o7-shaft')
    expect(late).to_have_count(1)
    late_y, _ = box(late)
    assert late_y > bottom + 10, (bottom, late_y)
    end = sim.locator('.o7-window-end[data-operation="North/O8"]')
    expect(end).to_contain_text(o8["until_hour"])
    expect(end).to_contain_text(o8["label"])
    rule, _ = box(end.locator(".o7-window-rule"))
    assert abs(rule - bottom) <= 1.5, (rule, bottom)
    assert watched.problems == []


def stroke(locator):
    return locator.evaluate("(shaft) => getComputedStyle(shaft).stroke")


def test_a_second_charge_for_one_operation_is_drawn_in_red(watched, site_url):
    """A charge is drawn apart from a plain request; paid in one request,
    O8's late redelivery is charged again, and that arrow is red, with
    words that say so in the same red. Without the switch there is none."""
    sim = start_simulation(watched, site_url, CHAPTER, "o7")
    next_steps(sim, 12)
    expect(sim.locator(".o7-arrow.o7-charge")).to_have_count(2)
    expect(sim.locator(".o7-arrow.o7-twice")).to_have_count(0)
    charge = stroke(sim.locator(".o7-charge .o7-shaft").first)
    assert charge != stroke(sim.locator(".o7-call .o7-shaft").first)
    sim.get_by_label("Pay in one request").check()
    sim.get_by_role("button", name="Start O7 over").click()
    answered(sim)
    next_steps(sim, 12)
    twice = sim.locator(".o7-arrow.o7-twice")
    expect(twice).to_have_count(1)
    expect(twice).to_have_attribute("data-step", "10")
    warning = engine_after(12, one_request=True)["steps"][9]["arrows"][1]["warning"]
    expect(twice.locator(".o7-warning")).to_have_text(warning)
    red = stroke(twice.locator(".o7-shaft"))
    assert red not in (charge, stroke(sim.locator(".o7-call .o7-shaft").first))
    assert twice.locator(".o7-warning").evaluate("(text) => getComputedStyle(text).fill") == red
    expect(task_done(sim, "twice")).to_have_class("done")
    assert watched.problems == []


def test_the_o7_story_by_keyboard_keeps_the_focus_at_its_end(watched, site_url):
    """Enter on Next step to the story's end: the button disables itself,
    and the focus goes on to Start O7 over, not to the top of the page.
    The stored charge task is done; paid in one request, the second."""
    sim = start_simulation(watched, site_url, CHAPTER, "o7", keyboard=True)
    next_step = sim.get_by_role("button", name="Next step of O7")
    expect(next_step).to_be_focused()
    for _ in range(12):
        watched.keyboard.press("Enter")
        answered(sim)
    expect(next_step).to_be_disabled()
    start_over = sim.get_by_role("button", name="Start O7 over")
    expect(start_over).to_be_focused()
    expect(sim.locator(".o7-steps")).to_contain_text("C9")
    expect(task_done(sim, "stored")).to_have_class("done")
    sim.get_by_label("Pay in one request").focus()
    watched.keyboard.press("Space")
    start_over.focus()
    watched.keyboard.press("Enter")
    expect(next_step).to_be_enabled()
    next_step.focus()
    for _ in range(12):
        watched.keyboard.press("Enter")
        answered(sim)
    expect(start_over).to_be_focused()
    expect(task_done(sim, "twice")).to_have_class("done")
    assert watched.problems == []


def test_the_diagram_follows_the_theme_and_keeps_still_when_asked(watched, site_url):
    """A charge's arrow and its coin take the page's own colour, in either
    theme; the newest step's arrows fade in only for a reader who has not
    asked for less motion."""
    watched.emulate_media(color_scheme="light", reduced_motion="no-preference")
    sim = start_simulation(watched, site_url, CHAPTER, "o7")
    next_steps(sim, 1)
    charge = sim.locator(".o7-arrow.o7-new.o7-charge")
    expect(charge).to_have_count(1)
    follows_the_theme_and_keeps_still(watched, lambda: charge.evaluate(
        """(arrow) => [getComputedStyle(arrow.querySelector(".o7-shaft")).stroke,
            getComputedStyle(arrow.querySelector(".o7-coin")).fill,
            getComputedStyle(arrow).animationName]"""))
    assert watched.problems == []
