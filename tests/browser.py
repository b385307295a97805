"""What the browser tests share: waiting for a simulation's Python, the
moves a test makes, axe, and the checks that a picture fits its box.
Their fixtures (Chromium, a watched page, the site) are in conftest.py."""
import contextlib
import functools
import http.server
import threading
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from playwright.sync_api import expect


ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"


def serious_violations(page, where="document"):
    """axe's serious and critical findings on the page, or within the
    elements a CSS selector names ("document": the whole page)."""
    # Not a script tag, which the page's CSP rightly refuses (and a page
    # allowed to break its CSP would hide a real breach from the tests):
    # what DevTools evaluates, the page's CSP does not judge.
    page.evaluate(AXE.read_text())
    return page.evaluate("""async (where) => (await axe.run(where === "document" ? document
                                                           : where)).violations
        .filter(v => v.impact === 'serious' || v.impact === 'critical')
        .map(v => `${v.id}: ${v.nodes.map(n => n.target.join(' ')).slice(0, 3)}`)""", where)


BOOT_SECONDS = 60                # Pyodide boots in a few; a slow machine gets room
# A page opens in a second; all.html, the whole guide, beside a heavy
# neighbour once took more than Playwright's 30 s (issue 47). A wait ends
# when its event comes, so room costs nothing where the page is quick.
OPEN_SECONDS = 120
# Every other wait is for something the page shows once its Python has
# answered: on a busy machine that can take far longer than Playwright's 5 s.
expect.set_options(timeout=30_000)


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def served(folder):
    """A built site's folder, served over HTTP on a free localhost port: its URL."""
    handler = functools.partial(QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def watch(page):
    """Collect the page's console errors and its requests off localhost
    (refused) in page.problems."""
    problems = []
    page.on("console", lambda message: message.type == "error"
            and problems.append(f"console: {message.text}"))
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))

    def only_localhost(route):
        if urlsplit(route.request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            problems.append(f"request off localhost: {route.request.url}")
            route.abort()
    page.route("**/*", only_localhost)
    page.problems = problems
    return page


def visit(page, url):
    """Open url in the page, waiting up to OPEN_SECONDS for it to load."""
    page.goto(url, timeout=OPEN_SECONDS * 1000)


def start_simulation(page, site_url, chapter, name, keyboard=False):
    visit(page, f"{site_url}/{chapter}")
    sim = page.locator(f'.sim-mount[data-sim="{name}"]')
    start = sim.get_by_role("button", name="Start the simulation")
    if keyboard:
        start.focus()
        page.keyboard.press("Enter")
    else:
        start.click()
    expect(sim).to_have_attribute("data-state", "ready", timeout=BOOT_SECONDS * 1000)
    return sim


def task_done(sim, task):
    return sim.locator(f'li[data-task="{task}"]')


def answered(sim):
    """Wait until Python has answered every call the simulation has made."""
    expect(sim, "the simulation's calls to Python to be answered").to_have_attribute(
        "data-busy", "false", timeout=BOOT_SECONDS * 1000)


MENU_WHEN_DRAWN = """(mount, [menu, drawn, changes]) => new Promise((resolve) => {
    // The menu as it stands when the first answer is drawn: each change
    // is a call of its own, so the later ones' answers come after.
    new MutationObserver((_, observer) => {
        observer.disconnect();
        resolve(mount.querySelector(menu).value);
    }).observe(mount.querySelector(drawn),
               { childList: true, characterData: true, subtree: true });
    for (const [control, value] of changes) {
        const element = mount.querySelector(control);
        element.value = value;
        element.dispatchEvent(new Event("change"));
    }
})"""


def menu_when_the_first_answer_is_drawn(sim, menu, drawn, changes):
    """Make `changes` (control, value) one after another, faster than Python
    answers, and say what `menu` holds when the first answer is drawn into
    `drawn`: a view that draws an older answer over the reader's newer
    choice shows the older one."""
    return sim.evaluate(MENU_WHEN_DRAWN, [menu, drawn, changes])


# ---------------------------------------------------------------- moves


@dataclass(frozen=True)
class Move:
    """One thing a reader does to a simulation: a button pressed (a move
    written as its name alone), a box ticked, or a choice from a menu
    (a folded part opened is a Disclosure)."""
    label: str
    value: str | None = None

    def make(self, sim):
        control = sim.get_by_label(self.label, exact=True)
        if self.value is None:
            control.click()
        else:
            control.select_option(self.value)


def tick(label):
    return Move(label)


def choose(label, value):
    return Move(label, value)


@dataclass(frozen=True)
class Disclosure:
    """A <details> the reader opens (or closes) by its summary's words."""
    summary: str

    def make(self, sim):
        sim.locator("summary", has_text=self.summary).click()


def disclose(summary):
    return Disclosure(summary)


def make_moves(sim, moves, after_each=lambda: None):
    """Make each move and wait for Python's answer; after_each() then
    looks at the page."""
    for move in moves:
        if isinstance(move, str):
            sim.get_by_role("button", name=move, exact=True).click()
        else:
            move.make(sim)
        answered(sim)
        after_each()


# ---------------------------------------------------------------- fitting


OVERFLOWING = """(sim) => [...sim.querySelectorAll(".sim-scroll, .sim-code")]
    .filter((box) => box.scrollWidth > box.clientWidth)
    .map((box) => [box.className, box.previousElementSibling?.className,
                   box.previousElementSibling?.hidden])"""
# Whatever is outside a scroll box must lie within the simulation's own box:
# an element that sticks out is cut or spills over the page.
STICKING_OUT = """(sim) => {
    const outer = sim.closest(".sim").getBoundingClientRect();
    return [...sim.querySelectorAll("*")]
        .filter((e) => !e.closest(".sim-scroll, .sim-code, .visually-hidden")
                       && e.getClientRects().length > 0)
        .filter((e) => { const r = e.getBoundingClientRect();
                         return r.left < outer.left - 0.5 || r.right > outer.right + 0.5; })
        .map((e) => `${e.tagName}.${e.getAttribute("class")}: ${e.textContent.slice(0, 30)}`);
}"""

# The page's own boxes (listings, transcripts, diagrams, examples: the
# simulations are checked apart): those whose lines are wider than they
# are, and of those the ones without the shades course.css gives a box to
# say so (background layers that stay at its edges, and covers that ride
# with its lines); and anything in the text outside the room between the
# contents and the window's edge.
BOXES_CUT_OFF = """() => {
    const main = document.querySelector("main");
    const toc = document.querySelector(".toc");
    const left = toc && toc.getClientRects().length ? toc.getBoundingClientRect().right : 0;
    const shown = [...main.querySelectorAll("*")]
        .filter((e) => !e.closest(".sim, .visually-hidden") && e.getClientRects().length > 0);
    const boxes = shown.filter((e) => ["auto", "scroll"].includes(getComputedStyle(e).overflowX));
    const name = (e) => `${e.tagName.toLowerCase()}.${e.className}: ${e.textContent.slice(0, 40)}`;
    const wide = boxes.filter((e) => e.scrollWidth > e.clientWidth + 1);
    const isBox = new Set(boxes);
    const inBox = (e) => { for (let up = e.parentElement; up !== main; up = up.parentElement) {
                               if (isBox.has(up)) return true; }
                           return false; };
    return {
        boxes: boxes.length,
        wide: wide.length,
        silent: wide.filter((e) => !getComputedStyle(e).backgroundAttachment
                                   .startsWith("local, local, scroll, scroll")).map(name),
        outside: shown.filter((e) => !inBox(e))
            .filter((e) => { const r = e.getBoundingClientRect();
                             return r.left < left - 0.5 || r.right > innerWidth + 0.5; })
            .map(name),
    };
}"""

# Checkboxes and radios smaller than WCAG 2.2's least target (2.5.8: 24 by
# 24 CSS pixels), too small to tap with a finger.
# How many lines an element's words take, for a paragraph, a span or a
# cell alike: the tops of their boxes, those a few pixels apart counted as
# two. A visually hidden part (a box of 1 px) is read out, never a line.
LINES = """(element) => {
  const range = document.createRange();
  range.selectNodeContents(element);
  const tops = [...range.getClientRects()].filter((box) => box.height > 1)
    .map((box) => box.top).sort((a, b) => a - b);
  return tops.filter((top, i) => i === 0 || top - tops[i - 1] > 4).length;
}"""

TOO_SMALL_TO_TAP = """(sim) => [...sim.querySelectorAll("input[type=checkbox], input[type=radio]")]
    .filter((box) => box.getClientRects().length > 0)
    .map((box) => [box.id || box.name, box.getBoundingClientRect().width,
                   box.getBoundingClientRect().height])
    .filter(([, width, height]) => width < 24 || height < 24)"""


OUTSIDE = """(svg) => [...svg.querySelectorAll("text")].filter((text) => {
    const box = text.getBBox();
    return box.x < 0 || box.x + box.width > svg.width.baseVal.value;
}).map((text) => text.textContent)"""
WIDER = "(svg) => svg.getBoundingClientRect().width > svg.parentElement.clientWidth"


def of_python(url):
    """Whether a URL is part of what starting Python fetches: Pyodide's files
    and the course's code and standard library."""
    return "/pyodide/" in url or url.endswith(("/course.zip", "/stdlib.zip"))


def python_requests(page):
    """The URLs of what the page has fetched of Python, in order (a dedicated
    worker's requests are the page's)."""
    fetched = []
    page.on("request", lambda request: of_python(request.url) and fetched.append(request.url))
    return fetched


def follows_the_theme_and_keeps_still(page, looks):
    """looks() gives a mark's colour, its words' colour and its animation.
    In the light theme with motion allowed the two colours match and it
    moves; in the dark theme with less motion asked for they still match,
    but are another colour, and nothing moves."""
    mark, words, motion = looks()
    assert mark == words and motion != "none"
    page.emulate_media(color_scheme="dark", reduced_motion="reduce")
    dark_mark, dark_words, still = looks()
    assert dark_mark == dark_words != mark and still == "none"
