"""The killable queue in Chromium: its tasks, its pictures and its controls.
The checks every simulation passes (fit, axe, the standard library, the focus)
are tools/sims/test_pages.py's; they make the moves in SMOKE."""
import re

import pytest
from playwright.sync_api import expect

from tests.browser import LINES, answered, start_simulation, task_done, visit, watch


CHAPTER = "when-workers-die-leases.html"
# What the shared checks do here, a move at a time (tests/browser.py make_moves):
# enough to fill its tables and pictures and to import all it needs.
SMOKE = ["Add a job", "Add a job", "Step to the next event", "Kill worker 1"]


def test_the_killable_queues_buttons_stay_put_while_the_clock_moves(watched, site_url):
    """The Kill button a reader is on is the same button after every redraw:
    a click made while the clock moves is not lost with a replaced button,
    nor is the focus. Pressed, it becomes that worker's Restart button."""
    sim = start_simulation(watched, site_url, CHAPTER, "killable-queue")
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
    sim = start_simulation(watched, site_url, CHAPTER, "killable-queue")
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
    sim = start_simulation(watched, site_url, CHAPTER, "killable-queue")
    sim.get_by_role("button", name="Add a job").click()
    step = sim.get_by_role("button", name="Step to the next event")
    said = sim.locator(".kq-picture svg desc")           # what the picture shows, in words
    sent = "worker 1 holds job 1, its email sent"
    for _ in range(10):                     # until worker 1 has sent, but not acknowledged
        if sent in said.text_content():
            break
        step.click()
        answered(sim)
    expect(said).to_contain_text(sent)
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
    job_1 = sim.locator(".sim-outbox li").filter(has_text="job 1 to ")
    expect(job_1).to_have_count(2)                      # the page starts with jobs 1 to 3
    expect(job_1.and_(sim.locator("li.duplicate"))).to_contain_text("⚠ duplicate")
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
    sim = start_simulation(watched, site_url, CHAPTER, "killable-queue")
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
    press(sim, "Kill worker 1")
    for _ in range(10):                                       # the lease runs out at 5 s
        if "time 5.0 s" in sim.locator(".sim-clock").inner_text():
            break
        press(sim, "Step to the next event")
    expect(sim.locator(".sim-clock")).to_contain_text("time 5.0 s")
    expect(lane(sim, 0).locator(".kq-lease-left")).to_have_count(0)
    expect(lane(sim, 0).locator(".kq-expired text")).to_have_text("lease ran out")
    expect(picture.locator("desc")).to_contain_text("lease ran out")
    assert watched.problems == []


def test_the_killable_queue_picture_draws_a_kill_on_the_workers_lane(watched, site_url):
    sim = start_simulation(watched, site_url, CHAPTER, "killable-queue")
    press(sim, "Add a job", "Step to the next event", "Step to the next event",
          "Kill worker 1")                                    # killed at 2 s, after sending
    kill = lane(sim, 0).locator(".kq-kill")
    expect(kill).to_have_count(1)
    expect(kill.locator("text")).to_have_text("killed")
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
    expect(restart.locator("text")).to_have_text("restarted")
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
    sim = start_simulation(watched, site_url, CHAPTER, "killable-queue")
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
    expect(duplicate.locator("text")).to_have_text("duplicate")
    expect(lane(sim, 0).locator(".kq-duplicate")).to_have_count(0)  # the first send was not
    expect(sim.locator(".kq-picture svg desc")).to_contain_text("duplicate")
    assert watched.problems == []


def test_the_killable_queue_picture_fits_a_phone(new_page, site_url):
    """On a 390 px phone the picture is drawn to the width it has: nothing
    of it reaches past its box, and the lease left still has its words."""
    page = new_page(390, 800)
    sim = start_simulation(page, site_url, CHAPTER, "killable-queue")
    press(sim, "Add a job", "Step to the next event")
    frame = sim.locator(".kq-picture").bounding_box()
    drawn = sim.locator(".kq-picture svg").bounding_box()
    assert frame["x"] <= drawn["x"] and drawn["x"] + drawn["width"] <= frame["x"] + frame["width"]
    words = lane(sim, 0).get_by_text("5.0 s left").bounding_box()
    assert words["x"] + words["width"] <= drawn["x"] + drawn["width"]


def test_each_workers_kill_and_restart_is_on_its_lane(new_page, site_url):
    """Beside the text and on a phone, a worker's button sits on its lane,
    under its name and left of the lane's time, so a reader can watch a job
    and kill its worker at once; the keyboard reaches it, and keeps it as it
    turns from Kill to Restart and back."""
    for width in (1280, 390):
        page = watch(new_page(width, 900))
        sim = start_simulation(page, site_url, CHAPTER, "killable-queue")
        time = sim.locator(".kq-picture svg .kq-axis-line").bounding_box()["x"]
        for worker in (0, 1, 2):
            on = sim.get_by_role("button", name=f"Kill worker {worker + 1}").bounding_box()
            name = lane(sim, worker).locator(".kq-name").bounding_box()
            edge = lane(sim, worker).locator(".kq-lane-edge").bounding_box()
            assert name["y"] + name["height"] <= on["y"], (width, worker)
            assert on["y"] + on["height"] <= edge["y"] + 1, (width, worker)
            assert on["x"] + on["width"] <= time + 1, (width, worker)
        kill = sim.get_by_role("button", name="Kill worker 2")
        kill.focus()
        page.keyboard.press("Enter")
        restart = sim.get_by_role("button", name="Restart worker 2")
        expect(restart).to_be_focused()
        expect(lane(sim, 1).locator(".kq-kill")).to_have_count(1)
        page.keyboard.press("Space")
        expect(kill).to_be_focused()
        assert page.problems == []


ENDS = """(svg) => {
    const arrow = svg.querySelector(".kq-handover .kq-arrow");
    const box = (selector) => svg.querySelector(selector).getBBox();
    const at = (length) => arrow.getPointAtLength(length);
    const diamond = box('.kq-lane[data-worker="0"] .kq-diamond');
    const to = svg.querySelector(".kq-handover").dataset.to;
    const taken = svg.querySelectorAll(`.kq-lane[data-worker="${to}"] .kq-claim`);
    const bar = taken[taken.length - 1].getBBox();
    const orphan = box('.kq-lane[data-worker="0"] .kq-orphan');
    const point = svg.querySelector(".kq-handover .kq-arrowhead").points[0];
    return { start: [at(0).x, at(0).y], end: [point.x, point.y], diamond: [diamond.x + diamond.width / 2,
        diamond.y + diamond.height], bar: [bar.x, bar.y], orphanEnd: orphan.x + orphan.width };
}"""


def test_the_handover_runs_from_where_the_dead_workers_lease_ran_out_to_the_taker(
        watched, site_url):
    """Killed holding job 1, worker 1 keeps it, a hollow bar, until its
    lease runs out at the diamond; an arrow runs from there to the bar of
    the worker that takes the job over."""
    sim = start_simulation(watched, site_url, CHAPTER, "killable-queue")
    press(sim, "Add a job", "Step to the next event", "Step to the next event",
          "Kill worker 1")
    expect(lane(sim, 0).locator(".kq-orphan")).to_have_count(1)
    expect(sim.locator(".kq-handover")).to_have_count(0)
    step = sim.get_by_role("button", name="Step to the next event")
    for _ in range(10):
        if "done" in (task_done(sim, "takeover").get_attribute("class") or ""):
            break
        step.click()
        answered(sim)
    handover = sim.locator('.kq-picture svg .kq-handover[data-job="1"]')
    expect(handover).to_have_count(1)
    expect(handover).to_have_attribute("data-from", "0")
    expect(handover).not_to_have_attribute("data-to", "0")
    ends = sim.locator(".kq-picture svg").evaluate(ENDS)
    assert ends["start"] == pytest.approx(ends["diamond"], abs=0.5)
    assert ends["end"] == pytest.approx(ends["bar"], abs=0.5)
    assert ends["orphanEnd"] == pytest.approx(ends["diamond"][0], abs=0.5)
    expect(sim.locator(".kq-picture svg desc")).to_contain_text(
        "took job 1 over at 5.5 s, after worker 1's lease on it ran out at 5.0 s")
    assert watched.problems == []


def test_under_play_a_dead_workers_lease_runs_down_on_its_lane(watched_alone, site_url):
    """On the page's own clock: Play, and the lease left of the job a dead
    worker holds counts down, while its hollow bar grows to now."""
    watched = watched_alone
    watched.clock.install()
    sim = start_simulation(watched, site_url, CHAPTER, "killable-queue")
    press(sim, "Add a job", "Step to the next event", "Step to the next event",
          "Kill worker 1")
    watched.clock.pause_at(watched.evaluate("Date.now()") + 10)
    expect(lane(sim, 0)).to_contain_text("3.0 s left")
    orphan = lane(sim, 0).locator(".kq-orphan")
    before = width_of(orphan)
    sim.get_by_role("button", name="Play").click()
    for _ in range(8):
        watched.clock.run_for(250)
        answered(sim)
    sim.get_by_role("button", name="Pause").click()
    answered(sim)
    left = float(lane(sim, 0).locator("text", has_text=" s left").text_content().split()[0])
    assert 0 < left < 3.0
    assert width_of(orphan) > before
    assert watched.problems == []


def test_the_key_is_short_and_each_other_mark_says_what_it_is(watched, site_url):
    """Four items in the key; the marks it leaves out have words on the
    picture and a title of their own. The hint says it with no jargon: the
    same moves give the same run."""
    sim = start_simulation(watched, site_url, CHAPTER, "killable-queue")
    assert sim.locator(".kq-legend li").count() <= 4
    press(sim, "Add a job", "Step to the next event", "Step to the next event",
          "Kill worker 1", "Restart worker 1")
    for mark in ("kq-kill", "kq-restart"):
        title = lane(sim, 0).locator(f".{mark} > title")
        expect(title).to_have_count(1)
        assert title.text_content().strip()
    expect(sim).not_to_contain_text("no dice")
    expect(sim.locator(".kq-hint")).to_contain_text("the same moves give the same run")
    assert watched.problems == []


def test_on_a_phone_the_time_axis_is_given_to_the_past(new_page, site_url):
    """At 390 px, once the job a dead worker held has been taken over after
    its 10 s lease and sent again, now stands at least two thirds of the way
    along the lanes (the lease ahead keeps the rest), and a claim's two
    seconds of sending make a bar wide enough for its words."""
    page = watch(new_page(390, 900))
    sim = start_simulation(page, site_url, CHAPTER, "killable-queue")
    sim.get_by_label("Lease (s)").fill("10")
    sim.get_by_label("Lease (s)").press("Enter")
    press(sim, "Add a job", "Step to the next event", "Step to the next event",
          "Kill worker 1")
    handover = sim.locator(".kq-picture svg .kq-handover")
    taken = sim.locator('.kq-picture svg .kq-job[data-job="1"]').last
    for _ in range(20):                  # the lease runs out at 10 s, the taker sends
        if handover.count() and taken.locator(".kq-send").count():
            break
        press(sim, "Step to the next event")
    axis = sim.locator(".kq-picture svg .kq-axis-line")
    left, right = float(axis.get_attribute("x1")), float(axis.get_attribute("x2"))
    now = float(sim.locator(".kq-picture svg .kq-now").get_attribute("x1"))
    assert (now - left) / (right - left) >= 2 / 3
    send = float(taken.locator(".kq-send").get_attribute("x1"))
    assert send - float(taken.locator(".kq-claim").get_attribute("x")) >= 40   # 2 s of sending
    expect(taken.locator(".kq-job-name")).to_have_text("job 1")
    assert page.problems == []


def test_it_starts_with_jobs_queued_and_reset_starts_so_again(watched, site_url):
    """Before Start and after it, three jobs wait; Play alone shows workers
    taking them; Reset brings the three back, with the lease in the box."""
    visit(watched, f"{site_url}/{CHAPTER}")
    mount = watched.locator('.sim-mount[data-sim="killable-queue"]')
    mount.scroll_into_view_if_needed()
    expect(mount.locator(".sim-panels tbody tr")).to_have_count(3)     # the first picture
    sim = start_simulation(watched, site_url, CHAPTER, "killable-queue")
    rows = sim.locator(".sim-panels tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.filter(has_text="queued")).to_have_count(3)
    expect(sim.locator(".kq-hint")).to_contain_text("Press Play, then kill worker 1")
    press(sim, "Step to the next event", "Add a job")
    expect(rows.filter(has_text="running")).to_have_count(3)
    sim.get_by_label("Lease (s)").fill("8")
    press(sim, "Reset")
    expect(rows).to_have_count(3)
    expect(rows.filter(has_text="queued")).to_have_count(3)
    expect(sim.locator(".sim-clock")).to_have_text("time 0.0 s · lease 8 s")
    assert watched.problems == []


# Every word on the lanes whose box the dashed now line runs through, and
# every two words on the picture whose boxes meet.
CROSSED = """(svg) => {
    const box = (element) => element.getBoundingClientRect();
    const meet = (a, b) => a.left < b.right && b.left < a.right
        && a.top < b.bottom && b.top < a.bottom;
    const now = box(svg.querySelector(".kq-now"));
    const words = [...svg.querySelectorAll("text")].filter((t) => box(t).width > 0);
    const onLanes = words.filter((t) => t.closest(".kq-lane"));
    const pairs = [];
    words.forEach((a, i) => words.slice(i + 1).forEach((b) => {
        if (meet(box(a), box(b))) pairs.push([a.textContent, b.textContent]);
    }));
    return { now: onLanes.filter((t) => meet(box(t), now)).map((t) => t.textContent), pairs };
}"""


@pytest.mark.parametrize("width", [1280, 390])
def test_no_words_on_the_lanes_meet_the_now_line_or_each_other(new_page, site_url, width):
    """Worker 1 killed holding a job: at every step after, while its lease
    runs out and another worker takes the job over, the dashed now line
    crosses none of the lanes' words, and no two words on the picture meet."""
    page = watch(new_page(width, 900))
    sim = start_simulation(page, site_url, CHAPTER, "killable-queue")
    press(sim, "Step to the next event", "Kill worker 1")
    clock = sim.locator(".sim-clock")
    picture = sim.locator(".kq-picture svg")
    seen = set()
    for _ in range(20):
        found = picture.evaluate(CROSSED)
        assert found == {"now": [], "pairs": []}, (clock.inner_text(), found)
        seen.update(picture.locator(".kq-lane text").all_text_contents())
        if float(clock.inner_text().split()[1]) >= 12:
            break
        press(sim, "Step to the next event")
    assert {"killed", "lease ran out"} <= seen, seen
    expect(sim.locator(".kq-handover")).to_have_count(1)
    assert page.problems == []


FITS = "(box) => [box.scrollWidth, box.clientWidth]"


def test_on_a_phone_the_jobs_table_fits_with_who_holds_each_job(new_page, site_url):
    """At 390 px the jobs table fits its box, with no sideways scroll and no
    line saying it scrolls, while it shows what the lesson needs: each job,
    its status, its attempts, and who holds it with the lease it has left."""
    page = watch(new_page(390, 900))
    sim = start_simulation(page, site_url, CHAPTER, "killable-queue")
    press(sim, "Step to the next event", "Add a job", "Step to the next event")
    table = sim.locator(".sim-panels table")
    box = sim.locator(".sim-panels .sim-scroll")
    wide, room = box.evaluate(FITS)
    assert wide <= room, (wide, room)
    expect(sim.locator(".sim-panels .sim-sideways")).to_be_hidden()
    expect(table.locator("thead th")).to_have_text(
        ["Job", "Email to", "Status", "Attempts", "Held by"])
    first = table.locator("tbody tr").first
    expect(first).to_contain_text("running")
    expect(first.locator("td").last).to_have_text(re.compile(r"^worker 1, \d+\.\d s left$"))
    expect(table.locator("tbody tr").last).to_contain_text("queued")
    assert page.problems == []


@pytest.mark.parametrize("width, most", [(1280, 1), (390, 2)])
def test_the_hint_is_a_headline_of_one_line_beside_the_text(new_page, site_url, width, most):
    """The hint under the controls says what to do in one line beside the
    text, and in at most two on a phone; the clock line takes one."""
    page = watch(new_page(width, 900))
    sim = start_simulation(page, site_url, CHAPTER, "killable-queue")
    press(sim, "Step to the next event")
    hint = sim.locator(".kq-hint")
    expect(hint).to_contain_text("kill worker 1 while it holds a job")
    assert hint.evaluate(LINES) <= most, hint.inner_text()
    clock = sim.locator(".sim-clock")
    assert clock.evaluate("(c) => c.getClientRects().length") == 1, clock.inner_text()
    assert page.problems == []
