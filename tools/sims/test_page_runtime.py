"""What sims.js and runtime.js do for every simulation, in Chromium: Python
loads only once the reader points at Start or tabs to it (on Start itself
when the browser saves data), the Start control says its size and shows
its progress, a boot that never ends gives up, and actions made while
Python answers wait their turn. They use the crash-timing explorer, or the
race stepper, as any simulation."""
import re

import pytest
from playwright.sync_api import expect

from tests.browser import (BOOT_SECONDS, answered, of_python, python_requests,
                           start_simulation, visit)


CHAPTER = "idempotency-making-repeats-harmless.html"    # the crash-timing explorer's


def nothing_fetched_in_view(page, site_url, fetched):
    """With the simulation on screen and the page settled, none of Python
    has been fetched; returns the simulation."""
    visit(page, f"{site_url}/{CHAPTER}")
    sim = page.locator('.sim-mount[data-sim="crash-timing"]')
    sim.scroll_into_view_if_needed()
    page.wait_for_load_state("networkidle")
    page.evaluate("() => new Promise((done) => requestAnimationFrame(() => "
                  "requestAnimationFrame(done)))")   # anything waiting for a frame has run
    page.wait_for_load_state("networkidle")
    assert fetched == [], "Python was fetched before the reader went near Start"
    return sim


@pytest.mark.parametrize("intent", ["point", "tab"])
def test_python_loads_once_the_reader_points_at_start_or_tabs_to_it(watched, site_url,
                                                                      intent):
    """A simulation on screen fetches nothing of Python; a pointer over Start,
    or the focus on it, begins the download before any click."""
    fetched = python_requests(watched)
    sim = nothing_fetched_in_view(watched, site_url, fetched)
    start = sim.get_by_role("button", name="Start the simulation")
    with watched.expect_request("**/pyodide.asm.wasm", timeout=BOOT_SECONDS * 1000):
        start.hover() if intent == "point" else start.focus()
    start.click()
    expect(sim).to_have_attribute("data-state", "ready", timeout=BOOT_SECONDS * 1000)
    assert watched.problems == []


def test_python_waits_for_start_when_the_browser_saves_data(watched, site_url):
    """With Save-Data on, nothing of Python is fetched until Start is pressed,
    and the note beside it says so."""
    watched.add_init_script("""Object.defineProperty(Navigator.prototype, "connection",
        { get: () => ({ saveData: true }) });""")
    fetched = python_requests(watched)
    sim = nothing_fetched_in_view(watched, site_url, fetched)
    start = sim.get_by_role("button", name="Start the simulation")
    start.hover()
    start.focus()
    watched.wait_for_load_state("networkidle")
    assert fetched == []
    expect(sim.locator(".sim-size")).to_contain_text("begun when you press Start")
    start.click()
    expect(sim).to_have_attribute("data-state", "ready", timeout=BOOT_SECONDS * 1000)
    assert any(url.endswith("/pyodide.asm.wasm") for url in fetched)
    assert watched.problems == []


def test_the_start_control_says_how_much_python_downloads(watched, site_url):
    """The size beside Start is what starting Python fetches, to a tenth of a MB."""
    responses = []
    watched.on("response", lambda response: of_python(response.url) and responses.append(response))
    sim = start_simulation(watched, site_url, CHAPTER, "crash-timing")
    said = watched.locator("#" + sim.locator(".sim-start").get_attribute("aria-describedby"))
    megabytes = float(re.fullmatch(r"It runs Python in your browser: a download of "
                                   r"([\d.]+) MB, begun as you point at Start or tab to it\.",
                                   said.text_content()).group(1))
    fetched = {response.url: len(response.body()) for response in responses}
    assert round(sum(fetched.values()) / 1e6, 1) == megabytes, sorted(fetched)
    assert watched.problems == []


def test_the_download_shows_its_progress_to_the_last_byte(watched, site_url):
    """While Python loads, a bar counts the bytes received out of the download
    the Start control promised: part way while the interpreter is held back,
    every byte by the end."""
    watched.add_init_script("""
        window.barValues = [];
        new MutationObserver((changes) => changes.forEach((change) => {
          if (change.target.localName === "progress") {
            window.barValues.push([Number(change.target.value), Number(change.target.max)]);
          }
        })).observe(document, { subtree: true, attributes: true,
                                attributeFilter: ["value"] });""")
    held = []

    def hold(route):
        held.append(route.request.url)
        watched.wait_for_timeout(1500)
        route.continue_()

    watched.route("**/pyodide.asm.wasm", hold)
    sim = start_simulation(watched, site_url, CHAPTER, "crash-timing")
    assert held, "the interpreter was never fetched through the route"
    seen = watched.evaluate("window.barValues")
    total = float(re.search(r"([\d.]+) MB", sim.locator(".sim-size").text_content()).group(1))
    assert seen, "no progress bar moved while Python loaded"
    most = seen[0][1]
    assert {bar_max for _, bar_max in seen} == {most} and round(most / 1e6, 1) == total
    values = [value for value, _ in seen]
    assert any(0 < value < most / 2 for value in values), values
    assert values == sorted(values), "the bar went backwards"
    assert values[-1] == most, f"the bar ended at {values[-1]} of {most}"
    assert watched.problems == []


def test_a_boot_that_never_ends_gives_up_with_a_message(new_context, site_url):
    """Pyodide's loader waits for ever when its wasm never arrives; the page
    gives up after its boot timeout, says so, and offers to start again."""
    page = new_context().new_page()      # not the shared profile: the clock stays
    page.clock.install()
    page.route("**/pyodide.asm.wasm", lambda route: None)   # never answered
    visit(page, f"{site_url}/the-worker-where-work-happens.html")
    sim = page.locator('.sim-mount[data-sim="race"]')
    # until the worker has asked for the wasm, which the route holds back
    with page.expect_request("**/pyodide.asm.wasm", timeout=BOOT_SECONDS * 1000):
        sim.get_by_role("button", name="Start the simulation").click()
        expect(sim).to_have_attribute("data-state", "loading")
    page.clock.fast_forward(61_000)
    expect(sim).to_have_attribute("data-state", "error")
    expect(sim.locator(".sim-status")).to_contain_text("Python did not start within 60 s")
    expect(sim.get_by_role("button", name="Start again")).to_be_visible()


def test_actions_made_while_python_answers_are_not_lost(watched, site_url):
    """A reader who picks a protection and a crash and presses Run, faster
    than Python answers: each call waits for the one before, and the run is
    the one chosen, not dropped nor run with the old choice."""
    sim = start_simulation(watched, site_url, CHAPTER, "crash-timing")
    controls = [sim.get_by_label("Protection").element_handle(),
                sim.get_by_label("Crash").element_handle(),
                sim.get_by_role("button", name="Run", exact=True).element_handle()]
    watched.evaluate("""([protection, crash, run]) => {
        protection.value = "none";
        protection.dispatchEvent(new Event("change"));
        crash.value = "after-effect";
        crash.dispatchEvent(new Event("change"));
        run.click();
    }""", controls)
    answered(sim)
    sim.get_by_role("button", name="Show all").click()
    expect(sim.locator(".sim-result")).to_have_text("Outcome: ⚠ duplicate (2 effects)")
    assert watched.problems == []
