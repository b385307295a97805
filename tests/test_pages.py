"""The built site in a real browser (Debian's Chromium, driven by
Playwright): its pages, their themes, answers, listings and navigation.
The simulations' pages are tested in tools/sims/."""
import re

import pytest
from playwright.sync_api import expect

from tests.browser import AXE, BOXES_CUT_OFF, serious_violations, visit


CHAPTER = "the-waiter-who-cooks.html"        # has a listing, transcripts and answers
PAGES = ["index.html", CHAPTER, "glossary.html", "all.html"]


@pytest.mark.parametrize("name", PAGES)
def test_pages_load_without_errors_or_outside_requests(watched, site_url, name):
    visit(watched, f"{site_url}/{name}")
    watched.wait_for_load_state("networkidle")
    assert watched.locator("main h1").count() >= 1
    assert watched.problems == []


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("name", PAGES)
def test_no_serious_accessibility_violations(new_page, site_url, name, scheme):
    if not AXE.exists():
        pytest.fail("axe-core is missing: run `npm ci` (make check does)")
    page = new_page(color_scheme=scheme)
    visit(page, f"{site_url}/{name}")
    violations = serious_violations(page)
    assert violations == []


def background(page):
    return page.evaluate("getComputedStyle(document.body).backgroundColor")


def test_the_theme_toggle_switches_and_is_remembered(new_page, site_url):
    page = new_page(color_scheme="light")
    visit(page, f"{site_url}/{CHAPTER}")
    toggle = page.get_by_role("button", name="Dark theme")
    light = background(page)
    assert toggle.get_attribute("aria-pressed") == "false"
    toggle.click()
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    assert toggle.get_attribute("aria-pressed") == "true"
    dark = background(page)
    assert dark != light
    visit(page, f"{site_url}/index.html")          # another page, same choice
    assert background(page) == dark
    page.get_by_role("button", name="Dark theme").click()
    assert background(page) == light


def test_an_answer_stays_folded_until_asked_for(watched, site_url):
    visit(watched, f"{site_url}/{CHAPTER}")
    check = watched.locator(".check").first
    answer = check.locator("details p").first
    assert not answer.is_visible()
    check.get_by_text("Show the answer").click()
    assert answer.is_visible()
    assert "waiting for their account" in answer.inner_text()


def test_answers_are_unfolded_in_print(watched, site_url):
    visit(watched, f"{site_url}/{CHAPTER}")
    watched.emulate_media(media="print")
    assert watched.locator(".check details p").first.is_visible()


def test_prompts_and_line_numbers_cannot_be_selected(watched, site_url):
    visit(watched, f"{site_url}/{CHAPTER}")
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
    visit(watched, f"{site_url}/all.html")
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


def test_a_phone_gets_a_contents_menu_and_no_sideways_scrolling(new_page, site_url):
    """On a phone the contents are a menu that opens below the header; a
    section followed from it is shown, not the menu, and lands clear of the
    header; Escape puts the menu away and the focus back on its button."""
    page = new_page(375, 740)
    page.emulate_media(reduced_motion="reduce")
    visit(page, f"{site_url}/{CHAPTER}")
    toc = page.locator("#toc")
    menu = page.get_by_role("button", name="Contents")
    expect(toc).to_be_hidden()
    menu.click()
    expect(toc).to_be_visible()
    header = page.locator(".site-header").bounding_box()
    assert toc.bounding_box()["y"] >= header["y"] + header["height"] - 1
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    link = toc.locator(".sections a").nth(2)
    heading = page.locator(f"[id='{link.get_attribute('href').split('#')[1]}']")
    link.click()
    expect(toc).to_be_hidden()
    expect(menu).to_have_attribute("aria-expanded", "false")
    landed_clear_of_the_header(page, heading)
    menu.click()
    expect(toc).to_be_visible()
    page.keyboard.press("Escape")
    expect(toc).to_be_hidden()
    expect(menu).to_be_focused()


def landed_clear_of_the_header(page, heading):
    """The heading's top is just below the header: the page scrolled to it
    (instantly, for a reader who asks for less motion), and not under it."""
    page.evaluate(TWO_FRAMES)
    header = page.locator(".site-header").bounding_box()
    below = heading.bounding_box()["y"] - (header["y"] + header["height"])
    assert 0 <= below <= 30, below


TWO_FRAMES = "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"


@pytest.mark.parametrize("width", [1280, 390])
def test_a_heading_reached_by_its_address_lands_below_the_header(new_page, site_url, width):
    page = new_page(width, 800)
    page.emulate_media(reduced_motion="reduce")
    visit(page, f"{site_url}/{CHAPTER}")
    target = page.locator("main section.level2[id]").nth(2)
    visit(page, f"{site_url}/{CHAPTER}#{target.get_attribute('id')}")
    landed_clear_of_the_header(page, target)


@pytest.mark.parametrize("width", [1280, 390])
def test_no_box_is_cut_off_without_showing_that_it_scrolls(new_page, site_pages, site_url, width):
    """On every page, a listing, transcript, diagram or example whose lines
    are wider than its box shows a shade at the edge that hides more (the
    reader who never tries to scroll would miss it); nothing reaches under
    the contents or past the window. At 1280 px listings, transcripts and
    diagrams take room beside the column, so only lines longer than a
    listing's 79 columns scroll there."""
    page = new_page(width, 900)
    cut_off = {}
    for path in sorted(site_pages.glob("*.html")):
        visit(page, f"{site_url}/{path.name}")
        found = page.evaluate(BOXES_CUT_OFF)
        if found["silent"] or found["outside"]:
            cut_off[path.name] = found
    assert cut_off == {}


def test_a_page_opened_as_a_file_says_how_to_serve_it(new_page, site_pages, site_url):
    """Opened from file://, where the simulations cannot run, each says so,
    with the command that serves the page's own folder; served, none does."""
    page = new_page()
    chapter = "idempotency-making-repeats-harmless.html"      # two simulations
    visit(page, (site_pages / chapter).as_uri())
    notes = page.locator(".sim .sim-served")
    expect(notes).to_have_count(page.locator(".sim").count())
    expect(notes.first).to_contain_text(
        f'python3 -m http.server --directory "{site_pages}" 8000')
    visit(page, f"{site_url}/{chapter}")
    expect(page.locator(".sim-mount .sim-start").first).to_be_visible()
    expect(notes).to_have_count(0)


def test_search_finds_the_chapters_that_hold_the_words(watched, site_url):
    """Typed into the search box above the contents, words fetch the index
    built with the site and list the chapters that hold them, the words
    marked; a result opens its chapter, and words found nowhere say so."""
    visit(watched, f"{site_url}/{CHAPTER}")
    search = watched.get_by_label("Search the guide")
    search.fill("thundering herd")
    results = watched.locator(".search-results")
    expect(results).to_contain_text("6. Retry: Trying Again, Politely")
    expect(results.locator("mark").first).to_be_visible()
    expect(watched.locator(".search-status")).to_have_text(re.compile(r"\d+ chapters? found"))
    results.get_by_role("link", name="6. Retry: Trying Again, Politely").click()
    expect(watched.locator("main h1")).to_have_text("6. Retry: Trying Again, Politely")
    watched.get_by_label("Search the guide").fill("zqxjkv")
    expect(watched.locator(".search-status")).to_have_text("Nothing found")
    expect(watched.locator(".search-results")).to_be_hidden()
    assert watched.problems == []


def test_words_typed_before_the_pages_script_runs_are_searched(watched, site_url):
    """A reader may type into the search box before site.js has run (a slow
    line, or a quick reader just after following a link): once it runs, it
    searches what the box holds. Here site.js is held back until the words
    are in the box."""
    held = []
    watched.route("**/static/site.js", lambda route: held.append(route))
    watched.goto(f"{site_url}/{CHAPTER}", wait_until="commit")  # a deferred script
    watched.get_by_label("Search the guide").fill("thundering herd")  # holds back the load
    for _ in range(600):                # the request for site.js, held: an event
        if held:
            break
        watched.wait_for_timeout(50)
    held[0].continue_()
    expect(watched.locator(".search-results")).to_contain_text(
        "6. Retry: Trying Again, Politely")
    expect(watched.locator(".search-status")).to_have_text(re.compile(r"\d+ chapters? found"))
    watched.unroute("**/static/site.js")
    assert watched.problems == []


def test_the_covers_contents_are_numbered_once(watched, site_url):
    """The titles carry their chapters' numbers ("0. How to Use This Guide"):
    the list on the cover shows no numbers of its own."""
    visit(watched, f"{site_url}/index.html")
    items = watched.locator(".cover .contents li")
    expect(items.first).to_have_text(re.compile(r"^0\. "))
    assert items.first.evaluate("(item) => getComputedStyle(item).listStyleType") == "none"


def test_the_skip_link_is_the_first_stop(watched, site_url):
    visit(watched, f"{site_url}/{CHAPTER}")
    watched.keyboard.press("Tab")
    assert watched.evaluate("document.activeElement.textContent") == "Skip to the content"
