"""The payment simulator in Chromium: its tasks, its pictures and its controls.
The checks every simulation passes (fit, axe, the standard library, the focus)
are tools/sims/test_pages.py's; they make the moves in SMOKE."""
import re

import pytest
from playwright.sync_api import expect

from tests.browser import (start_simulation, task_done, answered, disclose, LINES, OUTSIDE, WIDER,
                           follows_the_theme_and_keeps_still)


CHAPTER = "idempotency-making-repeats-harmless.html"
# What the shared checks do here, a move at a time (tests/browser.py make_moves):
# enough to fill its tables and pictures and to import all it needs.
SMOKE = [disclose("More settings"), "New seed", "Step one attempt", "Run all charges",
         "Run all three"]


def headline(sim):
    """The line over the pictures, as a reader sees it."""
    return sim.locator(".pay-headline .pay-said")


def more_settings(sim):
    """Open More settings, where all but the keys and the moves are."""
    sim.locator("summary", has_text="More settings").click()
    expect(sim.get_by_label("Attempts", exact=True)).to_be_visible()


def test_the_payment_simulator_tasks(watched, site_url):
    """The first two tasks take only the keys and Run all charges, which
    are up front; the third takes Attempts, from More settings."""
    sim = start_simulation(watched, site_url, CHAPTER, "payment")

    def run_all(keys, attempts=None):
        sim.get_by_label("Keys", exact=True).select_option(keys)
        if attempts:
            sim.get_by_label("Attempts", exact=True).fill(attempts)
        sim.get_by_role("button", name="Run all charges").click()
        answered(sim)

    run_all("fresh")                                    # seed 1 loses replies
    expect(headline(sim)).to_have_text("Alice owes $50.00; the bank took $80.00: "
                                       "$30.00 too much")
    expect(task_done(sim, "overcharge")).to_have_class("done")
    run_all("stable")
    expect(headline(sim)).to_have_text("Alice owes $50.00; the bank took exactly that")
    expect(task_done(sim, "impossible")).to_have_class("done")
    more_settings(sim)
    run_all("stable", attempts="1")
    expect(sim.locator("tr.dead").first).to_contain_text("dead")
    expect(headline(sim)).to_contain_text(re.compile(r" · \d dead letters?$"))
    expect(task_done(sim, "dead")).to_have_class("done")
    expect(sim.get_by_role("button", name="Next step of O7")).to_have_count(0)   # Chapter 10's
    assert watched.problems == []


def test_the_three_key_modes_are_compared_for_one_seed(watched, site_url):
    """"Run all three" sets the key modes side by side for the seed and
    settings shown, each run to the end as the engine runs it, and leaves
    the run above as it was; a changed setting takes the table away, since
    it no longer says what the controls do."""
    from tools.sims.payment.engine import Payment
    sim = start_simulation(watched, site_url, CHAPTER, "payment")
    sim.get_by_role("button", name="Step one attempt").click()
    answered(sim)
    above = sim.locator(".sim-result").text_content()
    sim.get_by_role("button", name="Run all three").click()
    answered(sim)
    engine = Payment()
    truth = engine.compare_keys()
    engine.close()
    rows = sim.locator("table.pay-compare tbody tr")
    expect(rows).to_have_count(3)
    for row, each in zip(rows.all(), truth):
        cells = [cell.text_content() for cell in row.locator("th, td").all()]
        again = (f"⚠ ${each['overcharge_cents'] / 100:.2f}" if each["overcharge_cents"]
                 else "none")
        assert cells[1:] == [f"${each['expected_cents'] / 100:.2f}",
                             f"${each['actual_cents'] / 100:.2f}", again, str(each["dead"])]
    expect(rows.last.locator("th")).to_have_text("a stable key per order")
    expect(sim.locator(".sim-result")).to_have_text(above)
    sim.get_by_label("Keys", exact=True).select_option("stable")     # all three are there
    answered(sim)
    expect(rows).to_have_count(3)
    more_settings(sim)
    sim.get_by_role("button", name="New seed").click()
    answered(sim)
    expect(rows).to_have_count(0)
    assert watched.problems == []


def test_the_payment_simulator_applies_a_changed_control_at_once(watched, site_url):
    """A control the reader changes starts the charges afresh with it: no
    result is left on the page that the controls no longer describe."""
    sim = start_simulation(watched, site_url, CHAPTER, "payment")
    balance, timeline = headline(sim), sim.locator(".sim-events li")
    sim.get_by_role("button", name="Run all charges").click()
    expect(balance).to_contain_text("$30.00 too much")         # seed 1, no key
    sim.get_by_label("Keys", exact=True).select_option("stable")
    expect(timeline).to_have_count(0)
    expect(sim.locator(".pay-headline"), "nothing more, seen or not").to_have_text(
        "5 orders to charge; none tried yet")
    sim.get_by_role("button", name="Step one attempt").click()
    expect(timeline).to_have_count(1)
    more_settings(sim)
    attempts = sim.get_by_label("Attempts", exact=True)
    attempts.fill("1")
    attempts.press("Enter")
    expect(timeline).to_have_count(0)
    sim.get_by_role("button", name="Play").click()
    expect(balance).to_contain_text("dead letter")
    expect(sim.locator("tr.dead").first, "attempts of 1 to leave a job dead").to_be_visible()
    assert watched.problems == []


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
    sim = start_simulation(watched, site_url, CHAPTER, "payment")
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
    expect(headline(sim)).to_contain_text("too much")
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
    sim = start_simulation(watched, site_url, CHAPTER, "payment")
    bars, result = sim.locator("svg.pay-bars"), headline(sim)
    sim.get_by_label("Keys", exact=True).select_option("fresh")
    sim.get_by_role("button", name="Run all charges").click()
    expect(result).to_contain_text("too much")
    answered(sim)
    owed, paid, more = re.fullmatch(r"Alice owes \$(\S+); the bank took \$(\S+): "
                                    r"\$(\S+) too much", result.inner_text()).groups()
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
    expect(result).to_have_text("Alice owes $50.00; the bank took exactly that")
    answered(sim)
    expect(bars.locator('[data-part="more"], [data-part="pending"]')).to_have_count(0)
    assert bar_width(sim, "actual", "owed") == pytest.approx(bar_width(sim, "expected", "owed"))
    assert watched.problems == []


def test_the_payment_bars_draw_a_charge_in_flight_as_pending(watched, site_url):
    """A stable key, seed 1, one attempt: the bank took $10.00 but the reply
    was lost and job 1 will retry. That $10.00 is drawn as pending, apart,
    not as more than she owes: so the line over the pictures says, and
    after it, for a screen reader, the order it was taken for."""
    sim = start_simulation(watched, site_url, CHAPTER, "payment")
    bars = sim.locator("svg.pay-bars")
    sim.get_by_label("Keys", exact=True).select_option("stable")
    sim.get_by_role("button", name="Step one attempt").click()
    expect(headline(sim)).to_have_text("Alice owes $0.00; the bank took $10.00: $10.00 pending")
    expect(sim.locator(".pay-headline .visually-hidden")).to_have_text(
        ". Alice paid $10.00 for orders worth $0.00: $10.00 for order 1, not done yet.")
    expect(sim.locator(".pay-why")).to_have_text(
        "Alice paid $10.00 for orders worth $0.00: $10.00 for order 1, not done yet.")
    actual = bars.locator('[data-bar="actual"]')
    expect(actual.locator('[data-part="pending"]')).to_have_count(1)
    expect(actual.locator('[data-part="more"]')).to_have_count(0)
    expect(actual.locator(".pay-part-label")).to_have_text(re.compile(r"\$10\.00 pending"))
    expect(actual.locator(".pay-amount")).to_have_text("$10.00")
    expect(bars.locator('[data-bar="expected"] .pay-amount')).to_have_text("$0.00")
    expect(bars).to_have_attribute("aria-label", re.compile(r"\$10\.00 pending"))
    sim.get_by_role("button", name="Run all charges").click()
    expect(headline(sim)).to_have_text("Alice owes $50.00; the bank took exactly that")
    answered(sim)
    expect(bars.locator('[data-part="pending"]')).to_have_count(0)
    assert watched.problems == []


def test_the_payment_picture_follows_the_theme_and_keeps_still_when_asked(watched, site_url):
    """The marks take the page's own colours, in either theme, and the
    newest fades in only for a reader who has not asked for less motion."""
    watched.emulate_media(color_scheme="light", reduced_motion="no-preference")
    sim = start_simulation(watched, site_url, CHAPTER, "payment")
    sim.get_by_role("button", name="Step one attempt").click()
    newest = sim.locator(".pay-attempt.pay-new")
    expect(newest).to_have_count(1)

    follows_the_theme_and_keeps_still(watched, lambda: newest.evaluate(
        """(mark) => [mark.querySelector(".pay-took"),
            mark.querySelector(".pay-label"), mark].map((part) => getComputedStyle(part))
            .map((style, i) => i < 2 ? style.fill : style.animationName)"""))
    assert watched.problems == []


def test_on_a_phone_the_payment_pictures_fit_their_words(new_page, site_url):
    """At 390 px the bars and every word about them fit the page; the lanes
    of a short run fit too, each headed by its job and what became of it,
    and a long run's lanes keep every word inside the picture."""
    page = new_page(390, 900)
    sim = start_simulation(page, site_url, CHAPTER, "payment")
    sim.get_by_role("button", name="Step one attempt").click()
    answered(sim)
    lanes = sim.locator("svg.pay-timeline")
    expect(lanes.locator('.pay-lane[data-job="1"] .pay-status')).to_contain_text("job 1")
    assert lanes.evaluate(OUTSIDE) == [] and not lanes.evaluate(WIDER)
    sim.get_by_label("Keys", exact=True).select_option("fresh")
    sim.get_by_role("button", name="Run all charges").click()
    expect(headline(sim)).to_contain_text("too much")
    answered(sim)
    bars = sim.locator("svg.pay-bars")
    expect(bars.locator('[data-part="more"]')).to_have_count(1)
    assert bars.evaluate(OUTSIDE) == [] and not bars.evaluate(WIDER)
    assert lanes.evaluate(OUTSIDE) == []


# How many rows the legend's keys take, each a mark and its words, centred
# in a row.
ROWS = """(keys) => { const tops = keys.map((key) => key.getBoundingClientRect().top)
    .sort((a, b) => a - b);
    return tops.filter((top, i) => i === 0 || top - tops[i - 1] > 8).length; }"""
JOBS_TABLE_LINES = f"""(table) => [...table.querySelectorAll("tr")].map((row) =>
    [...row.children].map({LINES}))"""


@pytest.mark.parametrize("width", [1280, 390])
def test_the_charge_jobs_table_says_in_a_few_words_what_the_worker_knows(
        new_page, site_url, width):
    """Seed 1, no key: beside what the bank charged for each order, what the
    worker can tell from its own log in a few words, its whole sentence the
    cell's title. At 1280 px each job is one line, at 390 px at most two,
    and the table never scrolls sideways."""
    from tools.sims.payment.engine import Payment
    engine = Payment()
    engine.run()
    truth = engine.state()["jobs"]
    engine.close()
    page = new_page(width, 900)
    sim = start_simulation(page, site_url, CHAPTER, "payment")
    sim.get_by_role("button", name="Run all charges").click()
    answered(sim)
    table = sim.locator(".sim-panels table")
    expect(table.get_by_role("columnheader")).to_have_text(
        ["Job", "The worker knows", "The bank charged"])
    expect(table.locator("tbody tr")).to_have_text([
        "1charged, maybe more (2 timeouts)⚠ 3 times", "2charged onceonce",
        "3charged, maybe more (1 timeout)⚠ twice", "4charged onceonce", "5charged onceonce"])
    expect(table.get_by_role("rowheader")).to_have_count(5)
    knows = table.locator("tbody td:nth-child(2)")
    for cell, job in zip(knows.all(), truth):
        expect(cell).to_have_attribute("title", job["worker_knows"])
    most = 1 if width == 1280 else 2
    for cells in table.evaluate(JOBS_TABLE_LINES):
        assert len(cells) == 3 and max(cells) <= most, cells
    box = sim.locator(".sim-panels .sim-scroll")
    assert box.evaluate("(box) => box.scrollWidth <= box.clientWidth")


def test_the_worker_knows_a_stable_key_charges_once_and_a_dead_job_is_unknown(watched, site_url):
    """With a stable key a timeout leaves one charge at most; a job that
    died after a timeout may or may not have been charged, and the worker
    cannot tell which (seed 4, Chapter 8's drill: job 3)."""
    sim = start_simulation(watched, site_url, CHAPTER, "payment")
    sim.get_by_label("Keys", exact=True).select_option("stable")
    more_settings(sim)
    seed = sim.get_by_label("Seed", exact=True)
    seed.fill("4")
    seed.press("Enter")
    answered(sim)
    sim.get_by_role("button", name="Run all charges").click()
    answered(sim)
    expect(sim.locator(".sim-panels tbody tr").nth(2)).to_have_text(
        "3dead, maybe charged once (the key)once")
    expect(headline(sim)).to_have_text("Alice owes $40.00; the bank took $50.00: "
                                       "$10.00 too much · 1 dead letter")
    assert watched.problems == []


@pytest.mark.parametrize("width", [1280, 390])
def test_up_front_only_the_keys_and_the_moves(new_page, site_url, width):
    """Before More settings is opened the reader sees the keys and four
    moves. It opens from the keyboard, and every setting in it has its
    label. The line over the pictures is one line at 1280 px, at most two
    at 390; the legend one line at 1280, and names "key seen" only where a
    key can be seen again: with a stable key."""
    page = new_page(width, 900)
    sim = start_simulation(page, site_url, CHAPTER, "payment")
    shown = sim.locator(".sim-body :is(button, input, select, summary):visible")
    names = shown.evaluate_all("""(controls) => controls.map((control) =>
        control.labels?.[0]?.textContent.trim() || control.textContent.trim())""")
    assert names[:6] == ["Keys", "Run all charges", "Play", "Step one attempt", "Reset",
                         "More settings"], names
    for hidden in ["Lost requests", "Lost replies", "Attempts", "Base (s)", "Cap (s)", "Jitter",
                   "Charges", "Seed", "Speed"]:
        expect(sim.get_by_label(hidden, exact=True)).to_be_hidden()
    expect(sim.get_by_role("button", name="New seed")).to_be_hidden()
    sim.get_by_role("button", name="Reset").focus()
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    expect(sim.get_by_label("Lost requests", exact=True)).to_be_focused()
    for label in ["Lost replies", "Attempts", "Base (s)", "Cap (s)", "Jitter", "Charges", "Seed",
                  "Speed"]:
        expect(sim.get_by_label(label, exact=True)).to_be_visible()
    sim.get_by_role("button", name="Run all charges").click()
    answered(sim)
    said, legend = headline(sim), sim.locator(".pay-legend")
    expect(said).to_contain_text("too much")
    assert said.evaluate(LINES) <= (1 if width == 1280 else 2), said.inner_text()
    keys = legend.locator(".pay-key:visible")
    expect(keys).to_have_count(4)
    if width == 1280:
        assert keys.evaluate_all(ROWS) == 1
    sim.get_by_label("Keys", exact=True).select_option("stable")
    answered(sim)
    expect(legend.locator(".pay-key:visible")).to_have_count(5)
    expect(legend).to_contain_text("key seen")
