"""Exercise 6 (Chapter 5): leases, so that a dead worker's job is taken over.

What the guide claims of ex06_leases.py beyond its transcripts. Each test
runs the file from the folder under test (code/, or a learner's WORK) in a
fresh copy, and is graded for it.
"""

import re
import sqlite3

import pytest

from tools.harness import sandbox
from tests.helpers import (Edit, Terminals, outbox, set_constant, statuses,
                           two_workers_on_held_mail)

pytestmark = pytest.mark.exercise("ex06_leases.py")

# The guide has the reader make this exercise from a copy of the one before,
# and shows only what changes: the two tests at the end hold both to it.
EDIT = Edit("ex05_two_workers.py", "ex06_leases.py",
            frozenset({"import argparse", "DATABASE", "LEASE_SECONDS", "SCHEMA", "claim",
                       "crash", "work", "show", "main"}),
            frozenset({"RACE_GAP_SECONDS", "claim_naive", "claim_atomic", "CLAIMS"}))


def crash_then_recover(terminals, crash_flag):
    ex06 = "ex06_leases.py"
    terminals.run(f"python3 {ex06} enqueue ann@example.com")
    crashed = terminals.run(f"python3 {ex06} work {crash_flag}")
    assert "crashing" in crashed
    healthy = terminals.start(f"python3 {ex06} work")
    terminals.wait_for(healthy, "no jobs left")
    terminals.sleep(10)
    return terminals.stop(healthy)


@pytest.mark.parametrize("crash, emails", [("--crash-before-send", 1),
                                           ("--crash-after-send", 2)])
def test_ex06_after_a_crash_a_healthy_worker_finishes_the_job(terminals, folder, crash, emails):
    """After the lease, a healthy worker takes the job over: one email in all
    if the crash came before the send, two if it came after."""
    printed = crash_then_recover(terminals, crash)
    assert "claimed job 1 (attempt 2)" in printed
    assert [line.split(",")[0] for line in outbox(folder)] == \
        ["welcome email to ann@example.com"] * emails


def lease_ends(folder):
    """{job id: locked_until} from ex06's table."""
    db = sqlite3.connect(folder / "ex06.db")
    try:
        return dict(db.execute("SELECT id, locked_until FROM jobs"))
    finally:
        db.close()


def test_ex06_a_live_lease_holds_the_job_until_it_runs_out(slow_terminals, folder):
    """A claim leaves a running job alone while its lease lasts, and takes it
    once the lease has run out (Study Drill 1: a worker crashes holding a
    ten-second lease; a healthy worker started at once waits, then claims
    the job as attempt 2, and Ann gets one email)."""
    terminals = slow_terminals
    ex06 = "ex06_leases.py"
    terminals.run(f"python3 {ex06} enqueue ann@example.com")
    crashed = terminals.run(f"python3 {ex06} work --lease 10 --crash-before-send")
    assert "claimed job 1 (attempt 1), lease 10 s" in crashed, crashed
    first_lease_ends = lease_ends(folder)[1]
    healthy = terminals.start(f"python3 {ex06} work")
    terminals.wait_for(healthy, "waiting for jobs")
    terminals.sleep(5)                        # half the lease, on the shared clock
    assert "claimed" not in healthy.output(), healthy.output()
    assert statuses(terminals, ex06) == ["running"]
    terminals.wait_for(healthy, "no jobs left")
    printed = terminals.stop(healthy)
    assert "claimed job 1 (attempt 2), lease 3 s" in printed, printed
    # it took the job once the first lease was over, not before: its own
    # lease, 3 s from its claim, ends 3 s or more after the first one did
    assert lease_ends(folder)[1] - 3 >= first_lease_ends, (lease_ends(folder), first_lease_ends)
    assert [line.split(",")[0] for line in outbox(folder)] == ["welcome email to ann@example.com"]


def test_ex06_list_shows_the_seconds_left_of_a_live_lease(terminals):
    """Study Drill 1: after a crash with a ten-second lease, `list` shows the
    job running with the seconds left of its lease (not EXPIRED), fewer as
    time passes, and EXPIRED once the ten seconds are over. Each figure is
    held to the shared virtual clock, read before and after each command:
    however slowly a busy machine runs them, the seconds left are what the
    clock says they must be (printed to the hundredth)."""
    ex06 = "ex06_leases.py"
    terminals.run(f"python3 {ex06} enqueue ann@example.com")
    worked = terminals.now()
    crashed = terminals.run(f"python3 {ex06} work --lease 10 --crash-before-send")
    crashed_by = terminals.now()
    assert "crashing before sending" in crashed, crashed

    def lease_column():
        """The job's row, its seconds left (if any), and the clock's times
        before and after the `list` that printed them."""
        before = terminals.now()
        listing = terminals.run(f"python3 {ex06} list")
        after = terminals.now()
        rows = listing.splitlines()[1:]
        assert len(rows) == 1 and rows[0].split()[1] == "running", listing
        left = re.findall(r"([\d.]+) s left", rows[0])
        return rows[0], [float(each) for each in left], before, after

    row, left, before, after = lease_column()
    assert "EXPIRED" not in row and len(left) == 1, row
    # The lease was taken between the work command's start and end, and
    # read between the list's: 10 s less the time between.
    first = left[0]
    assert 10 - (after - worked) - 0.01 <= first <= 10 - (before - crashed_by) + 0.01, row
    terminals.sleep(4)
    row, left, later, latest = lease_column()
    assert len(left) == 1, row
    assert max(4, later - after) - 0.02 <= first - left[0] <= latest - before + 0.02, \
        (first, row)
    terminals.sleep(7)
    row, left, _, _ = lease_column()
    assert "EXPIRED" in row and not left, row


def test_ex06_work_help_is_written_by_argparse(folder):
    """Study Drill 2: `work --help` prints argparse's help (a usage line, the
    commands and every option of `work`) and exits at once, running nothing."""
    try:
        status, output = sandbox.run("python3 ex06_leases.py work --help", folder,
                                     timeout=min(20, sandbox.COMMAND_TIMEOUT))
    except sandbox.TranscriptError as error:
        pytest.fail(f"`work --help` did not print its help and exit: {error}")
    assert status == 0, output
    assert output.startswith("usage: ex06_leases.py"), output
    assert "{enqueue,list,work,reset}" in output, output
    for option in ("--lease", "--crash-before-send", "--crash-after-send", "-h, --help"):
        assert option in output, (option, output)
    assert "waiting for jobs" not in output and not (folder / "ex06.db").exists(), output


def test_ex06_a_lease_shorter_than_the_work_sends_twice_without_any_crash(folder):
    """Two healthy workers, a 1 s lease, 2 s of work: two emails, no crash."""
    # The first send waits at the mail server until the other worker has
    # claimed the job too: no busy machine can make it finish within its lease.
    terminals = Terminals(folder, timewarp=5)
    try:
        emails, workers, printed = two_workers_on_held_mail(
            terminals, folder, "ex06_leases.py work --lease 1", ["ann@example.com"], 2)
    finally:
        terminals.close()
    assert sorted(re.findall(r"claimed job 1 \(attempt \d\)", "".join(printed))) == \
        ["claimed job 1 (attempt 1)", "claimed job 1 (attempt 2)"]
    assert not any("crashing" in output for output in printed)
    assert [worker.popen.returncode for worker in workers] == [0, 0]
    assert [line.split(",")[0] for line in emails] == ["welcome email to ann@example.com"] * 2


def test_the_guide_shows_exactly_the_parts_an_edited_exercise_changes():
    """The guide includes every part that ex06_leases.py adds to or changes in
    ex05_two_workers.py, by pyobject=, and nothing else of it (imports the
    prose names, which have no listing)."""
    assert EDIT.shown_by_the_guide() == EDIT.shown


def test_an_edited_exercise_differs_from_the_one_before_only_where_the_guide_says(
        folder, source_folder):
    """ex06_leases.py is your ex05_two_workers.py with the top-level statements the
    guide shows added or changed, and those it names deleted; every other
    statement does what it did, in the same order. Comments, docstrings and
    the names of a function's own variables may differ. (Without your
    ex05_two_workers.py, it is compared with the course's.)"""
    EDIT.check_against(folder, source_folder)


def test_ex06_lease_seconds_is_the_lease_a_worker_takes_unless_told_otherwise(terminals, folder):
    """Study Drill 3: with LEASE_SECONDS set to 60, a worker started without
    --lease takes a 60-second lease: it says so, and `list` shows nearly all
    of it left after the worker crashes."""
    set_constant(folder / "ex06_leases.py", "LEASE_SECONDS", 60)
    ex06 = "ex06_leases.py"
    terminals.run(f"python3 {ex06} enqueue ann@example.com")
    crashed = terminals.run(f"python3 {ex06} work --crash-before-send")
    assert "claimed job 1 (attempt 1), lease 60 s" in crashed, crashed
    listing = terminals.run(f"python3 {ex06} list")
    left = re.findall(r"([\d.]+) s left", listing)
    assert len(left) == 1 and 50 < float(left[0]) <= 60, listing


def test_ex06_list_shows_a_lease_only_for_a_running_job(terminals, folder):
    """`list` shows how much of a running job's lease is left, or EXPIRED;
    once a healthy worker has taken the job over and finished it, the job is
    done and holds no lease: neither seconds left nor EXPIRED."""
    crash_then_recover(terminals, "--crash-before-send")
    rows = terminals.run("python3 ex06_leases.py list").splitlines()[1:]
    assert len(rows) == 1 and rows[0].split()[1:3] == ["done", "2"], rows
    assert "EXPIRED" not in rows[0] and "left" not in rows[0], rows


def test_ex06_a_crash_prints_its_last_words_even_into_a_pipe(folder):
    """crash() prints its last words with flush=True, since os._exit would not
    write them out for it: with the output going into a pipe, where Python
    holds printed text back until a flush, the crashing worker's lines are
    all there."""
    status, output = sandbox.run("python3 ex06_leases.py enqueue ann@example.com && "
                                 "PYTHONUNBUFFERED= python3 ex06_leases.py work "
                                 "--crash-before-send | cat", folder)
    assert status == 0, output
    lines = output.splitlines()[1:]
    assert len(lines) == 3 and lines[0].endswith(": waiting for jobs (Ctrl-C to stop)"), output
    assert lines[1].endswith(": claimed job 1 (attempt 1), lease 3 s"), output
    assert lines[2].endswith(": crashing before sending!"), output
