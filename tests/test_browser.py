"""The built site in a real browser: Debian's Chromium, driven by Playwright."""
import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
CHAPTER = "the-waiter-who-cooks.html"        # has a listing, transcripts and answers
PAGES = ["index.html", CHAPTER, "glossary.html", "all.html"]


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    if not CHROMIUM.exists():
        pytest.fail("Chromium is missing: `apt-get install chromium` "
                    "(make check installs it when it runs as root)")
    # Playwright's own browser cannot be downloaded here; this machine's
    # closed network also refuses Chromium's background connections.
    return {**browser_type_launch_args, "executable_path": str(CHROMIUM),
            "args": ["--disable-background-networking", "--disable-component-update",
                     "--no-first-run", "--disable-sync"]}


@pytest.fixture
def watched(page, site_url):
    """A page whose console errors and off-site requests are collected."""
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


@pytest.mark.parametrize("name", PAGES)
def test_pages_load_without_errors_or_outside_requests(watched, site_url, name):
    watched.goto(f"{site_url}/{name}")
    watched.wait_for_load_state("networkidle")
    assert watched.locator("main h1").count() >= 1
    assert watched.problems == []


def serious_violations(page, where="document"):
    """axe's serious and critical findings on the page, or within the
    elements a CSS selector names ("document": the whole page)."""
    page.add_script_tag(path=str(AXE))
    return page.evaluate("""async (where) => (await axe.run(where === "document" ? document
                                                           : where)).violations
        .filter(v => v.impact === 'serious' || v.impact === 'critical')
        .map(v => `${v.id}: ${v.nodes.map(n => n.target.join(' ')).slice(0, 3)}`)""", where)


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("name", PAGES)
def test_no_serious_accessibility_violations(browser, site_url, name, scheme):
    if not AXE.exists():
        pytest.fail("axe-core is missing: run `npm ci` (make check does)")
    # The page's CSP rightly refuses injected scripts; axe is a guest here.
    context = browser.new_context(color_scheme=scheme, bypass_csp=True)
    page = context.new_page()
    page.goto(f"{site_url}/{name}")
    violations = serious_violations(page)
    context.close()
    assert violations == []


def background(page):
    return page.evaluate("getComputedStyle(document.body).backgroundColor")


def test_the_theme_toggle_switches_and_is_remembered(browser, site_url):
    context = browser.new_context(color_scheme="light")
    page = context.new_page()
    page.goto(f"{site_url}/{CHAPTER}")
    toggle = page.get_by_role("button", name="Dark theme")
    light = background(page)
    assert toggle.get_attribute("aria-pressed") == "false"
    toggle.click()
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    assert toggle.get_attribute("aria-pressed") == "true"
    dark = background(page)
    assert dark != light
    page.goto(f"{site_url}/index.html")          # another page, same choice
    assert background(page) == dark
    page.get_by_role("button", name="Dark theme").click()
    assert background(page) == light
    context.close()


def test_an_answer_stays_folded_until_asked_for(watched, site_url):
    watched.goto(f"{site_url}/{CHAPTER}")
    check = watched.locator(".check").first
    answer = check.locator("details p").first
    assert not answer.is_visible()
    check.get_by_text("Show the answer").click()
    assert answer.is_visible()
    assert "waiting for their account" in answer.inner_text()


def test_answers_are_unfolded_in_print(watched, site_url):
    watched.goto(f"{site_url}/{CHAPTER}")
    watched.emulate_media(media="print")
    assert watched.locator(".check details p").first.is_visible()


def test_prompts_and_line_numbers_cannot_be_selected(watched, site_url):
    watched.goto(f"{site_url}/{CHAPTER}")
    prompt = watched.locator("pre.console .prompt").first
    assert prompt.evaluate("e => getComputedStyle(e).userSelect") == "none"
    number = watched.locator(".listing pre code > span").first.evaluate(
        "e => [getComputedStyle(e, '::before').content, getComputedStyle(e, '::before').userSelect]")
    assert number == ["counter(line)", "none"]
    # copying a listing gives the code alone, as in the file
    copied = watched.locator(".listing pre code").first.evaluate("e => e.innerText")
    assert copied.startswith("# Exercise 1: The Waiter Who Cooks.\n")


def test_diagrams_keep_their_columns(watched, site_url):
    """In the site's own font, every character of every diagram is one column wide."""
    watched.goto(f"{site_url}/all.html")
    uneven = watched.evaluate("""async () => {
        await document.fonts.ready;
        const pre = document.querySelector('pre.diagram');
        const style = getComputedStyle(pre);
        const font = `${style.fontSize} "Course Mono"`;
        if (!(await document.fonts.load(font)).length) return ['Course Mono did not load'];
        const canvas = document.createElement('canvas').getContext('2d');
        canvas.font = font;
        const cell = canvas.measureText('M').width;
        const out = [];
        for (const pre of document.querySelectorAll('pre.diagram')) {
            for (const line of pre.innerText.split('\\n')) {
                const width = canvas.measureText(line).width;
                if (Math.abs(width - cell * [...line].length) > 0.5) out.push(line);
            }
        }
        return out;
    }""")
    assert watched.locator("pre.diagram").count() > 3
    assert uneven == []


def test_a_phone_gets_a_contents_menu_and_no_sideways_scrolling(browser, site_url):
    context = browser.new_context(viewport={"width": 375, "height": 740})
    page = context.new_page()
    page.goto(f"{site_url}/{CHAPTER}")
    toc = page.locator("#toc")
    assert not toc.is_visible()
    page.get_by_role("button", name="Contents").click()
    assert toc.is_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    context.close()


def test_the_skip_link_is_the_first_stop(watched, site_url):
    watched.goto(f"{site_url}/{CHAPTER}")
    watched.keyboard.press("Tab")
    assert watched.evaluate("document.activeElement.textContent") == "Skip to the content"


# ---------------------------------------------------------------- simulations

BOOT_SECONDS = 60                # Pyodide boots in a few; a slow machine gets room
# Every other wait is for something the page shows once its Python has
# answered: on a busy machine that can take far longer than Playwright's 5 s.
expect.set_options(timeout=30_000)


def start_simulation(page, site_url, chapter, name, keyboard=False):
    page.goto(f"{site_url}/{chapter}")
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


def test_the_race_stepper_by_keyboard_alone(watched, site_url):
    sim = start_simulation(watched, site_url, "the-worker-where-work-happens.html", "race",
                           keyboard=True)
    expect(task_done(sim, "duplicate")).not_to_have_class("done")

    def press(name):
        sim.get_by_role("button", name=name).focus()
        watched.keyboard.press("Enter")

    def run_to_the_end(order):
        for worker in order:
            if sim.get_by_role("button", name=f"Step worker {worker}").is_enabled():
                press(f"Step worker {worker}")
        expect(sim.get_by_role("button", name="Step worker 1")).to_be_disabled()
        expect(sim.get_by_role("button", name="Step worker 2")).to_be_disabled()

    # both look before either marks: the naive claim sends job 1 twice
    run_to_the_end([1, 2, 1, 2] + [1, 2] * 4)
    expect(sim.locator(".sim-outbox li.duplicate")).to_contain_text("⚠ duplicate")
    expect(sim.locator(".sim-result")).to_have_text("2 emails for 1 job: job 1 was sent twice")
    expect(task_done(sim, "duplicate")).to_have_class("done")
    # the same order with the atomic claim sends it once
    sim.get_by_label("the atomic claim").focus()
    watched.keyboard.press("Space")
    expect(sim.locator(".sim-result")).not_to_contain_text("2 emails")
    run_to_the_end([1, 2] * 5)
    expect(sim.locator(".sim-result")).to_have_text("1 email for 1 job")
    expect(task_done(sim, "atomic-safe")).to_have_class("done")
    press("Try every interleaving")
    expect(sim.locator(".sim-every")).to_contain_text("the atomic claim: 0 of", timeout=30000)
    assert re.search(r"the naive claim: [1-9]\d* of \d+ orders send an email twice",
                     sim.locator(".sim-every").inner_text())
    assert watched.problems == []


def test_a_speed_chosen_while_playing_applies_at_once(watched, site_url):
    """On the page's own clock, held still: Play at 1× (a step every 700 ms),
    then 3× (every 233 ms). The first step comes within 300 ms."""
    watched.clock.install()
    sim = start_simulation(watched, site_url, "the-worker-where-work-happens.html", "race")
    watched.clock.pause_at(watched.evaluate("Date.now()") + 10)
    said = sim.locator("[aria-live]")
    before = said.inner_text()                   # neither worker has started
    sim.get_by_role("button", name="Play a random order").click()
    sim.get_by_label("Speed").select_option("3")
    watched.clock.run_for(300)
    expect(said, "a step within 300 ms").not_to_have_text(before)
    assert watched.problems == []


def test_the_race_steppers_two_claims_are_one_choice(watched, site_url):
    """The claims are one group of radio buttons: one tab stop, the arrow
    keys move the choice, and choosing either, in any order, takes effect."""
    sim = start_simulation(watched, site_url, "the-worker-where-work-happens.html", "race")
    naive, atomic = (sim.get_by_role("radio", name=f"the {claim} claim")
                     for claim in ("naive", "atomic"))
    code = sim.locator('.race-picture g.race-worker[data-worker="1"]')   # worker 1's code
    naive_code = code.text_content()
    assert "def claim_naive(db):" in naive_code
    atomic.check()
    expect(naive).not_to_be_checked()
    expect(code).not_to_have_text(naive_code)
    expect(code).to_contain_text("def claim_atomic(db):")
    watched.keyboard.press("ArrowLeft")               # atomic has the focus
    expect(naive).to_be_checked()
    expect(atomic).not_to_be_checked()
    expect(code).to_have_text(naive_code)
    watched.keyboard.press("Tab")                      # past atomic, to the next control
    expect(sim.get_by_role("button", name="Step worker 1")).to_be_focused()
    assert watched.problems == []


def test_a_started_simulation_has_the_focus_and_no_fallback_text(watched, site_url):
    """A reader who starts a simulation from the keyboard keeps their place:
    the focus goes to its first control, not back to the top of the page. The
    paragraph for readers without JavaScript goes once it runs."""
    watched.goto(f"{site_url}/all.html")
    for name in ("race", "killable-queue", "payment", "crash-timing"):
        sim = watched.locator(f'.sim-mount[data-sim="{name}"]')
        fallback = watched.locator(f'.sim[data-sim="{name}"] > p')
        expect(fallback.first).to_be_visible()
        assert fallback.count() >= 1
        sim.get_by_role("button", name="Start the simulation").focus()
        watched.keyboard.press("Enter")
        expect(sim).to_have_attribute("data-state", "ready", timeout=BOOT_SECONDS * 1000)
        expect(sim.locator(".sim-body :is(button, input, select)").first).to_be_focused()
        expect(sim.locator("input:invalid"),
               "every box to open on a value it takes").to_have_count(0)
        for paragraph in fallback.all():
            expect(paragraph).to_be_hidden()
    assert watched.problems == []


# What each simulation is given to do before its layout is measured: enough
# to fill its tables and code.
FILL = {"killable-queue": ["Add a job", "Add a job", "Step to the next event"],
        "race": ["Step worker 1"], "payment": ["Run all charges"],
        "crash-timing": ["Run", "Show every crash and protection"], "herd": ["New seed"],
        "retry-budget": []}                 # its controls are boxes and sliders

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


@pytest.mark.parametrize("width", [1280, 390])
def test_the_simulations_fit_or_say_they_scroll_sideways(browser, site_url, width):
    """At 1280 px a simulation takes the room beside the reading column, and
    nothing in it is cut (it used to lose the jobs table's last column); on a
    phone, a table or code that has to scroll sideways says so above it. No
    simulation is wider than the window, nor reaches under the contents, and
    nothing in it sticks out of its box."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.goto(f"{site_url}/all.html")
    toc = page.locator("nav.toc, .toc").first.bounding_box() if width > 1000 else None
    scrolled = 0
    for name, moves in FILL.items():
        sim = page.locator(f'.sim-mount[data-sim="{name}"]')
        sim.get_by_role("button", name="Start the simulation").click()
        expect(sim).to_have_attribute("data-state", "ready", timeout=BOOT_SECONDS * 1000)
        for move in moves:
            sim.get_by_role("button", name=move, exact=True).click()
            answered(sim)
        box = page.locator(f'.sim[data-sim="{name}"]').bounding_box()
        assert 0 <= box["x"] and box["x"] + box["width"] <= width, (name, box)
        assert sim.evaluate(STICKING_OUT) == [], (name, width)
        overflowing = sim.evaluate(OVERFLOWING)
        if width == 1280:
            assert toc["x"] + toc["width"] <= box["x"], (name, box, toc)
            assert overflowing == [], name
        else:
            assert all(note == "sim-sideways" and not hidden
                       for _, note, hidden in overflowing), (name, overflowing)
            scrolled += len(overflowing)
    context.close()
    # the jobs table, the matrix (the race's picture stacks its columns instead)
    assert width == 1280 or scrolled >= 2


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


def test_python_starts_loading_when_a_simulation_comes_near(watched, site_url):
    """Python is not fetched while the reader is far from any simulation; it
    starts loading, before any click, once one is within a screen of the view."""
    fetched = python_requests(watched)
    watched.goto(f"{site_url}/{CHAPTER_8}")
    watched.wait_for_load_state("networkidle")
    assert fetched == [], "Python was fetched with no simulation near the view"
    sim = watched.locator('.sim-mount[data-sim="crash-timing"]')
    with watched.expect_request("**/pyodide.asm.wasm", timeout=BOOT_SECONDS * 1000):
        sim.scroll_into_view_if_needed()
    sim.get_by_role("button", name="Start the simulation").click()
    expect(sim).to_have_attribute("data-state", "ready", timeout=BOOT_SECONDS * 1000)
    assert watched.problems == []


def test_python_waits_for_start_when_the_browser_saves_data(watched, site_url):
    """With Save-Data on, nothing of Python is fetched until Start."""
    watched.add_init_script("""Object.defineProperty(Navigator.prototype, "connection",
        { get: () => ({ saveData: true }) });""")
    fetched = python_requests(watched)
    watched.goto(f"{site_url}/{CHAPTER_8}")
    sim = watched.locator('.sim-mount[data-sim="crash-timing"]')
    sim.scroll_into_view_if_needed()
    watched.wait_for_load_state("networkidle")
    watched.evaluate("() => new Promise((done) => requestAnimationFrame(() => "
                     "requestAnimationFrame(done)))")   # the observer has had its turn
    watched.wait_for_load_state("networkidle")
    assert fetched == []
    sim.get_by_role("button", name="Start the simulation").click()
    expect(sim).to_have_attribute("data-state", "ready", timeout=BOOT_SECONDS * 1000)
    assert any(url.endswith("/pyodide.asm.wasm") for url in fetched)
    assert watched.problems == []


def test_the_start_control_says_how_much_python_downloads(watched, site_url):
    """The size beside Start is what starting Python fetches, to a tenth of a MB."""
    responses = []
    watched.on("response", lambda response: of_python(response.url) and responses.append(response))
    sim = start_simulation(watched, site_url, CHAPTER_8, "crash-timing")
    said = watched.locator("#" + sim.locator(".sim-start").get_attribute("aria-describedby"))
    megabytes = float(re.fullmatch(r"It runs Python in your browser: a download of "
                                   r"([\d.]+) MB\.", said.text_content()).group(1))
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
    sim = start_simulation(watched, site_url, CHAPTER_8, "crash-timing")
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


def test_no_simulation_needs_more_than_the_trimmed_standard_library(watched, site_url):
    """Every simulation, driven through its buttons, finds every module it
    imports in the standard library the build trimmed: Pyodide's whole one
    (the fallback for a module the trimmed one lacks) is never fetched."""
    fetched = python_requests(watched)
    watched.goto(f"{site_url}/all.html")
    moves = {"race": ["Step worker 1", "Step worker 2", "Try every interleaving"],
             "killable-queue": ["Add a job", "Step to the next event", "Kill worker 1"],
             "crash-timing": ["Run", "Step", "Show every crash and protection"],
             "payment": ["Run all charges", "New seed", "Step one attempt"],
             "o7": ["Next step of O7", "Next step of O7"], "herd": ["New seed"],
             "retry-budget": []}
    for name, buttons in moves.items():
        sim = watched.locator(f'.sim-mount[data-sim="{name}"]')
        sim.get_by_role("button", name="Start the simulation").click()
        expect(sim).to_have_attribute("data-state", "ready", timeout=BOOT_SECONDS * 1000)
        for button in buttons:
            sim.get_by_role("button", name=button, exact=True).click()
            answered(sim)
        expect(sim.locator(".sim-status").first).not_to_contain_text("did not work")
    assert any(url.endswith("/stdlib.zip") for url in fetched)
    assert not any(url.endswith("/python_stdlib.zip") for url in fetched), \
        "a simulation needed a module the trimmed standard library lacks"
    assert watched.problems == []


def test_the_killable_queues_buttons_stay_put_while_the_clock_moves(watched, site_url):
    """The Kill button a reader is on is the same button after every redraw:
    a click made while the clock moves is not lost with a replaced button,
    nor is the focus. Pressed, it becomes that worker's Restart button."""
    sim = start_simulation(watched, site_url, "when-workers-die-leases.html", "killable-queue")
    kill = sim.get_by_role("button", name="Kill worker 1").element_handle()
    kill.focus()
    sim.get_by_role("button", name="Add a job").dispatch_event("click")    # the focus stays
    for _ in range(3):
        sim.get_by_role("button", name="Step to the next event").dispatch_event("click")
    answered(sim)
    expect(sim.locator(".sim-clock")).not_to_contain_text("time 0.0 s")
    assert kill.evaluate("button => button.isConnected && document.activeElement === button")
    watched.keyboard.press("Enter")
    expect(sim.get_by_role("button", name="Restart worker 1")).to_be_focused()
    assert watched.problems == []


def test_the_killable_queue_refuses_a_lease_past_its_box(watched, site_url):
    sim = start_simulation(watched, site_url, "when-workers-die-leases.html", "killable-queue")
    lease = sim.get_by_label("Lease (s)")
    lease.fill("50")                                   # the box says 1 to 30
    lease.press("Enter")
    answered(sim)
    expect(sim.locator(".sim-clock")).to_contain_text("lease 5 s")
    assert lease.evaluate("box => box.matches(':invalid')")
    lease.fill("30")
    lease.press("Enter")
    expect(sim.locator(".sim-clock")).to_contain_text("lease 30 s")
    assert watched.problems == []


def test_the_killable_queue_kill_takeover_duplicate(watched, site_url):
    sim = start_simulation(watched, site_url, "when-workers-die-leases.html", "killable-queue")
    sim.get_by_role("button", name="Add a job").click()
    step = sim.get_by_role("button", name="Step to the next event")
    worker_1 = sim.locator("tbody tr").filter(has_text="worker 1").first
    for _ in range(10):                     # until worker 1 has sent, but not acknowledged
        if "sent" in worker_1.inner_text():
            break
        step.click()
        answered(sim)
    expect(worker_1).to_contain_text("sent")
    sim.get_by_role("button", name="Kill worker 1").click()
    expect(task_done(sim, "die-holding")).to_have_class("done")
    expect(sim.locator("[aria-live]")).to_contain_text("killed")
    expect(sim.get_by_role("button", name="Restart worker 1")).to_be_visible()
    for _ in range(20):                     # the lease runs out; another worker takes over
        if "done" in (task_done(sim, "duplicate").get_attribute("class") or ""):
            break
        step.click()
        answered(sim)
    expect(task_done(sim, "takeover")).to_have_class("done")
    expect(task_done(sim, "duplicate")).to_have_class("done")
    expect(sim.locator(".sim-outbox li")).to_have_count(2)
    expect(sim.locator(".sim-outbox li.duplicate")).to_contain_text("⚠ duplicate")
    # restart, change the lease, and play the clock for a moment
    sim.get_by_role("button", name="Restart worker 1").click()
    expect(sim.get_by_role("button", name="Kill worker 1")).to_be_visible()
    sim.get_by_label("Lease (s)").fill("2")
    sim.get_by_label("Lease (s)").press("Enter")        # a changed lease applies at once
    expect(sim.locator(".sim-clock")).to_contain_text("lease 2")
    before = sim.locator(".sim-clock").inner_text()
    sim.get_by_role("button", name="Play").click()
    expect(sim.locator(".sim-clock"), "the clock to move while playing").not_to_have_text(before)
    sim.get_by_role("button", name="Pause").click()
    assert watched.problems == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_started_simulations_have_no_serious_accessibility_violations(browser, site_url,
                                                                      scheme):
    """All four, started on the one page that holds them all (one Python)."""
    context = browser.new_context(bypass_csp=True, color_scheme=scheme)   # for axe, as above
    page = context.new_page()
    page.goto(f"{site_url}/all.html")
    first_moves = {"race": "Step worker 1", "killable-queue": "Add a job",
                   "crash-timing": "Run", "payment": "Run all charges", "herd": "New seed",
                   "retry-budget": None}
    for name, move in first_moves.items():
        sim = page.locator(f'.sim-mount[data-sim="{name}"]')
        sim.get_by_role("button", name="Start the simulation").click()
        expect(sim).to_have_attribute("data-state", "ready", timeout=BOOT_SECONDS * 1000)
        if move:
            sim.get_by_role("button", name=move, exact=True).click()
    violations = serious_violations(page, ".sim")
    context.close()
    assert violations == []


def test_a_boot_that_never_ends_gives_up_with_a_message(page, site_url):
    """Pyodide's loader waits for ever when its wasm never arrives; the page
    gives up after its boot timeout, says so, and offers to start again."""
    page.clock.install()
    page.route("**/pyodide.asm.wasm", lambda route: None)   # never answered
    page.goto(f"{site_url}/the-worker-where-work-happens.html")
    sim = page.locator('.sim-mount[data-sim="race"]')
    # until the worker has asked for the wasm, which the route holds back
    with page.expect_request("**/pyodide.asm.wasm", timeout=BOOT_SECONDS * 1000):
        sim.get_by_role("button", name="Start the simulation").click()
        expect(sim).to_have_attribute("data-state", "loading")
    page.clock.fast_forward(61_000)
    expect(sim).to_have_attribute("data-state", "error")
    expect(sim.locator(".sim-status")).to_contain_text("Python did not start within 60 s")
    expect(sim.get_by_role("button", name="Start again")).to_be_visible()


def test_the_race_stepper_plays_a_seeded_order_again_the_same_way(watched, site_url):
    sim = start_simulation(watched, site_url, "the-worker-where-work-happens.html", "race")
    sim.get_by_label("Speed").select_option("3")

    def play_to_the_end():
        sim.get_by_role("button", name="Play a random order").click()
        for worker in (1, 2):
            expect(sim.get_by_role("button", name=f"Step worker {worker}")).to_be_disabled(
                timeout=20000)
        # The last step's answer may still be on its way; until it is, the
        # page would drop a click on Reset (issue 19 fixes that).
        answered(sim)
        return sim.locator(".sim-outbox").inner_text(), sim.locator(".sim-result").inner_text()

    expect(sim.locator(".sim-clock")).to_have_text("seed 1")
    first = play_to_the_end()
    sim.get_by_role("button", name="Reset").click()
    expect(sim.get_by_role("button", name="Step worker 1")).to_be_enabled()
    assert play_to_the_end() == first
    sim.get_by_role("button", name="Another order").click()
    expect(sim.locator(".sim-clock")).to_have_text("seed 2")
    assert watched.problems == []


CHAPTER_8 = "idempotency-making-repeats-harmless.html"
CHAPTER_10 = "one-charge-exactly-once.html"
CHAPTER_11 = "limits-bounding-the-work.html"


def test_the_crash_timing_explorer_tasks_and_matrix(watched, site_url):
    sim = start_simulation(watched, site_url, CHAPTER_8, "crash-timing")

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
    sim = start_simulation(watched, site_url, CHAPTER_8, "crash-timing")
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
    sim = start_simulation(watched, site_url, CHAPTER_8, "crash-timing")
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


def test_actions_made_while_python_answers_are_not_lost(watched, site_url):
    """A reader who picks a protection and a crash and presses Run, faster
    than Python answers: each call waits for the one before, and the run is
    the one chosen, not dropped nor run with the old choice."""
    sim = start_simulation(watched, site_url, CHAPTER_8, "crash-timing")
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


def test_the_payment_simulator_tasks(watched, site_url):
    sim = start_simulation(watched, site_url, CHAPTER_8, "payment")

    def run_all(keys, attempts="5"):
        sim.get_by_label("Keys", exact=True).select_option(keys)
        sim.get_by_label("Attempts", exact=True).fill(attempts)
        sim.get_by_role("button", name="Run all charges").click()
        answered(sim)
        expect(sim.locator(".sim-result")).to_contain_text("she has paid")

    run_all("fresh")                                    # seed 1 loses replies
    expect(sim.locator(".sim-result")).to_contain_text("more")
    expect(task_done(sim, "overcharge")).to_have_class("done")
    run_all("stable")
    expect(sim.locator(".sim-result")).to_contain_text(
        "Alice should have paid $50.00; she has paid $50.00")
    expect(task_done(sim, "impossible")).to_have_class("done")
    run_all("stable", attempts="1")
    expect(sim.locator("tr.dead").first).to_contain_text("dead")
    expect(task_done(sim, "dead")).to_have_class("done")
    expect(sim.get_by_role("button", name="Next step of O7")).to_have_count(0)   # Chapter 10's
    assert watched.problems == []


def test_the_payment_simulator_applies_a_changed_control_at_once(watched, site_url):
    """A control the reader changes starts the charges afresh with it: no
    result is left on the page that the controls no longer describe."""
    sim = start_simulation(watched, site_url, CHAPTER_8, "payment")
    balance, timeline = sim.locator(".sim-result"), sim.locator(".sim-events li")
    sim.get_by_role("button", name="Run all charges").click()
    expect(balance).to_contain_text("$30.00 more")            # seed 1, no key
    sim.get_by_label("Keys", exact=True).select_option("stable")
    expect(timeline).to_have_count(0)
    expect(balance).to_have_text("Alice should have paid $0.00; she has paid $0.00. "
                                 "Alice paid $0.00 for orders worth $0.00: right")
    sim.get_by_role("button", name="Step one attempt").click()
    expect(timeline).to_have_count(1)
    attempts = sim.get_by_label("Attempts", exact=True)
    attempts.fill("1")
    attempts.press("Enter")
    expect(timeline).to_have_count(0)
    sim.get_by_role("button", name="Play").click()
    expect(balance).to_contain_text("she has paid")
    expect(sim.locator("tr.dead").first, "attempts of 1 to leave a job dead").to_be_visible()
    assert watched.problems == []


def test_the_o7_story_in_chapter_10(watched, site_url):
    sim = start_simulation(watched, site_url, CHAPTER_10, "o7")
    next_step = sim.get_by_role("button", name="Next step of O7")
    while next_step.is_enabled():
        next_step.click()
        answered(sim)
    story = sim.locator(".sim-story")
    expect(story).to_contain_text("C9")
    expect(task_done(sim, "reconcile")).to_have_class("done")
    sim.get_by_label("Trust keys past their 24 h").check()
    sim.get_by_role("button", name="Start O7 over").click()
    expect(next_step).to_be_enabled()
    while next_step.is_enabled():
        next_step.click()
        answered(sim)
    expect(task_done(sim, "blind")).to_have_class("done")
    assert watched.problems == []


# ---- picture: killable queue

def lane(sim, worker):
    """The picture's lane of worker number `worker` (from 0)."""
    return sim.locator(f'.kq-picture svg .kq-lane[data-worker="{worker}"]')


def press(sim, *names):
    for name in names:
        sim.get_by_role("button", name=name, exact=True).click()
        answered(sim)


def width_of(locator):
    return float(locator.get_attribute("width"))


def test_the_killable_queue_picture_shrinks_a_lease_then_marks_it_expired(watched, site_url):
    sim = start_simulation(watched, site_url, "when-workers-die-leases.html", "killable-queue")
    picture = sim.locator(".kq-picture svg")
    expect(picture).to_have_attribute("role", "img")
    expect(lane(sim, 0)).to_contain_text("worker 1")
    expect(sim.locator(".kq-picture svg .kq-lane")).to_have_count(3)
    press(sim, "Add a job", "Step to the next event")        # worker 1 claims job 1 at 0 s
    lease = lane(sim, 0).locator(".kq-lease-left")
    expect(lease).to_have_count(1)
    expect(lane(sim, 0)).to_contain_text("5.0 s left")
    claimed = width_of(lease)
    press(sim, "Step to the next event")                      # 2 s later, it has sent
    expect(lane(sim, 0)).to_contain_text("3.0 s left")
    sent = width_of(lease)
    assert 0 < sent < claimed
    assert sent / claimed == pytest.approx(3 / 5, abs=0.02)
    expect(lane(sim, 0).locator(".kq-danger")).to_have_count(1)   # sent, not acknowledged
    expect(lane(sim, 0).locator(".kq-expired")).to_have_count(0)
    press(sim, "Kill worker 1", "Step to the next event")    # the lease runs out at 5 s
    expect(sim.locator(".sim-clock")).to_contain_text("time 5.0 s")
    expect(lane(sim, 0).locator(".kq-lease-left")).to_have_count(0)
    expect(lane(sim, 0).locator(".kq-expired")).to_contain_text("lease ran out")
    expect(picture.locator("desc")).to_contain_text("lease ran out")
    assert watched.problems == []


def test_the_killable_queue_picture_draws_a_kill_on_the_workers_lane(watched, site_url):
    sim = start_simulation(watched, site_url, "when-workers-die-leases.html", "killable-queue")
    press(sim, "Add a job", "Step to the next event", "Step to the next event",
          "Kill worker 1")                                    # killed at 2 s, after sending
    kill = lane(sim, 0).locator(".kq-kill")
    expect(kill).to_have_count(1)
    expect(kill).to_contain_text("killed")
    expect(kill.locator(".kq-cross")).to_have_count(1)       # a shape, not a colour
    for other in (1, 2):
        expect(lane(sim, other).locator(".kq-kill")).to_have_count(0)
    # Job 1's bar, its claim held, ends where the worker died.
    held = lane(sim, 0).locator(".kq-claim")
    end = float(held.get_attribute("x")) + width_of(held)
    assert float(kill.get_attribute("data-x")) == pytest.approx(end, abs=0.1)
    expect(sim.locator(".kq-picture svg desc")).to_contain_text("worker 1 is dead")
    # Restarted at the same moment: both marks show, and no words overlap.
    press(sim, "Restart worker 1")
    restart = lane(sim, 0).locator(".kq-restart")
    expect(restart).to_contain_text("restarted")
    expect(kill).to_have_count(1)
    boxes = lane(sim, 0).locator("text").evaluate_all(
        "texts => texts.map(t => t.getBoundingClientRect()).filter(b => b.width > 0)"
        ".map(b => [b.left, b.top, b.right, b.bottom])")
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            apart = a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1]
            assert apart, (a, b)
    assert watched.problems == []


def test_the_killable_queue_picture_marks_the_duplicate_by_shape_and_word(watched, site_url):
    sim = start_simulation(watched, site_url, "when-workers-die-leases.html", "killable-queue")
    press(sim, "Add a job", "Step to the next event", "Step to the next event")
    expect(sim.locator(".kq-picture svg .kq-duplicate")).to_have_count(0)
    press(sim, "Kill worker 1")                               # after sending, before the ack
    step = sim.get_by_role("button", name="Step to the next event")
    for _ in range(10):                    # the lease runs out; worker 2 sends it again
        if "done" in (task_done(sim, "duplicate").get_attribute("class") or ""):
            break
        step.click()
        answered(sim)
    duplicate = lane(sim, 1).locator(".kq-duplicate")
    expect(duplicate).to_have_count(1)
    expect(duplicate.locator("polygon")).to_have_count(1)    # a warning triangle
    expect(duplicate).to_contain_text("duplicate")
    expect(lane(sim, 0).locator(".kq-duplicate")).to_have_count(0)  # the first send was not
    expect(sim.locator(".kq-picture svg desc")).to_contain_text("duplicate")
    assert watched.problems == []


def test_the_killable_queue_picture_fits_a_phone(browser, site_url):
    """On a 390 px phone the picture is drawn to the width it has: nothing
    of it reaches past its box, and the lease left still has its words."""
    context = browser.new_context(viewport={"width": 390, "height": 800})
    page = context.new_page()
    sim = start_simulation(page, site_url, "when-workers-die-leases.html", "killable-queue")
    press(sim, "Add a job", "Step to the next event")
    frame = sim.locator(".kq-picture").bounding_box()
    drawn = sim.locator(".kq-picture svg").bounding_box()
    assert frame["x"] <= drawn["x"] and drawn["x"] + drawn["width"] <= frame["x"] + frame["width"]
    words = lane(sim, 0).get_by_text("5.0 s left").bounding_box()
    assert words["x"] + words["width"] <= drawn["x"] + drawn["width"]
    context.close()


# ---- picture: crash timing

def crash_marker(sim):
    return sim.get_by_role("slider", name="When the worker dies")


def test_the_crash_timing_picture_draws_the_steps_and_every_crash_points_outcome(watched,
                                                                              site_url):
    """The job's life as a line of stations, one per step of the chosen
    protection's code; on it, each crash point drawn by the shape of its
    outcome; and an image whose name and description say it all in words."""
    sim = start_simulation(watched, site_url, CHAPTER_8, "crash-timing")
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
    sim = start_simulation(watched, site_url, CHAPTER_8, "crash-timing")
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
    sim = start_simulation(watched, site_url, CHAPTER_8, "crash-timing")
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
    sim = start_simulation(watched, site_url, CHAPTER_8, "crash-timing")
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
    sim = start_simulation(watched, site_url, CHAPTER_8, "crash-timing")
    glide = "(marker) => getComputedStyle(marker).transitionDuration"
    assert crash_marker(sim).evaluate(glide) != "0s"
    watched.emulate_media(reduced_motion="reduce")
    assert crash_marker(sim).evaluate(glide) == "0s"
    marker = crash_marker(sim)
    marker.focus()
    watched.keyboard.press("Home")                         # redrawn in place, at once
    expect(marker).to_have_attribute("aria-valuenow", "0")
    assert watched.problems == []


# ---- picture: payment

ATTEMPTS = """(svg) => [...svg.querySelectorAll(".pay-attempt")].map((mark) => ({
    job: mark.closest(".pay-lane").dataset.job, event: mark.dataset.event,
    x: mark.getBBox().x, label: mark.querySelector(".pay-label")?.textContent,
    took: !!mark.querySelector(".pay-took"), cross: !!mark.querySelector(".pay-cross"),
    broken: !!mark.querySelector(".pay-broken"), tick: !!mark.querySelector(".pay-tick")}))"""


def test_the_payment_picture_puts_each_attempt_on_the_time_axis(watched, site_url):
    """Seed 1 loses job 1's first reply after the bank took the money: a
    filled mark (money taken) with its reply broken on the way back, then a
    wait as long as the text says, and every attempt after it in its lane,
    each drawn by its shape and named in words."""
    sim = start_simulation(watched, site_url, CHAPTER_8, "payment")
    picture = sim.locator("svg.pay-timeline")
    expect(picture).to_have_attribute("role", "img")
    sim.get_by_role("button", name="Step one attempt").click()
    lane = picture.locator('.pay-lane[data-job="1"]')
    expect(lane.locator(".pay-attempt")).to_have_count(1)
    first = lane.locator(".pay-attempt")
    expect(first).to_have_attribute("data-event", "lost reply")
    expect(first.locator(".pay-broken")).to_have_count(1)
    expect(first.locator(".pay-took")).to_have_count(1)
    expect(first.locator(".pay-label")).to_have_text("reply lost")
    wait = re.search(r"retry in (\d+\.\d\d) s", sim.locator(".sim-events li").first.text_content())
    expect(lane.locator(".pay-wait-label")).to_have_text(f"{wait[1]} s")
    expect(picture).to_have_attribute("aria-label", re.compile(r"job 1.*reply lost"))
    sim.get_by_role("button", name="Run all charges").click()
    expect(sim.locator(".sim-result")).to_contain_text("more")
    answered(sim)
    marks = picture.evaluate(ATTEMPTS)
    assert len(marks) == sim.locator(".sim-events li").count() > 5
    shapes = {"lost request": (False, True, False, False, "request lost"),
              "lost reply": (True, False, True, False, "reply lost"),
              "approved": (True, False, False, True, "charged")}
    assert {mark["event"] for mark in marks} == set(shapes)
    for mark in marks:
        assert (mark["took"], mark["cross"], mark["broken"], mark["tick"],
                mark["label"]) == shapes[mark["event"]], mark
    for job in {mark["job"] for mark in marks}:
        xs = [mark["x"] for mark in marks if mark["job"] == job]
        assert xs == sorted(xs) and len(set(xs)) == len(xs), (job, xs)
    expect(sim.locator(".pay-legend")).to_contain_text("request lost")
    assert watched.problems == []


def bar_width(sim, bar, part):
    parts = sim.locator(f'svg.pay-bars [data-bar="{bar}"] [data-part="{part}"]')
    return parts.bounding_box()["width"] if parts.count() else 0


def test_the_payment_bars_show_what_alice_owes_and_what_the_bank_took(watched, site_url):
    """Fresh keys, seed 1: she owes $50.00 and the bank took $80.00. The
    actual bar is longer by the overcharge, drawn hatched and named with its
    amount; a stable key makes the two bars the same."""
    sim = start_simulation(watched, site_url, CHAPTER_8, "payment")
    bars, result = sim.locator("svg.pay-bars"), sim.locator(".sim-result")
    sim.get_by_label("Keys", exact=True).select_option("fresh")
    sim.get_by_role("button", name="Run all charges").click()
    expect(result).to_contain_text("more")
    answered(sim)
    owed, paid, more = re.search(r"should have paid \$(\S+); she has paid \$(\S+)\..*"
                                 r": \$(\S+) more", result.inner_text()).groups()
    expect(bars.locator('[data-bar="expected"] .pay-amount')).to_have_text(f"${owed}")
    expect(bars.locator('[data-bar="actual"] .pay-amount')).to_have_text(f"${paid}")
    hatched = bars.locator('[data-bar="actual"] [data-part="more"]')
    expect(hatched).to_have_attribute("fill", re.compile(r"url\(#pay-hatch"))
    expect(bars.locator('[data-bar="actual"] .pay-part-label')).to_contain_text(
        f"${more} more")
    expected, took = bar_width(sim, "expected", "owed"), bar_width(sim, "actual", "owed")
    assert took == pytest.approx(expected, abs=1)
    assert bar_width(sim, "actual", "more") == pytest.approx(
        expected * float(more) / float(owed), abs=1.5)
    expect(bars).to_have_attribute("aria-label", re.compile(rf"\${paid}.*\${more} more"))
    sim.get_by_label("Keys", exact=True).select_option("stable")
    sim.get_by_role("button", name="Run all charges").click()
    expect(result).to_contain_text(": right")
    answered(sim)
    expect(bars.locator('[data-part="more"], [data-part="pending"]')).to_have_count(0)
    assert bar_width(sim, "actual", "owed") == pytest.approx(bar_width(sim, "expected", "owed"))
    assert watched.problems == []


def test_the_payment_bars_draw_a_charge_in_flight_as_pending(watched, site_url):
    """A stable key, seed 1, one attempt: the bank took $10.00 but the reply
    was lost and job 1 will retry. That $10.00 is drawn as pending, apart,
    not as more than she owes."""
    sim = start_simulation(watched, site_url, CHAPTER_8, "payment")
    bars = sim.locator("svg.pay-bars")
    sim.get_by_label("Keys", exact=True).select_option("stable")
    sim.get_by_role("button", name="Step one attempt").click()
    expect(sim.locator(".sim-result")).to_contain_text("$10.00 for order 1, not done yet")
    actual = bars.locator('[data-bar="actual"]')
    expect(actual.locator('[data-part="pending"]')).to_have_count(1)
    expect(actual.locator('[data-part="more"]')).to_have_count(0)
    expect(actual.locator(".pay-part-label")).to_have_text(re.compile(r"\$10\.00 pending"))
    expect(actual.locator(".pay-amount")).to_have_text("$10.00")
    expect(bars.locator('[data-bar="expected"] .pay-amount')).to_have_text("$0.00")
    expect(bars).to_have_attribute("aria-label", re.compile(r"\$10\.00 pending"))
    sim.get_by_role("button", name="Run all charges").click()
    expect(sim.locator(".sim-result")).to_contain_text(": right")
    answered(sim)
    expect(bars.locator('[data-part="pending"]')).to_have_count(0)
    assert watched.problems == []


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


def test_the_payment_picture_follows_the_theme_and_keeps_still_when_asked(watched, site_url):
    """The marks take the page's own colours, in either theme, and the
    newest fades in only for a reader who has not asked for less motion."""
    watched.emulate_media(color_scheme="light", reduced_motion="no-preference")
    sim = start_simulation(watched, site_url, CHAPTER_8, "payment")
    sim.get_by_role("button", name="Step one attempt").click()
    newest = sim.locator(".pay-attempt.pay-new")
    expect(newest).to_have_count(1)

    follows_the_theme_and_keeps_still(watched, lambda: newest.evaluate(
        """(mark) => [mark.querySelector(".pay-took"),
            mark.querySelector(".pay-label"), mark].map((part) => getComputedStyle(part))
            .map((style, i) => i < 2 ? style.fill : style.animationName)"""))
    assert watched.problems == []


OUTSIDE = """(svg) => [...svg.querySelectorAll("text")].filter((text) => {
    const box = text.getBBox();
    return box.x < 0 || box.x + box.width > svg.width.baseVal.value;
}).map((text) => text.textContent)"""
WIDER = "(svg) => svg.getBoundingClientRect().width > svg.parentElement.clientWidth"


def test_on_a_phone_the_payment_pictures_fit_their_words(browser, site_url):
    """At 390 px the bars and every word about them fit the page; the lanes
    of a short run fit too, each headed by its job and what became of it,
    and a long run's lanes keep every word inside the picture."""
    context = browser.new_context(viewport={"width": 390, "height": 900})
    page = context.new_page()
    sim = start_simulation(page, site_url, CHAPTER_8, "payment")
    sim.get_by_role("button", name="Step one attempt").click()
    answered(sim)
    lanes = sim.locator("svg.pay-timeline")
    expect(lanes.locator('.pay-lane[data-job="1"] .pay-status')).to_contain_text("job 1")
    assert lanes.evaluate(OUTSIDE) == [] and not lanes.evaluate(WIDER)
    sim.get_by_label("Keys", exact=True).select_option("fresh")
    sim.get_by_role("button", name="Run all charges").click()
    expect(sim.locator(".sim-result")).to_contain_text("more")
    answered(sim)
    bars = sim.locator("svg.pay-bars")
    expect(bars.locator('[data-part="more"]')).to_have_count(1)
    assert bars.evaluate(OUTSIDE) == [] and not bars.evaluate(WIDER)
    assert lanes.evaluate(OUTSIDE) == []


JOBS_TABLE_CELLS = """(table) => [...table.querySelectorAll("tr")].map((row) =>
    [...row.children].map((cell) => {
        const box = cell.getBoundingClientRect();
        return { top: Math.round(box.top), width: box.width };
    }))"""


@pytest.mark.parametrize("width", [1280, 390])
def test_the_charge_jobs_table_reads_well_on_a_phone_and_stays_a_table(browser, site_url, width):
    """At 1280 px each job is one line of five cells. At 390 px five columns
    left what the worker knows a word or two wide, so it takes a line of its
    own under the other four, as wide as the table, which never scrolls
    sideways. Either way it is still a table to a screen reader: five
    column headers, a row header and four cells for each job."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    sim = start_simulation(page, site_url, CHAPTER_8, "payment")
    sim.get_by_role("button", name="Run all charges").click()
    answered(sim)
    table = sim.locator(".sim-panels table")
    expect(table.locator("tbody tr")).to_have_count(5)
    expect(table.get_by_role("columnheader")).to_have_count(5)
    expect(table.get_by_role("rowheader")).to_have_count(5)
    expect(table.get_by_role("cell")).to_have_count(20)
    expect(table.get_by_role("cell", name="charged once: the bank approved it", exact=True)
           ).to_have_count(1)
    rows = table.evaluate(JOBS_TABLE_CELLS)
    whole = table.bounding_box()["width"]
    for cells in rows:
        assert len(cells) == 5
        if width == 1280:
            assert len({cell["top"] for cell in cells}) == 1, cells
        else:
            *first, knows = cells
            assert len({cell["top"] for cell in first}) == 1, cells
            assert knows["top"] > first[0]["top"], cells
            assert knows["width"] >= 0.95 * whole, (knows, whole)
    box = sim.locator(".sim-panels .sim-scroll")
    assert box.evaluate("(box) => box.scrollWidth <= box.clientWidth")
    context.close()


# ---- picture: race stepper

RACE_CHAPTER = "the-worker-where-work-happens.html"


def race_worker(sim, number):
    """One worker's part of the race picture: its code, pointer and locals."""
    return sim.locator(f'.race-picture g.race-worker[data-worker="{number}"]')


def pointed_line(worker):
    """The code line this worker's pointer points at, and its text."""
    line = worker.locator(".race-pointer").get_attribute("data-line")
    return line, worker.locator(f'.race-line[data-line="{line}"]').text_content()


def test_the_race_picture_moves_each_workers_pointer_and_shows_its_oldest(watched, site_url):
    watched.emulate_media(reduced_motion="reduce")     # the pointer jumps: no glide to wait for
    sim = start_simulation(watched, site_url, RACE_CHAPTER, "race")
    picture = sim.locator(".race-picture svg")
    expect(picture).to_have_attribute("role", "img")
    first, second = race_worker(sim, 1), race_worker(sim, 2)
    for worker in (first, second):                  # both about to run the SELECT
        expect(worker.locator(".race-pointer")).to_have_count(1)
        assert "SELECT" in pointed_line(worker)[1]
        expect(worker.locator(".race-locals")).not_to_contain_text("oldest")
    before = pointed_line(second)
    described = picture.locator("desc").text_content()
    sim.get_by_role("button", name="Step worker 1").click()
    answered(sim)
    # worker 1's pointer is on the check now, with the line marked; worker 2's stays
    line, text = pointed_line(first)
    assert "if oldest is None" in text
    marked = first.locator(".race-line.next")
    assert marked.first.get_attribute("data-line") == line
    arrow, row = (first.locator(selector).bounding_box()
                  for selector in (".race-pointer", f'.race-line[data-line="{line}"]'))
    assert row["y"] <= arrow["y"] + arrow["height"] / 2 <= row["y"] + row["height"]
    assert pointed_line(second) == before
    assert first.locator(".race-pointer").evaluate(
        "pointer => getComputedStyle(pointer).transitionDuration") == "0s"
    expect(first.locator(".race-locals")).to_contain_text("oldest = (1, 'welcome_email', …)")
    expect(second.locator(".race-locals")).not_to_contain_text("oldest")
    # worker 1 is in the gap the race lives in: it has looked, not marked
    expect(first.locator(".race-holds")).to_have_text(
        "in the gap: it has looked, and not marked the row yet")
    expect(second.locator(".race-holds")).to_have_text("holds no job")
    # the picture's description says what changed
    assert picture.locator("desc").text_content() != described
    expect(picture.locator("desc")).to_contain_text("worker 1")
    assert watched.problems == []


def test_the_race_picture_shows_the_row_between_and_a_log_in_words(watched, site_url):
    sim = start_simulation(watched, site_url, RACE_CHAPTER, "race")
    row = sim.locator(".race-picture .race-row")
    log = sim.locator("ol.race-log li")
    expect(row).to_have_count(1)
    expect(row).to_have_attribute("data-status", "queued")
    expect(row).to_contain_text("queued")
    expect(log).to_have_count(0)
    said = []
    for number, words in [(1, "worker 1: SELECT found job 1"),
                          (2, "worker 2: SELECT found job 1"),
                          (1, "worker 1: it has job 1, so it goes on")]:
        sim.get_by_role("button", name=f"Step worker {number}").click()
        answered(sim)
        said.append(words)
        expect(log).to_have_count(len(said))
        expect(log.last).to_contain_text(words)
        if "SELECT" in words:                                   # a read: the arrow points out
            touch = sim.locator(".race-picture .race-touch")
            expect(touch).to_have_text(f"worker {number} read the row")
            expect(sim.locator(".race-picture .race-arrow")).to_have_attribute(
                "data-table", "read")
    expect(sim.locator(".race-picture .race-arrow")).to_have_count(0)   # the check: no SQL
    expect(row).to_have_attribute("data-status", "queued")     # nobody has marked it yet
    sim.get_by_role("button", name="Step worker 1").click()    # worker 1's UPDATE
    answered(sim)
    expect(row).to_have_attribute("data-status", "running")
    expect(row).to_contain_text("running")
    expect(row).to_contain_text("worker 1")
    expect(log).to_have_count(4)
    expect(log.last).to_contain_text("UPDATE marked job 1 running for worker 1")
    expect(sim.locator(".race-picture .race-touch")).to_have_text("worker 1 wrote the row")
    expect(sim.locator(".race-picture .race-arrow")).to_have_attribute("data-table", "wrote")
    sim.get_by_role("button", name="Step worker 2").click()    # worker 2's check
    sim.get_by_role("button", name="Step worker 2").click()    # and its UPDATE, over it
    answered(sim)
    expect(row).to_contain_text("worker 2")
    # both believe they hold job 1; the row names one of them
    for number in (1, 2):
        expect(race_worker(sim, number).locator(".race-holds")).to_contain_text("holds job 1")
    # both send: the picture's outbox has two envelopes, the second a duplicate
    emails = sim.locator(".race-picture .race-email")
    expect(emails).to_have_count(0)
    for number in (1, 2):
        sim.get_by_role("button", name=f"Step worker {number}").click()
        answered(sim)
        expect(emails).to_have_count(number)
        expect(emails.last).to_contain_text(f"sent by worker {number}")
    expect(emails.first).to_have_attribute("data-duplicate", "false")
    expect(emails.last).to_have_attribute("data-duplicate", "true")
    expect(emails.last).to_contain_text("duplicate")
    assert watched.problems == []


def test_the_race_pictures_counts_are_the_engines(watched, site_url):
    from tools.sims.race.engine import every_interleaving
    sim = start_simulation(watched, site_url, RACE_CHAPTER, "race")
    sim.get_by_role("button", name="Try every interleaving").click()
    answered(sim)
    naive, atomic = every_interleaving("naive"), every_interleaving("atomic")
    every = sim.locator(".sim-every")
    expect(every).to_contain_text(
        f"the naive claim: {naive['duplicates']} of {naive['schedules']} orders "
        "send an email twice", timeout=30000)
    expect(every).to_contain_text(
        f"the atomic claim: {atomic['duplicates']} of {atomic['schedules']} orders")
    why = sim.locator(".race-why")
    expect(why).to_contain_text(f"The {naive['safe']} naive orders that send it once")
    expect(why).to_contain_text("not equally likely")
    # and as a bar: one part per kind of order, as wide as its share
    bar = sim.locator(".race-orders")
    expect(bar).to_have_attribute("role", "img")
    twice, once = (float(bar.locator(f'rect[data-orders="{kind}"]').get_attribute("width"))
                   for kind in ("twice", "once"))
    assert twice / (twice + once) == pytest.approx(naive["duplicates"] / naive["schedules"],
                                                   abs=0.01)
    expect(bar).to_contain_text(f"{naive['duplicates']} send twice")
    expect(bar).to_contain_text(f"{naive['safe']} send once")
    assert watched.problems == []


@pytest.mark.parametrize("width", [1280, 390])
def test_the_race_picture_sets_the_workers_side_by_side_or_stacks_them(browser, site_url,
                                                                      width):
    """Wide, the row sits between the two code columns; on a phone the
    columns stack, the row between them, and nothing is wider than the sim."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    sim = start_simulation(page, site_url, RACE_CHAPTER, "race")
    sim.get_by_role("button", name="Step worker 1").click()
    answered(sim)
    first, second = (race_worker(sim, n).bounding_box() for n in (1, 2))
    row = sim.locator(".race-picture .race-row").bounding_box()
    picture = sim.locator(".race-picture svg").bounding_box()
    body = sim.bounding_box()
    assert body["x"] <= picture["x"] and picture["x"] + picture["width"] <= body["x"] + body["width"]
    # worker 1's SELECT read the row: an arrow from the row to worker 1's column
    arrow = sim.locator(".race-picture .race-arrow")
    expect(arrow).to_have_attribute("data-table", "read")
    drawn = arrow.bounding_box()
    if width == 1280:
        assert first["x"] + first["width"] <= row["x"]
        assert row["x"] + row["width"] <= second["x"]
        assert first["x"] + first["width"] - 4 <= drawn["x"] <= row["x"]
    else:
        assert first["y"] + first["height"] <= row["y"]
        assert row["y"] + row["height"] <= second["y"]
        assert first["y"] + first["height"] - 4 <= drawn["y"] <= row["y"]
    # Each claim's radio button and its words stay on one line together.
    for choice in ("the naive claim", "the atomic claim"):
        label = sim.locator("fieldset label", has_text=choice)
        assert label.evaluate("(label) => label.getClientRects().length") == 1, choice
    context.close()


# ---- picture: herd
# (the thundering-herd simulation, Chapter 6)

CHAPTER_6 = "retry-trying-again-politely.html"


def herd_state(**settings):
    """What the herd engine reports, under CPython, for these settings (the
    page's first run is full jitter)."""
    from tools.sims.herd.engine import Herd
    return Herd(**{"policy": "full", **settings}).state()


def herd_said(value):
    """A time as the engine's terminal program says it."""
    from tools.sims.herd.engine import seconds
    return seconds(value)


BURSTS = """(svg) => [...svg.querySelectorAll(".herd-burst")].map((mark) => ({
    column: Number(mark.dataset.column), most: Number(mark.dataset.most),
    crowd: mark.classList.contains("herd-crowd"), height: mark.getBBox().height,
    topped: !!mark.querySelector(".herd-top")}))"""


def drawn_bursts(sim):
    return sim.locator("svg.herd-spikes").evaluate(BURSTS)


def test_the_herd_picture_draws_a_smear_with_jitter_and_spikes_without(watched, site_url):
    """Full jitter: after everyone's first call, no two calls at one instant,
    a low smear. Exponential backoff without jitter: tall spikes, each
    topped by a mark and taller than any jittered call, round after round,
    its tallest after the first said in words; each run on its own axis,
    whose span is said. Every column is the engine's."""
    fetched = python_requests(watched)
    sim = start_simulation(watched, site_url, CHAPTER_6, "herd")
    picture = sim.locator("svg.herd-spikes")
    expect(picture).to_have_attribute("role", "img")
    full = herd_state()
    answered(sim)
    marks = drawn_bursts(sim)
    assert [(m["column"], m["most"]) for m in marks] == [
        (n, each["most"]) for n, each in enumerate(full["bursts"]) if each["most"]]
    assert [m["column"] for m in marks if m["crowd"]] == [0]      # only the start
    expect(sim.locator(".herd-span")).to_contain_text(herd_said(full["seconds"]))
    expect(picture).to_have_attribute("aria-label", re.compile(
        rf"full jitter.*{re.escape(herd_said(full['seconds']))}.*"
        rf"at most {full['in_step']} at one instant after the first"))
    low = max(m["height"] for m in marks[1:])
    sim.get_by_label("Policy", exact=True).select_option("exponential")
    exponential = herd_state(policy="exponential")
    expect(sim.locator(".herd-span")).to_contain_text(herd_said(exponential["seconds"]))
    answered(sim)
    marks = drawn_bursts(sim)
    assert [(m["column"], m["most"]) for m in marks] == [
        (n, each["most"]) for n, each in enumerate(exponential["bursts"]) if each["most"]]
    crowds = [m for m in marks[1:] if m["crowd"]]
    assert len(crowds) >= 20 and all(m["topped"] and m["height"] > low for m in crowds)
    heights = [m["height"] for m in crowds]
    assert heights == sorted(heights, reverse=True)               # one fewer each round
    expect(sim.locator(".herd-tallest")).to_contain_text(f"{exponential['in_step']} at once")
    expect(picture).to_have_attribute("aria-label", re.compile(
        rf"exponential, no jitter.*at most {exponential['in_step']} at one instant"))
    expect(task_done(sim, "herd")).to_have_class("done")
    expect(sim.locator(".sim-status")).to_contain_text("Done: make the herd visible")
    assert not any(url.endswith("/python_stdlib.zip") for url in fetched)
    assert watched.problems == []


COMPARED = """(svg) => [...svg.querySelectorAll(".herd-policy")].map((row) => ({
    policy: row.dataset.policy, chosen: row.dataset.chosen === "true",
    calls: row.querySelector(".herd-calls").textContent,
    time: row.querySelector(".herd-time").textContent,
    callsBar: row.querySelector(".herd-calls-bar").getBBox().width,
    timeBar: row.querySelector(".herd-time-bar").getBBox().width,
    marked: row.querySelector(".herd-chosen")?.textContent ?? ""}))"""


def test_the_herd_comparison_gives_every_policys_calls_and_time(watched, site_url):
    """Five rows, one a policy, with the engine's calls and time in words and
    as bars in step with them; the chosen policy marked by a sign and
    words, not by colour alone. A new number of clients redraws them all."""
    sim = start_simulation(watched, site_url, CHAPTER_6, "herd")
    compare = sim.locator("svg.herd-compare")
    expect(compare).to_have_attribute("role", "img")

    def check(state):
        rows = compare.evaluate(COMPARED)
        assert [row["policy"] for row in rows] == list(state["policies"])
        for row in rows:
            truth = state["policies"][row["policy"]]
            assert row["calls"] == f"{truth['calls']:,} calls"
            assert row["time"] == herd_said(truth["seconds"])
            assert row["chosen"] == (row["policy"] == state["settings"]["policy"])
            assert ("▶" in row["marked"]) == row["chosen"]
        for a in rows:
            for b in rows:
                truth_a, truth_b = state["policies"][a["policy"]], state["policies"][b["policy"]]
                if truth_a["calls"] > truth_b["calls"]:
                    assert a["callsBar"] > b["callsBar"], (a, b)
                if truth_a["seconds"] > truth_b["seconds"]:
                    assert a["timeBar"] > b["timeBar"], (a, b)
        return rows

    answered(sim)
    check(herd_state())
    expect(compare).to_have_attribute("aria-label", re.compile(r"full jitter \(shown\)"))
    clients = sim.get_by_label("Clients", exact=True)
    clients.fill("30")
    clients.press("Enter")
    thirty = herd_state(clients=30)
    expect(compare.locator('[data-policy="none"] .herd-calls')).to_have_text(
        f"{thirty['policies']['none']['calls']:,} calls")
    answered(sim)
    check(thirty)
    sim.get_by_label("Policy", exact=True).select_option("decorrelated")
    expect(compare.locator('[data-policy="decorrelated"]')).to_have_attribute(
        "data-chosen", "true")
    answered(sim)
    check(herd_state(clients=30, policy="decorrelated"))
    assert watched.problems == []


def test_the_herd_tasks_by_keyboard(watched, site_url):
    """Every task, through the page's controls, by keyboard alone: no
    jitter makes the herd; full jitter with a small enough cap makes more
    than half the calls; decorrelated jitter gets 100 clients through
    quickly. Each change is announced."""
    sim = start_simulation(watched, site_url, CHAPTER_6, "herd", keyboard=True)
    policy = sim.get_by_label("Policy", exact=True)
    expect(policy).to_be_focused()
    for task in ("herd", "cap", "quick"):
        expect(task_done(sim, task)).not_to_have_class("done")
    announcer = sim.locator('[aria-live="polite"]')
    watched.keyboard.press("ArrowUp")             # full jitter, to exponential
    expect(policy).to_have_value("exponential")
    expect(task_done(sim, "herd")).to_have_class("done")
    expect(announcer).to_contain_text("exponential, no jitter")
    watched.keyboard.press("ArrowDown")
    expect(policy).to_have_value("full")
    cap = sim.get_by_label("Cap (s)", exact=True)
    cap.focus()
    watched.keyboard.press("ControlOrMeta+a")
    watched.keyboard.type("0.01")
    watched.keyboard.press("Tab")
    expect(task_done(sim, "cap")).to_have_class("done")
    expect(announcer).to_contain_text(f"{herd_state(cap=0.01)['calls']:,} calls")
    cap.focus()
    watched.keyboard.press("ControlOrMeta+a")
    watched.keyboard.type("0.2")
    watched.keyboard.press("Tab")
    expect(announcer).to_contain_text(f"{herd_state(cap=0.2)['calls']:,} calls")
    expect(task_done(sim, "quick")).not_to_have_class("done")    # full jitter: too many calls
    policy.focus()
    watched.keyboard.press("ArrowDown")
    watched.keyboard.press("ArrowDown")
    expect(policy).to_have_value("decorrelated")
    expect(task_done(sim, "quick")).to_have_class("done")
    expect(sim.locator(".sim-status")).to_contain_text("That was the last task")
    assert watched.problems == []


def test_the_herd_never_undoes_a_choice_made_while_python_was_busy(watched, site_url):
    """The reader changes the cap, then the policy before the cap's answer
    is back. Drawing that older answer must leave the policy menu at what
    the reader chose since: otherwise their next arrow key moves from the
    wrong place (CI caught one keyboard run landing on equal jitter)."""
    sim = start_simulation(watched, site_url, CHAPTER_6, "herd")
    answered(sim)
    shown = menu_when_the_first_answer_is_drawn(
        sim, "#herd-policy", ".sim-result", [("#herd-cap", "0.5"), ("#herd-policy", "equal")])
    assert shown == "equal"
    answered(sim)
    expect(sim.get_by_label("Policy", exact=True)).to_have_value("equal")
    expect(sim.locator(".sim-result")).to_contain_text("equal jitter")
    assert watched.problems == []


def test_the_herd_refuses_a_box_out_of_range_and_says_why(watched, site_url):
    """A number of clients the engine refuses is never sent: the box says
    what it takes, and the picture stays as it was."""
    sim = start_simulation(watched, site_url, CHAPTER_6, "herd")
    answered(sim)
    before = sim.locator("svg.herd-spikes").get_attribute("aria-label")
    clients = sim.get_by_label("Clients", exact=True)
    clients.fill("900")
    clients.press("Enter")
    answered(sim)
    assert clients.evaluate("(input) => input.validity.rangeOverflow")
    expect(sim.locator(".sim-status")).not_to_contain_text("did not work")
    expect(sim.locator("svg.herd-spikes")).to_have_attribute("aria-label", before)
    assert watched.problems == []


@pytest.mark.parametrize("width", [1280, 390])
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_herd_fits_follows_the_theme_and_passes_axe(browser, site_url, width, scheme):
    """At 1280 px and on a phone, light and dark: nothing sticks out of the
    simulation, every word of both pictures lies inside them, the spikes
    take the theme's own ink, and axe finds nothing serious."""
    context = browser.new_context(viewport={"width": width, "height": 900},
                                  color_scheme=scheme, bypass_csp=True)   # for axe
    page = context.new_page()
    sim = start_simulation(page, site_url, CHAPTER_6, "herd")
    sim.get_by_label("Policy", exact=True).select_option("exponential")
    expect(task_done(sim, "herd")).to_have_class("done")
    answered(sim)
    assert sim.evaluate(STICKING_OUT) == []
    assert all(note == "sim-sideways" and not hidden
               for _, note, hidden in sim.evaluate(OVERFLOWING))
    for picture in ("svg.herd-spikes", "svg.herd-compare"):
        assert sim.locator(picture).evaluate(OUTSIDE) == [], picture
        assert not sim.locator(picture).evaluate(WIDER), picture
    ink = sim.locator(".herd-crowd line").first.evaluate("(line) => getComputedStyle(line).stroke")
    text = page.evaluate("getComputedStyle(document.body).color")
    assert ink == text
    violations = serious_violations(page, ".sim")
    context.close()
    assert violations == []


def test_the_herd_picture_keeps_still_when_asked(watched, site_url):
    """A redrawn picture fades in only for a reader who allows motion."""
    watched.emulate_media(reduced_motion="no-preference")
    sim = start_simulation(watched, site_url, CHAPTER_6, "herd")
    answered(sim)
    spikes = sim.locator("svg.herd-spikes .herd-bursts")
    assert spikes.evaluate("(g) => getComputedStyle(g).animationName") != "none"
    watched.emulate_media(reduced_motion="reduce")
    assert spikes.evaluate("(g) => getComputedStyle(g).animationName") == "none"
    assert watched.problems == []



# ---- picture: retry budget
# (the retry-budget simulation, Chapter 11)

from tools.sims.retry_budget.engine import RetryBudget          # noqa: E402  (its numbers)

POINTS = """(svg) => [...svg.querySelectorAll(".rb-point")].map((point) => ({
    line: point.dataset.line, failing: Number(point.dataset.failing),
    y: point.getBBox().y + point.getBBox().height / 2,
    shape: point.querySelector("circle") ? "circle" : point.querySelector("rect") ? "square"
        : "none"}))"""


def test_the_retry_budget_curves_are_the_engines_table(watched, site_url):
    """Eleven points a line, one line per kind of client, told apart by the
    shape of their points and by their words: without a budget the load
    climbs to the engine's 3.0× at total failure, with one it stays under
    the 1.2× line, and each line's last words give its number."""
    sim = start_simulation(watched, site_url, CHAPTER_11, "retry-budget")
    curves = sim.locator("svg.rb-curves")
    expect(curves).to_have_attribute("role", "img")
    table = RetryBudget().state()["amplification"]
    answered(sim)
    points = curves.evaluate(POINTS)
    assert sorted(point["failing"] for point in points if point["line"] == "without") == \
        [row["failing"] for row in table]
    assert sorted(point["failing"] for point in points if point["line"] == "with") == \
        [row["failing"] for row in table]
    assert {point["shape"] for point in points if point["line"] == "without"} == {"circle"}
    assert {point["shape"] for point in points if point["line"] == "with"} == {"square"}
    y = {(point["line"], point["failing"]): point["y"] for point in points}
    mark = curves.locator(".rb-mark").evaluate("(line) => line.getBBox().y")
    for row in table:                         # higher on the page: more load
        if row["without"] > row["with"] + 0.05:
            assert y["without", row["failing"]] < y["with", row["failing"]], row
        assert y["with", row["failing"]] > mark, row
    assert y["without", 1.0] < mark
    last = table[-1]
    expect(curves.locator('.rb-end[data-line="without"]')).to_contain_text(
        f"{last['without']:.1f}×")
    expect(curves.locator('.rb-end[data-line="with"]')).to_contain_text(f"{last['with']:.1f}×")
    expect(curves.locator(".rb-mark-label")).to_have_text("1.2×")
    expect(curves).to_have_attribute("aria-label", re.compile(
        rf"{last['without']:.1f}×.*{last['with']:.1f}×"))
    assert watched.problems == []


def recovery_said(sim):
    return sim.locator("svg.rb-run .rb-recovery")


def test_the_recovery_picture_draws_every_second_and_says_if_it_came_back(watched, site_url):
    """Sixty seconds, a bar of load and a bar of answers each, the stall
    shaded and named; without a budget the words on the picture say it
    never came back, and the last seconds' load bars stand above the line
    of what the backend can answer. With a budget (switched on from the
    keyboard) it comes back at the second the engine says, and its load
    bars drop below that line."""
    sim = start_simulation(watched, site_url, CHAPTER_11, "retry-budget")
    run = sim.locator("svg.rb-run")
    expect(run).to_have_attribute("role", "img")
    down = RetryBudget().state()
    answered(sim)
    counted = sum(1 for each in down["seconds"] if each["offered"])
    expect(run.locator(".rb-load")).to_have_count(counted)
    expect(run.locator(".rb-answered")).to_have_count(counted)
    stall = down["settings"]["stall"]
    expect(run.locator(".rb-stall text")).to_contain_text(
        f"{down['stall_at']:g}–{down['stall_at'] + stall:g} s")
    expect(recovery_said(sim)).to_contain_text("never")
    expect(run).to_have_attribute("aria-label", re.compile("never"))
    capacity = run.locator(".rb-capacity line").evaluate("(line) => line.getBBox().y")
    tops = """(svg) => [...svg.querySelectorAll(".rb-load")]
        .filter((bar) => Number(bar.dataset.second) >= 50).map((bar) => bar.getBBox().y)"""
    assert all(top < capacity for top in run.evaluate(tops))
    budget = sim.get_by_label("Retry budget", exact=True)
    budget.focus()
    watched.keyboard.press("Space")
    back = RetryBudget(budget=True).state()["recovered_at"]
    expect(recovery_said(sim)).to_contain_text(f"{back} s")
    expect(run.locator(".rb-recovered")).to_have_attribute("data-at", str(back))
    answered(sim)
    assert all(top > capacity for top in run.evaluate(tops))
    expect(sim.locator('[aria-live="polite"]')).to_contain_text(f"{back} s")
    assert watched.problems == []


def test_the_retry_budget_tasks_by_keyboard(watched, site_url):
    """Nothing is done where it starts, though the backend stays down there.
    Try jitter without a budget (still down), bring it back with the budget,
    then find a load at which it comes back without one: the load slider
    moved by its arrow keys until the engine says it came back."""
    sim = start_simulation(watched, site_url, CHAPTER_11, "retry-budget", keyboard=True)
    # A task that is a question ends the line with its question mark alone.
    expect(sim.locator(".sim-status")).to_have_text(
        "Try first: without a budget, try jitter: does it bring the backend back?")
    expect(sim.locator(".sim-tasks li.done")).to_have_count(0)
    sim.get_by_label("Jitter", exact=True).press("Space")
    expect(task_done(sim, "stuck")).to_have_class("done")
    expect(sim.locator(".sim-status")).to_contain_text("Next: ")
    sim.get_by_label("Retry budget", exact=True).press("Space")
    expect(task_done(sim, "back")).to_have_class("done")
    for label in ("Retry budget", "Jitter"):
        sim.get_by_label(label, exact=True).press("Space")
        answered(sim)
    load = sim.get_by_label("Load", exact=True)
    start, lowest, step = (float(load.get_attribute(name)) for name in ("value", "min", "step"))
    loads = [round(start - step * count, 2)
             for count in range(1, round((start - lowest) / step) + 1)]
    light = next(value for value in loads
                 if RetryBudget(load=value).state()["recovered_at"] is not None)
    for value in loads:
        load.press("ArrowLeft")
        answered(sim)
        if value == light:
            break
    expect(load).to_have_value(f"{light:g}")
    expect(task_done(sim, "light")).to_have_class("done")
    expect(recovery_said(sim)).not_to_contain_text("never")
    expect(sim.locator(".sim-status")).to_contain_text("That was the last task.")
    assert watched.problems == []


def test_the_retry_budget_picture_follows_the_theme_and_keeps_still_when_asked(watched,
                                                                             site_url):
    """Its lines and words take the page's colours in either theme; the
    words that say where it recovered fade in only for a reader who allows
    motion."""
    watched.emulate_media(color_scheme="light", reduced_motion="no-preference")
    sim = start_simulation(watched, site_url, CHAPTER_11, "retry-budget")
    answered(sim)

    follows_the_theme_and_keeps_still(watched, lambda: sim.evaluate("""(sim) => [
        getComputedStyle(sim.querySelector('.rb-line[data-line="without"]')).stroke,
        getComputedStyle(sim.querySelector('.rb-end[data-line="without"]')).fill,
        getComputedStyle(sim.querySelector(".rb-recovery")).animationName]"""))
    assert watched.problems == []


@pytest.mark.parametrize("width", [1280, 390])
def test_the_retry_budget_fits_or_says_it_scrolls(browser, site_url, width):
    """At 1280 px nothing is cut and nothing scrolls; on a phone every word
    of both pictures lies inside them, nothing sticks out of the
    simulation's box, and a box that scrolls sideways says so."""
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    sim = start_simulation(page, site_url, CHAPTER_11, "retry-budget")
    for switch in ("Retry budget", "Retry budget"):       # both words on the run
        sim.get_by_label(switch, exact=True).click()
        answered(sim)
        box = page.locator('.sim[data-sim="retry-budget"]').bounding_box()
        assert 0 <= box["x"] and box["x"] + box["width"] <= width, box
        assert sim.evaluate(STICKING_OUT) == []
        for picture in ("svg.rb-curves", "svg.rb-run"):
            assert sim.locator(picture).evaluate(OUTSIDE) == [], picture
        overflowing = sim.evaluate(OVERFLOWING)
        if width == 1280:
            assert overflowing == []
        else:
            assert all(note == "sim-sideways" and not hidden
                       for _, note, hidden in overflowing), overflowing
    context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_retry_budget_has_no_serious_accessibility_violations(browser, site_url, scheme):
    context = browser.new_context(bypass_csp=True, color_scheme=scheme)
    page = context.new_page()
    sim = start_simulation(page, site_url, CHAPTER_11, "retry-budget")
    sim.get_by_label("Retry budget", exact=True).click()
    answered(sim)
    violations = serious_violations(page, '.sim[data-sim="retry-budget"]')
    context.close()
    assert violations == []


def test_the_retry_budget_needs_no_more_than_the_trimmed_standard_library(watched, site_url):
    fetched = python_requests(watched)
    sim = start_simulation(watched, site_url, CHAPTER_11, "retry-budget")
    for label in ("Retry budget", "Jitter"):
        sim.get_by_label(label, exact=True).click()
        answered(sim)
    expect(sim.locator(".sim-status")).not_to_contain_text("did not work")
    assert any(url.endswith("/stdlib.zip") for url in fetched)
    assert not any(url.endswith("/python_stdlib.zip") for url in fetched)
    assert watched.problems == []
