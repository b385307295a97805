"""Every simulation folder through the same checks, in Chromium, on the page
that holds them all: it fits at 1280 px and on a phone (or says what
scrolls), axe finds nothing serious in either theme (both in one start,
at 1280 px), and started from the
keyboard it takes the focus, hides the fallback text, has earned no task
yet, and finds all it imports in the trimmed standard library.

The list is tools.sims.folders(), so a new folder is checked without a
word here. Its test_page.py says what the checks do to it: SMOKE, the
moves to make (tests/browser.py make_moves), and optionally
pictures_fit(sim, page), checks of its own pictures after every move, and
SIDEWAYS_ON_A_PHONE, how many of its boxes must say they scroll at 390 px.
"""
import importlib
import sys
import types

import pytest
from playwright.sync_api import expect

from tests.browser import (BOOT_SECONDS, LINES, OVERFLOWING, STICKING_OUT, TOO_SMALL_TO_TAP,
                           answered,
                           make_moves, python_requests, serious_violations, start_simulation,
                           visit)
from tools.sims import folders

SIMS = folders()
EVERY = "all.html"              # one page with every simulation on it


def page_tests(name):
    """The test_page module of a simulation's folder, which must say its
    smoke moves: a folder that does not fails, rather than going unchecked."""
    folder = SIMS[name]
    module_name = f"{__package__}.{folder.name}.test_page"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if not module_name.startswith(error.name):
            raise                       # the module is there, and imports something missing
        pytest.fail(f"{folder}/test_page.py is missing: every simulation has one, with "
                    "SMOKE, the moves the shared checks make (see CONTRIBUTING)")
    if not isinstance(getattr(module, "SMOKE", None), list):
        pytest.fail(f"{folder}/test_page.py has no SMOKE list: the moves the shared "
                    "checks make (button names, tick(label), choose(label, value), "
                    "disclose(summary))")
    return module


def smoke(name, sim, page):
    """Make the simulation's smoke moves, checking its pictures after each."""
    tests = page_tests(name)
    pictures_fit = getattr(tests, "pictures_fit", lambda sim, page: None)
    make_moves(sim, tests.SMOKE, lambda: pictures_fit(sim, page))


@pytest.mark.parametrize("name", SIMS)
def test_every_simulation_folder_has_its_view_its_styles_and_its_smoke_moves(name):
    for part in ("view.js", "view.css"):
        assert (SIMS[name] / part).is_file(), f"{SIMS[name]} has no {part}"
    page_tests(name)


def test_a_folder_without_page_tests_fails_rather_than_going_unchecked(monkeypatch, tmp_path):
    # A name no real simulation has (not CONTRIBUTING's queue-depth, which a
    # maintainer may well add), so that this holds whatever folders exist.
    monkeypatch.setitem(SIMS, "throwaway-guard", tmp_path / "throwaway_guard")
    with pytest.raises(pytest.fail.Exception, match="throwaway_guard/test_page.py is missing"):
        page_tests("throwaway-guard")
    without_moves = types.ModuleType("tools.sims.throwaway_guard.test_page")
    monkeypatch.setitem(sys.modules, without_moves.__name__, without_moves)
    with pytest.raises(pytest.fail.Exception, match="has no SMOKE list"):
        page_tests("throwaway-guard")


def fits(page, sim, name, width):
    """At 1280 px a simulation takes the room beside the reading column, and
    nothing in it is cut (it used to lose the jobs table's last column); on a
    phone, a table or code that has to scroll sideways says so above it. No
    simulation is wider than the window, nor reaches under the contents,
    nothing in it sticks out of its box, and its checkboxes and radios are
    big enough to tap."""
    box = page.locator(f'.sim[data-sim="{name}"]').bounding_box()
    assert 0 <= box["x"] and box["x"] + box["width"] <= width, box
    assert sim.evaluate(STICKING_OUT) == []
    assert sim.evaluate(TOO_SMALL_TO_TAP) == []
    overflowing = sim.evaluate(OVERFLOWING)
    if width == 1280:
        toc = page.locator("nav.toc, .toc").first.bounding_box()
        assert toc["x"] + toc["width"] <= box["x"], (box, toc)
        assert overflowing == []
    else:
        assert all(note == "sim-sideways" and not hidden
                   for _, note, hidden in overflowing), overflowing
        assert len(overflowing) >= getattr(page_tests(name), "SIDEWAYS_ON_A_PHONE", 0)


@pytest.mark.parametrize("name", SIMS)
def test_on_a_phone_it_fits_or_says_what_scrolls_sideways(new_page, site_url, name):
    page = new_page(390, 900)
    sim = start_simulation(page, site_url, EVERY, name)
    smoke(name, sim, page)
    fits(page, sim, name, 390)


@pytest.mark.parametrize("name", SIMS)
def test_beside_the_text_it_fits_and_axe_finds_nothing_serious_in_either_theme(
        new_page, site_url, name):
    """It fits at 1280 px, and its headline (the sentence that says what
    became of the run, .sim-result) takes one line; then axe looks at it in
    the light theme and, at the same moment, in the dark. Every colour of a simulation is CSS, so a
    reader's system turning dark while they read changes it too, and one
    start serves both looks."""
    page = new_page(1280, 900)
    sim = start_simulation(page, site_url, EVERY, name)
    smoke(name, sim, page)
    fits(page, sim, name, 1280)
    answered(sim)
    for headline in sim.locator(".sim-result").all():
        assert headline.evaluate(LINES) <= 1, f"{name}: {headline.inner_text()}"
    violations = {}
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        violations[scheme] = serious_violations(page, f'.sim[data-sim="{name}"]')
    assert violations == {"light": [], "dark": []}


@pytest.mark.parametrize("name", SIMS)
def test_started_from_the_keyboard_it_takes_the_focus_and_needs_only_the_trimmed_stdlib(
        watched, site_url, name):
    """A reader who starts a simulation from the keyboard keeps their place:
    the focus goes to its first control, not back to the top of the page.
    The paragraph for readers without JavaScript is only read out beside
    the first picture (which a screen reader skips), and goes once it
    runs. Every box opens on a value it takes, and no task is done before
    the reader does anything. Driven through its moves, it finds every module it imports in
    the standard library the build trimmed: Pyodide's whole one (the
    fallback for a module the trimmed one lacks) is never fetched."""
    fetched = python_requests(watched)
    visit(watched, f"{site_url}/{EVERY}")
    sim = watched.locator(f'.sim-mount[data-sim="{name}"]')
    fallback = watched.locator(f'.sim[data-sim="{name}"] > p')
    sim.scroll_into_view_if_needed()
    expect(sim).to_have_attribute("data-picture", "first")
    for paragraph in fallback.all():
        expect(paragraph).to_have_class("visually-hidden")
    sim.get_by_role("button", name="Start the simulation").focus()
    watched.keyboard.press("Enter")
    expect(sim).to_have_attribute("data-state", "ready", timeout=BOOT_SECONDS * 1000)
    expect(sim.locator(".sim-body :is(button, input, select)").first).to_be_focused()
    expect(sim.locator("input:invalid"), "every box to open on a value it takes").to_have_count(0)
    for paragraph in fallback.all():
        expect(paragraph).to_be_hidden()
    expect(sim.locator(".sim-tasks li").first).to_be_visible()
    expect(sim.locator(".sim-tasks li.done"), "no task done at the start").to_have_count(0)
    smoke(name, sim, watched)
    expect(sim.locator(".sim-status").first).not_to_contain_text("did not work")
    assert any(url.endswith("/stdlib.zip") for url in fetched)
    assert not any(url.endswith("/python_stdlib.zip") for url in fetched), \
        "the simulation needed a module the trimmed standard library lacks"
    assert watched.problems == []
