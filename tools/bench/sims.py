"""Simulation benchmarks, part of `make bench`: numbers, never pass or fail.

In Debian's Chromium, driven by Playwright, against the site just built:
- click to interactive: from clicking "Start the simulation" (the race
  stepper, Chapter 4) until the simulation reports itself ready, which
  includes booting Pyodide, fetching and unpacking the course's Python and
  making the engine's first state;
- a bare Pyodide boot: a module worker on the same page that only calls
  loadPyodide(), the least any simulation could cost. The goal is click to
  interactive, cold (nothing loaded before the click), at most 0.8 times
  this;
- pointed at: the pointer over Start, the click HOVER_SECONDS later, as a
  reader's hand moves (Python starts loading when the reader points at
  Start or tabs to it), from the click to ready;
- main-thread blocking while the simulation starts: the long tasks (over
  50 ms) the browser reports between the click and ready. The goal is none;
- the first pictures: on the page with the most simulations, opened cold
  (a new profile each run) and scrolled through, whether each simulation
  had drawn its first picture before it came into view (the goal: all,
  before any Python); and, jumped to at once, how long its picture takes;
- before the reader points at Start, on that page, scrolled through: the
  bytes fetched, and the files of Python asked for (the goal: none);
- Start once Python was kept: a reader with the site's service worker who
  has started the race stepper once, then, on the next chapter and, with
  the network off, on one more: how long after the simulation came near
  Python has made it (sims.js does so once Python is kept), Start then (the
  goal: at most 0.5 s), and Start pressed the moment it came near; and how
  much the service worker keeps from a first visit;
- boxes that scroll sideways on every page at 1280 and 390 px, and those
  of them with no shade to show it (the goal: none).
Each is the median of RUNS runs, alternating, each on a fresh page (so a
fresh worker), with the browser's HTTP cache warm after the first.
"""
import functools
import http.server
import statistics
import sys
import threading

from playwright.sync_api import sync_playwright

from tools.build import kept_offline

CHROMIUM = "/usr/bin/chromium"
CHAPTER = "the-worker-where-work-happens.html"
RUNS = 5

BARE_BOOT = """async () => {
  const started = performance.now();
  const source = `import { loadPyodide } from "${location.origin}/pyodide/pyodide.mjs";
    await loadPyodide({ indexURL: "${location.origin}/pyodide/" });
    postMessage("ready");`;
  const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
  const worker = new Worker(url, { type: "module" });
  await new Promise((resolve) => { worker.onmessage = resolve; });
  worker.terminate();
  return performance.now() - started;
}"""

HOVER_SECONDS = 0.5

CLICK_TO_READY = """(name) => new Promise((resolve) => {
  const sim = document.querySelector(`.sim-mount[data-sim="${name}"]`);
  const blocked = [];
  new PerformanceObserver((list) => {
    for (const task of list.getEntries()) blocked.push(task.duration);
  }).observe({ type: "longtask" });
  const started = performance.now();
  new MutationObserver(() => {
    if (sim.dataset.state === "ready") {
      resolve({ ms: performance.now() - started, blocked });
    }
  }).observe(sim, { attributes: true });
  sim.querySelector(".sim-start").click();
})"""


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)
        # a page closed or navigated away mid-download: nothing went wrong


def serve(folder):
    server = QuietServer(("127.0.0.1", 0),
                         functools.partial(QuietHandler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def click_to_ready(page, name="race"):
    """Seconds from the click on a simulation's Start to ready, and seconds
    of long tasks meanwhile."""
    result = page.evaluate(CLICK_TO_READY, name)
    return result["ms"] / 1000, sum(result["blocked"]) / 1000


def measure(site_url):
    bare, ready, warm, blocked = [], [], [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        # The bare boot's worker comes from a blob, which the site's CSP
        # rightly refuses; both measurements run without it, alike.
        # No service worker: each run's Start downloads, as a first one does.
        context = browser.new_context(bypass_csp=True, service_workers="block")
        for _ in range(RUNS):
            page = context.new_page()
            page.goto(f"{site_url}/{CHAPTER}")
            bare.append(page.evaluate(BARE_BOOT) / 1000)
            page.close()
            page = context.new_page()
            page.goto(f"{site_url}/{CHAPTER}")
            seconds, long_tasks = click_to_ready(page)   # not scrolled to: cold
            ready.append(seconds)
            blocked.append(long_tasks)
            page.close()
            page = context.new_page()
            page.goto(f"{site_url}/{CHAPTER}")
            page.locator('.sim-mount[data-sim="race"] .sim-start').hover()
            page.wait_for_timeout(HOVER_SECONDS * 1000)   # a hand on its way to click
            warm.append(click_to_ready(page)[0])
            page.close()
        browser.close()
    return (statistics.median(bare), statistics.median(ready), statistics.median(warm),
            max(blocked))


# The page with the most simulations: the heaviest a reader opens.
HEAVIEST = "idempotency-making-repeats-harmless.html"

# For each simulation of the page, whether its first picture was drawn
# (sims.js marks the mount data-picture="first") by the time its top came
# into the window.
DRAWN_IN_VIEW = """window.drawnInView = {};
addEventListener("DOMContentLoaded", () => {
  const seen = new IntersectionObserver((entries) => {
    for (const entry of entries.filter((each) => each.isIntersecting)) {
      seen.unobserve(entry.target);
      window.drawnInView[entry.target.dataset.sim] = entry.target.dataset.picture === "first";
    }
  });
  document.querySelectorAll(".sim-mount[data-sim]").forEach((mount) => seen.observe(mount));
});"""

# From a jump straight to a simulation (as a link to its section makes) to
# its first picture, in ms.
JUMP_TO_PICTURE = """(name) => new Promise((drawn) => {
  const mount = document.querySelector(`.sim-mount[data-sim="${name}"]`);
  const jumped = performance.now();
  new MutationObserver(() => mount.dataset.picture === "first"
    && drawn(performance.now() - jumped)).observe(mount, { attributes: true });
  mount.scrollIntoView({ behavior: "instant" });    // the site scrolls smoothly
})"""


def first_pictures(site_url):
    """On the heaviest page, opened cold (a new profile each of RUNS runs):
    scrolled through as a reader scrolls, how many simulations had their
    first picture drawn before they came into view, of how many; the
    median ms from a jump straight to the last of them to its picture; and
    the most files of Python any run asked for meanwhile."""
    from tests.browser import of_python
    in_view, jumps, python = [], [], 0
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        for _ in range(RUNS):
            for scrolled in (True, False):
                context = browser.new_context(service_workers="block")   # a first visit
                page = context.new_page()
                asked = []
                page.on("request", lambda request: of_python(request.url) and asked.append(request))
                page.add_init_script(DRAWN_IN_VIEW)
                page.goto(f"{site_url}/{HEAVIEST}")
                names = page.eval_on_selector_all(".sim-mount[data-sim]",
                                                  "(mounts) => mounts.map((m) => m.dataset.sim)")
                if scrolled:
                    height = page.evaluate("document.documentElement.scrollHeight")
                    for top in range(0, height, 600):
                        page.evaluate(f"window.scrollTo(0, {top})")
                        page.wait_for_timeout(100)
                    found = page.evaluate("window.drawnInView")
                    in_view.append((sum(found.values()), len(names)))
                else:
                    jumps.append(page.evaluate(JUMP_TO_PICTURE, names[-1]))
                python = max(python, len(asked))
                context.close()
        browser.close()
    drawn = min(in_view)
    return drawn, statistics.median(jumps), python


# Chapters a reader opens after the race's, each with a simulation.
NEXT_CHAPTERS = {"online": (HEAVIEST, "crash-timing"),
                 "offline": ("limits-bounding-the-work.html", "retry-budget")}


# From the jump to a simulation to its note saying Python made it, in ms.
JUMP_TO_MADE = """(name) => new Promise((made) => {
  const mount = document.querySelector(`.sim-mount[data-sim="${name}"]`);
  const note = mount.querySelector(".sim-size");
  const jumped = performance.now();
  const check = () => note.textContent.endsWith("is ready.") && made(performance.now() - jumped);
  new MutationObserver(check).observe(note, { childList: true, characterData: true, subtree: true });
  mount.scrollIntoView({ behavior: "instant" });
  check();
})"""


def from_what_was_kept(site_url):
    """Medians over RUNS readers (a new profile each, with the site's service
    worker): the race's chapter visited and its simulation started once,
    which keeps Python; then, on the next chapter and on one more with the
    network off, in seconds: from the jump to the simulation until Python
    has made it, Start after that, and Start pressed at the jump."""
    seconds = {(mode, measure): [] for mode in NEXT_CHAPTERS
               for measure in ("made", "start", "at once")}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        for _ in range(RUNS):
            context = browser.new_context()
            page = context.new_page()
            page.goto(f"{site_url}/{CHAPTER}")
            page.evaluate("""async () => {
                await navigator.serviceWorker.ready;
                while (!navigator.serviceWorker.controller) {
                    await new Promise((claimed) => setTimeout(claimed, 20));
                }
            }""")
            click_to_ready(page)
            for mode, (chapter, name) in NEXT_CHAPTERS.items():
                context.set_offline(mode == "offline")
                page = context.new_page()
                page.goto(f"{site_url}/{chapter}")
                seconds[mode, "made"].append(page.evaluate(JUMP_TO_MADE, name) / 1000)
                seconds[mode, "start"].append(click_to_ready(page, name)[0])
                page.close()
                page = context.new_page()
                page.goto(f"{site_url}/{chapter}")
                page.locator(f'.sim-mount[data-sim="{name}"]').scroll_into_view_if_needed()
                seconds[mode, "at once"].append(click_to_ready(page, name)[0])
                page.close()
            context.close()
        browser.close()
    return {key: statistics.median(each) for key, each in seconds.items()}


def kept_at_first_visit(site):
    """The bytes the service worker keeps from a first visit: every file its
    sw.js lists but Python's."""
    return sum((site / page["url"]).stat().st_size for page in kept_offline(site)["pages"])


def before_python(site_url, site):
    """What a reader's browser fetches of the heaviest simulation page,
    scrolled from top to bottom, before they point at Start: bytes, and
    how many files of Python it asked for; and, on every page but all.html (which
    repeats the chapters) at 1280 and 390 px, the boxes that scroll
    sideways and those of them that do not show it."""
    from tests.browser import BOXES_CUT_OFF, of_python
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        page = browser.new_page()
        sizes = {}                                    # each response's body, by address
        page.on("response", lambda response: sizes.__setitem__(
            response.url, len(response.body()) if response.ok else 0))
        asked = []                                    # every request, a worker's too
        page.on("request", lambda request: asked.append(request.url))
        page.goto(f"{site_url}/{HEAVIEST}")
        height = page.evaluate("document.documentElement.scrollHeight")
        for top in range(0, height, 600):             # a reader scrolling through
            page.evaluate(f"window.scrollTo(0, {top})")
            page.wait_for_timeout(100)
        page.wait_for_timeout(1000)                   # for anything a scroll set off
        page.wait_for_load_state("networkidle")
        fetched = (sum(sizes.values()), sum(map(of_python, asked)))
        page.close()
        boxes = {}
        for width in (1280, 390):
            page = browser.new_page(viewport={"width": width, "height": 900})
            counts = [0, 0, 0]
            for path in sorted(site.glob("*.html")):
                if path.name == "all.html":           # every chapter again
                    continue
                page.goto(f"{site_url}/{path.name}")
                found = page.evaluate(BOXES_CUT_OFF)
                for at, number in enumerate((found["boxes"], found["wide"], len(found["silent"]))):
                    counts[at] += number
            boxes[width] = counts
            page.close()
        browser.close()
    return fetched, boxes


def main(site):
    server = serve(site)
    try:
        site_url = f"http://127.0.0.1:{server.server_port}"
        bare, ready, warm, blocked = measure(site_url)
        (drawn, sims_on_page), jump, python_for_pictures = first_pictures(site_url)
        kept = from_what_was_kept(site_url)
        (page_bytes, python_files), boxes = before_python(site_url, site)
    finally:
        server.shutdown()
        server.server_close()
    print(f"simulations in Chromium, median of {RUNS} runs (race stepper, {CHAPTER}):")
    print(f"  bare Pyodide boot in a module worker        {bare:6.2f} s")
    print(f"  click to interactive, cold                   {ready:6.2f} s"
          f"   {ready / bare:4.2f}x bare (goal: at most 0.8x)")
    print(f"  click to interactive, pointed at first       {warm:6.2f} s"
          f"   clicked {HOVER_SECONDS} s after the pointer reached Start")
    print(f"  main thread blocked meanwhile (long tasks)   {blocked:6.2f} s"
          "   the worst run (goal: none)")
    print(f"Start once Python was kept (after the race's Start), median of {RUNS} readers "
          "(goal: at most 0.5 s):")
    for mode, (chapter, name) in NEXT_CHAPTERS.items():
        print(f"  {mode:7} {name:14} made {kept[mode, 'made']:5.2f} s after it came near; "
              f"Start then {kept[mode, 'start']:5.2f} s; "
              f"Start as it came near {kept[mode, 'at once']:5.2f} s")
    print(f"  the service worker keeps {kept_at_first_visit(site):,} bytes from a first visit, "
          "Python apart")
    print(f"first pictures ({HEAVIEST}, opened cold, {RUNS} runs):")
    print(f"  scrolled through: drawn before coming into view, {drawn} of {sims_on_page} "
          "simulations in the worst run (goal: all)")
    print(f"  jumped to the last simulation: drawn {jump:5.0f} ms later (median); "
          f"files of Python asked for: {python_for_pictures} (goal: 0)")
    print(f"before the reader points at Start ({HEAVIEST}, scrolled through):")
    print(f"  fetched {page_bytes:,} bytes; files of Python asked for: {python_files} (goal: 0)")
    print("boxes that scroll sideways on every page, and those that do not show it (goal: 0):")
    for width, (count, wide, silent) in boxes.items():
        print(f"  at {width:4} px: {wide} of {count} scroll, {silent} without a shade")
