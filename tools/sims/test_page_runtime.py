"""What sims.js and runtime.js do for every simulation, in Chromium: each
is drawn as the page loads, before any Python, as its engine starts;
Python loads only once the reader points at Start or tabs to it (on Start
itself when the browser saves data), the Start control says its size and
shows its progress, a boot that never ends gives up, and actions made
while Python answers wait their turn. Most use the crash-timing explorer,
or the race stepper, as any simulation."""
import difflib
import re

import pytest
from playwright.sync_api import expect

from tests.browser import (BOOT_SECONDS, answered, of_python, python_requests,
                           start_simulation, visit)
from tools.sims import folders

CHAPTER = "idempotency-making-repeats-harmless.html"    # the crash-timing explorer's


def test_each_simulation_is_drawn_before_python_as_its_engine_starts(watched, site_url):
    """As the reader nears it (a simulation far down the page is not drawn
    as the page loads), each simulation shows its first picture: drawn
    from the state the build had the same engine compute, with nothing of
    Python fetched, and not yet to be used (inert). Started, the engine
    that Python makes in the browser answers, and the picture it draws is
    the first one, to the last element and attribute."""
    fetched = python_requests(watched)
    visit(watched, f"{site_url}/all.html")
    bodies = {name: watched.locator(f'.sim-mount[data-sim="{name}"]') for name in folders()}
    watched.wait_for_load_state("networkidle")
    last = list(bodies.values())[-1]
    assert last.get_attribute("data-picture") is None, "drawn far from the window"
    first = {}
    for name, sim in bodies.items():
        sim.scroll_into_view_if_needed()
        expect(sim).to_have_attribute("data-picture", "first")
        body = sim.locator(".sim-body")
        expect(body).to_be_visible()
        assert body.evaluate("(body) => body.inert"), f"{name}: its first picture can be used"
        first[name] = body.inner_html()
    watched.wait_for_load_state("networkidle")
    assert fetched == [], "Python was fetched for the first pictures"
    changed = {}
    for name, sim in bodies.items():
        sim.get_by_role("button", name="Start the simulation").click()
        expect(sim).to_have_attribute("data-state", "ready", timeout=BOOT_SECONDS * 1000)
        started = sim.locator(".sim-body").inner_html()
        if started != first[name]:
            lines = lambda html: html.replace(">", ">\n").splitlines()   # noqa: E731
            changed[name] = list(difflib.unified_diff(lines(first[name]), lines(started),
                                                      lineterm="", n=0))[2:8]
    assert changed == {}, "the picture changed when Python started"
    assert watched.problems == []


def test_the_first_picture_cannot_be_used_but_a_click_on_it_starts_it(watched, site_url):
    """The keyboard goes from Start past the picture's controls, which do not
    work yet; a click anywhere on the picture starts the simulation, as
    Start does."""
    visit(watched, f"{site_url}/{CHAPTER}")
    sim = watched.locator('.sim-mount[data-sim="crash-timing"]')
    sim.scroll_into_view_if_needed()
    expect(sim).to_have_attribute("data-picture", "first")
    sim.get_by_role("button", name="Start the simulation").focus()
    watched.keyboard.press("Tab")
    assert not sim.locator(".sim-body").evaluate(
        "(body) => body.contains(document.activeElement)"), "Tab reached the picture"
    sim.locator(".sim-body").scroll_into_view_if_needed()
    box = sim.locator(".sim-body").bounding_box()
    watched.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    expect(sim).to_have_attribute("data-state", "ready", timeout=BOOT_SECONDS * 1000)
    expect(sim).not_to_have_attribute("data-picture", "first")
    assert watched.problems == []


def test_without_its_first_state_a_simulation_says_so_on_start(watched, site_url):
    """A first.json that does not load leaves no half-drawn picture, and
    Start says which file did not load."""
    watched.route("**/crash_timing/first.json", lambda route: route.fulfill(status=404))
    visit(watched, f"{site_url}/{CHAPTER}")
    sim = watched.locator('.sim-mount[data-sim="crash-timing"]')
    sim.scroll_into_view_if_needed()
    watched.wait_for_load_state("networkidle")
    expect(sim.locator(".sim-body")).to_be_hidden()
    sim.get_by_role("button", name="Start the simulation").click()
    expect(sim).to_have_attribute("data-state", "error")
    expect(sim.locator(".sim-status")).to_have_text(
        "The simulation stopped: /static/sims/crash_timing/first.json did not load (404).")


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
    sim.scroll_into_view_if_needed()
    expect(sim).to_have_attribute("data-picture", "first")
    # until the worker has asked for the wasm, which the route holds back
    with page.expect_request("**/pyodide.asm.wasm", timeout=BOOT_SECONDS * 1000):
        sim.get_by_role("button", name="Start the simulation").click()
        expect(sim).to_have_attribute("data-state", "loading")
    page.clock.fast_forward(61_000)
    expect(sim).to_have_attribute("data-state", "error")
    expect(sim.locator(".sim-status")).to_contain_text("Python did not start within 60 s")
    expect(sim.get_by_role("button", name="Start again")).to_be_visible()
    expect(sim).not_to_have_attribute("data-picture", "first")   # nor its inert picture
    for paragraph in page.locator('.sim[data-sim="race"] > p').all():   # its words are back
        expect(paragraph).not_to_have_class("visually-hidden")


def test_actions_made_while_python_answers_are_not_lost(watched, site_url):
    """A reader who moves the crash, picks a protection and presses Run,
    faster than Python answers: each call waits for the one before, and the
    run is the one chosen, not dropped nor run with the old choice."""
    sim = start_simulation(watched, site_url, CHAPTER, "crash-timing")
    controls = [sim.get_by_role("slider", name="When the worker dies").element_handle(),
                sim.get_by_label("Protection").element_handle(),
                sim.get_by_role("button", name="Run", exact=True).element_handle()]
    watched.evaluate("""([marker, protection, run]) => {
        for (const key of ["Home", "ArrowRight", "ArrowRight"]) {
            marker.dispatchEvent(new KeyboardEvent("keydown", { key, bubbles: true }));
        }
        protection.value = "key-apart";
        protection.dispatchEvent(new Event("change"));
        run.click();
    }""", controls)
    answered(sim)
    sim.get_by_role("button", name="Show all").click()
    expect(sim.locator(".sim-result")).to_have_text("Outcome: ⚠ duplicate (2 effects)")
    assert watched.problems == []
