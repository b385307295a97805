"""Reading offline, in Chromium: the service worker the build writes
(tools/sw.js, on Workbox) keeps every page from the first visit, and Python
from the first Start; a new build replaces what it kept. Each test has a
browser context of its own, where service workers may run: the shared
profile blocks them (conftest.py), since one would answer the other tests'
requests from its cache, past their routes."""
import json
import re
import shutil

from playwright.sync_api import expect

import tools.build
from tests.browser import BOOT_SECONDS, served, visit, watch

RACE = "the-worker-where-work-happens.html"                  # the race stepper
TWO_SIMS = "idempotency-making-repeats-harmless.html"        # payment, crash timing
PYTHON_CACHES = """async () => (await caches.keys()).filter((name) => name.startsWith("python-"))"""


def until(page, condition):
    """Once condition, a JavaScript function that may be async, holds in the
    page: asked again at each turn of its event loop a few ms apart. (Not
    page.wait_for_function, which takes the promise of an async one for true.)"""
    page.evaluate(f"""async () => {{
        const holds = {condition};
        while (!(await holds())) {{
            await new Promise((resolve) => setTimeout(resolve, 20));
        }}
    }}""")


def kept_page(new_context, site_url, chapter):
    """A page of a context of its own, visited, once the service worker has
    kept the site (installed: every page fetched) and answers for the page."""
    page = watch(new_context(service_workers="allow").new_page())
    visit(page, f"{site_url}/{chapter}")
    until(page, "async () => (await navigator.serviceWorker.ready) "
                "&& navigator.serviceWorker.controller !== null")
    return page


def start(page, name):
    sim = page.locator(f'.sim-mount[data-sim="{name}"]')
    sim.get_by_role("button", name="Start the simulation").click()
    expect(sim).to_have_attribute("data-state", "ready", timeout=BOOT_SECONDS * 1000)


def test_after_one_visit_the_site_reads_offline_and_python_starts_from_what_was_kept(
        new_context, site_url):
    """One chapter visited and one simulation started: then, with no
    network, a chapter never opened shows, its simulations start, and search
    finds words."""
    page = kept_page(new_context, site_url, RACE)
    assert page.evaluate(PYTHON_CACHES) == [], "Python was kept before the reader started it"
    start(page, "race")
    page.context.set_offline(True)
    offline = watch(page.context.new_page())
    visit(offline, f"{site_url}/{TWO_SIMS}")
    crash_timing = offline.locator('.sim-mount[data-sim="crash-timing"]')
    crash_timing.scroll_into_view_if_needed()
    expect(crash_timing).to_have_attribute("data-picture", "first")
    start(offline, "crash-timing")
    offline.get_by_label("Search the guide").fill("thundering herd")
    expect(offline.locator(".search-results")).to_contain_text("6. Retry: Trying Again, Politely")
    visit(offline, f"{site_url}/")
    expect(offline.locator("main h1")).to_have_text(re.compile("Jobs, Queues"))
    assert page.problems == [] and offline.problems == []


def test_a_new_build_replaces_what_was_kept(new_context, site_pages, tmp_path):
    """A chapter changed and Python changed, as a new build changes them:
    the next visit installs the new service worker, which serves the new
    chapter offline and drops the Python kept for the old build."""
    site = tmp_path / "site"
    shutil.copytree(site_pages, site)
    with served(site) as site_url:
        page = kept_page(new_context, site_url, RACE)
        start(page, "race")
        old_python = page.evaluate(PYTHON_CACHES)
        assert len(old_python) == 1
        glossary = site / "glossary.html"
        glossary.write_text(glossary.read_text(encoding="utf-8").replace(
            "<h1", "<p>Rebuilt.</p><h1", 1), encoding="utf-8")
        lock = site / "pyodide" / "pyodide-lock.json"
        lock.unlink()                       # a hard link to node_modules: not written through
        lock.write_text(json.dumps({"rebuilt": True}))
        (site / "sw.js").unlink()
        shutil.rmtree(site / "workbox")
        tools.build.write_service_worker(site)
        visit(page, f"{site_url}/{RACE}")
        until(page, f"async () => !(await caches.keys()).includes({json.dumps(old_python[0])})")
        page.context.set_offline(True)
        visit(page, f"{site_url}/glossary.html")
        expect(page.locator("main")).to_contain_text("Rebuilt.")


# What the page asks navigator.serviceWorker.register() for, in order.
REGISTERED = """window.registered = [];
const register = ServiceWorkerContainer.prototype.register;
ServiceWorkerContainer.prototype.register = function (...args) {
  window.registered.push(args[0]);
  return register.apply(this, args);
};"""
SAVING_DATA = """Object.defineProperty(Navigator.prototype, "connection",
    { get: () => ({ saveData: true }) });"""


def test_no_service_worker_when_the_browser_saves_data(new_context, site_url):
    """A reader whose browser asks to save data gets no copy for offline:
    by the end of the page's load event, where the site's script asks for
    it, nothing has been asked for (and, saving nothing, it has)."""
    asked = {}
    for saving in (True, False):
        page = new_context(service_workers="allow").new_page()
        page.add_init_script(REGISTERED + (SAVING_DATA if saving else ""))
        visit(page, f"{site_url}/{RACE}")     # returns once the load event has run
        asked[saving] = page.evaluate("window.registered")
    assert asked == {True: [], False: ["sw.js"]}


# Each engine the page asks its Python worker to make, by simulation name.
MADE = """window.made = [];
const post = Worker.prototype.postMessage;
Worker.prototype.postMessage = function (message, ...rest) {
  const request = message.request && JSON.parse(message.request);
  if (request && request.method === "new") {
    window.made.push(request.sim);
  }
  return post.call(this, message, ...rest);
};"""


def test_python_kept_at_a_first_start_makes_the_next_simulation_before_its_start(
        new_context, site_url):
    """Once a Start has kept Python, a simulation on another chapter, with
    no network, is made as it comes near, before the reader points at
    anything: its note says so, and Start shows that one engine, making no
    other."""
    page = kept_page(new_context, site_url, RACE)
    start(page, "race")
    page.context.set_offline(True)
    offline = watch(page.context.new_page())
    offline.add_init_script(MADE)
    visit(offline, f"{site_url}/{TWO_SIMS}")
    crash_timing = offline.locator('.sim-mount[data-sim="crash-timing"]')
    note = crash_timing.locator(".sim-size")
    expect(note).to_have_text("It runs Python in your browser, kept since your first Start: "
                              "it wakes as you near it, with nothing to download.")
    crash_timing.scroll_into_view_if_needed()
    expect(note).to_have_text("Python, kept since your first Start, is ready.",
                              timeout=BOOT_SECONDS * 1000)
    start(offline, "crash-timing")
    assert offline.evaluate("window.made").count("crash-timing") == 1
    assert page.problems == [] and offline.problems == []


# The page's first call to payment after its "new" is never sent: the
# Python worker never answers it, and the page, after its 15 s, throws that
# Python away.
LOSE_A_PAYMENT_CALL = """const send = Worker.prototype.postMessage;
let lost = false;
Worker.prototype.postMessage = function (message, ...rest) {
  const request = message.request && JSON.parse(message.request);
  if (!lost && request && request.sim === "payment" && request.method !== "new") {
    lost = true;
    return;
  }
  return send.call(this, message, ...rest);
};"""


def test_an_engine_made_before_start_is_not_used_once_its_python_is_gone(
        new_context, site_url):
    """Both simulations of a page made before Start, in the Python that was
    kept; then that Python thrown away, as a call it never answers makes the
    page do: the other simulation's Start makes its engine again, in the new
    Python, and it works."""
    page = kept_page(new_context, site_url, RACE)
    start(page, "race")
    chapter = watch(page.context.new_page())
    chapter.add_init_script(LOSE_A_PAYMENT_CALL + MADE)
    visit(chapter, f"{site_url}/{TWO_SIMS}")
    for name in ("payment", "crash-timing"):
        sim = chapter.locator(f'.sim-mount[data-sim="{name}"]')
        sim.scroll_into_view_if_needed()
        expect(sim.locator(".sim-size")).to_have_text(
            "Python, kept since your first Start, is ready.", timeout=BOOT_SECONDS * 1000)
    start(chapter, "payment")
    payment = chapter.locator('.sim-mount[data-sim="payment"]')
    payment.get_by_role("button", name="Step one attempt").click()
    expect(payment).to_have_attribute("data-state", "error", timeout=BOOT_SECONDS * 1000)
    start(chapter, "crash-timing")
    crash_timing = chapter.locator('.sim-mount[data-sim="crash-timing"]')
    crash_timing.get_by_role("button", name="Run", exact=True).click()
    expect(crash_timing).to_have_attribute("data-busy", "false")
    expect(crash_timing.locator(".sim-bar .sim-status")).not_to_contain_text("did not work")
    assert chapter.evaluate("window.made").count("crash-timing") == 2
    assert page.problems == [] and chapter.problems == []
