"""sessions.py: console blocks run as sessions across terminals, with ^C
and a person's pace; every way a transcript can fail says where and how
(a harness that always passes would keep no promise)."""

import shutil
import time

import pytest
from sybil import Document

from tools import guide
from tools.harness import catalogue, sandbox, sessions
from tests.harness.demo import (PRODUCER_ADDS_TWO, WORKER_DOES_THEM, WORKER_STARTS, guide_text,
                                worker_groups_gone)

CODE = catalogue.CODE


# ---------------------------------------------------------------- the harness can fail

def what_you_should_see(exercise):
    """The first console block that runs the exercise as written (no edit)."""
    return next(b for b in guide.read_guide(catalogue.ROOT / "guide.md")
                if "console" in b.classes and not b.attributes
                and catalogue.exercise_of(b) == exercise)


def test_a_changed_word_is_caught(tmp_path):
    folder = tmp_path / "changed"
    shutil.copytree(CODE, folder)
    sandbox.apply_edit(folder, "ex01_slow_signup.py", "account created", "account made")
    block = what_you_should_see("ex01_slow_signup.py")
    assert sessions.check_block(block, CODE) is None
    message = sessions.check_block(block, folder)
    assert message.startswith(f"guide.md:{block.line + 1}: `$ python3 ex01_slow_signup.py`")
    assert "-ann@example.com: account created" in message
    assert "+ann@example.com: account made" in message


# ---------------------------------------------------------------- sessions, terminals, ^C

def test_a_session_across_two_terminals(demo):
    text, lines = guide_text(
        WORKER_STARTS, PRODUCER_ADDS_TWO, WORKER_DOES_THEM,
        ('{.console session="jobs" terminal="2" edit="producer.py: added => queued"}', """
         $ cat jobs.txt
         job 1
         job 2
         $ python3 producer.py 1
         producer: queued job 3
         """))
    assert sessions.check_text(text, demo) == dict.fromkeys(lines)
    assert worker_groups_gone(demo)


def test_a_block_alone_is_a_session_of_its_own(demo):
    text, lines = guide_text(("console", "$ python3 producer.py 1\nproducer: added job 1\n"),
                             ("console", "$ python3 producer.py 1\nproducer: added job 1\n"))
    assert sessions.check_text(text, demo) == dict.fromkeys(lines)


@pytest.mark.parametrize("body", [
    "$ python3 sender.py\nsending\nsent\n",
    "$ python3 sender.py 60\nsending\n^C\nstopped\n",   # ^C lands during the sleep
    "$ echo waiting; sleep 30\nwaiting\n^C\n",      # bash and its sleep both stop
], ids=["without ^C", "with ^C", "a group"])
def test_ctrl_c_at_a_moment(demo, body):
    # At 4 times faster, the 60 s sleep leaves 15 s to send ^C in.
    text, lines = guide_text(('{.console timewarp="4"}', body))
    assert sessions.check_text(text, demo) == dict.fromkeys(lines)


def test_a_later_block_alone_names_the_first(demo):
    text, lines = guide_text(WORKER_STARTS, PRODUCER_ADDS_TWO, WORKER_DOES_THEM)
    assert sessions.check_text(text, demo, only={lines[2]}) == {lines[2]: (
        f'guide.md:{lines[2]}: this block continues session "jobs", whose earlier blocks '
        f"did not all run before it; run the whole session, from its first block at "
        f"guide.md:{lines[0]}")}
    # The worker its first block started is stopped all the same.
    assert sessions.check_text(text, demo, only={lines[0], lines[2]})[lines[2]].startswith(
        f'guide.md:{lines[2]}: this block continues session "jobs", whose earlier blocks')
    assert worker_groups_gone(demo)


def test_output_with_nothing_running_in_its_terminal(demo):
    text, lines = guide_text(WORKER_STARTS, ('{.console session="jobs" terminal="2"}', """
        producer: added job 1
        """), WORKER_DOES_THEM)
    assert sessions.check_text(text, demo) == {
        lines[0]: None,
        lines[1]: f"guide.md:{lines[1] + 1}: output before the first `$ ` command, "
                  f'and nothing runs in terminal 2 of session "jobs"',
        lines[2]: f'guide.md:{lines[2]}: session "jobs" already failed at guide.md:{lines[1]}'}
    assert worker_groups_gone(demo)


def test_a_wrong_line_in_a_continuation(demo):
    text, lines = guide_text(
        WORKER_STARTS,
        ('{.console session="jobs" terminal="2"}',
         "$ python3 producer.py 2\nproducer: added job 1\n"),
        ('{.console session="jobs" terminal="2"}', "producer: added job 3\n"),  # it is job 2
        WORKER_DOES_THEM)
    results = sessions.check_text(text, demo)
    assert results[lines[2]] == (
        f"guide.md:{lines[1] + 1}: `$ python3 producer.py 2` (terminal 2) printed something "
        f"else:\n--- expected (guide)\n+++ actual\n@@ -1,2 +1,2 @@\n producer: added job 1\n"
        f"-producer: added job 3\n+producer: added job 2")
    assert results[lines[3]].endswith(f"already failed at guide.md:{lines[2]}")
    assert worker_groups_gone(demo)


def test_a_wrong_line_of_a_running_command_fails_early(demo, monkeypatch):
    monkeypatch.setattr(sessions, "EXIT_GRACE", 0.5)
    text, lines = guide_text(WORKER_STARTS, PRODUCER_ADDS_TWO, ('{.console session="jobs"}', """
        worker: did job 2
        ^C
        worker: stopped
        """))
    started = time.monotonic()
    message = sessions.check_text(text, demo)[lines[2]]
    assert time.monotonic() - started < sandbox.SYNC_TIMEOUT / 2     # no waiting for it
    assert message == (
        f"guide.md:{lines[2] + 2}: `$ python3 worker.py` (terminal 1) (from guide.md:"
        f"{lines[0] + 1}) printed something else than the guide shows up to here:\n"
        f"--- expected (guide)\n+++ actual\n@@ -1,2 +1,3 @@\n worker: waiting for jobs\n"
        f"+worker: did job 1\n worker: did job 2")
    assert worker_groups_gone(demo)


def test_a_sync_that_times_out(demo, monkeypatch):
    # Long enough for jobs 1 and 2 on a busy machine; job 3 never comes.
    monkeypatch.setattr(sandbox, "SYNC_TIMEOUT", 5)
    text, lines = guide_text(WORKER_STARTS, PRODUCER_ADDS_TWO, ('{.console session="jobs"}', """
        worker: did job 1
        worker: did job 2
        worker: did job 3
        ^C
        worker: stopped
        """))
    message = sessions.check_text(text, demo)[lines[2]]
    assert message.startswith(
        f"guide.md:{lines[2] + 4}: `$ python3 worker.py` (terminal 1) (from guide.md:"
        f"{lines[0] + 1}) had not printed, after 5 s, what the guide shows up to here:\n")
    assert message.endswith(" worker: did job 2\n-worker: did job 3")
    assert worker_groups_gone(demo)


@pytest.mark.parametrize("blocks, running, moment", [
    ([WORKER_STARTS, PRODUCER_ADDS_TWO], "`$ python3 worker.py` (terminal 1)",
     "at the end of the session"),
    ([WORKER_STARTS, ('{.console session="jobs"}', "$ python3 producer.py 1\n")],
     "`$ python3 worker.py` (terminal 1)", "when guide.md:{line}: `$ python3 producer.py 1` "
     "(terminal 1) is to start"),
], ids=["at the end", "before the next command"])
def test_a_command_still_running(demo, monkeypatch, blocks, running, moment):
    monkeypatch.setattr(sandbox, "EXIT_TIMEOUT", 0.5)    # its output is waited for as usual
    text, lines = guide_text(*blocks)
    assert sessions.check_text(text, demo)[lines[1]].startswith(
        f"guide.md:{lines[0] + 1}: {running} is still running "
        f"{moment.format(line=lines[1] + 1)} (0.5 s later); "
        f"end it with ^C in the transcript. Its last lines:\nworker: waiting for jobs\n")
    assert worker_groups_gone(demo)


def test_extra_lines_after_the_expected_ones(demo):
    text, lines = guide_text(('{.console timewarp="4"}',
                              "$ python3 sender.py 60\nsending\n^C\n"))
    assert sessions.check_text(text, demo)[lines[0]] == (
        f"guide.md:{lines[0] + 1}: `$ python3 sender.py 60` printed something else:\n"
        f"--- expected (guide)\n+++ actual\n@@ -1 +1,3 @@\n sending\n+\n+stopped")


@pytest.mark.parametrize("info, complaint", [
    ('{.console session="jobs" timewarp="5"}', "timewarp belongs on the session's first block"),
    ('{.console session="jobs" speed="5"}', "unknown console attribute speed"),
    ('{.console session="jobs" database="postgresql"}',
     "database belongs on the session's first block"),
], ids=["late timewarp", "unknown attribute", "late database"])
def test_session_attribute_mistakes(demo, info, complaint):
    text, lines = guide_text(WORKER_STARTS, (info, "$ true\n"))
    assert sessions.check_text(text, demo)[lines[1]].startswith(f"guide.md:{lines[1]}: {complaint}")
    assert worker_groups_gone(demo)


ASK_THE_DATABASE = """$ python3 -c "import os, psycopg; print(psycopg.connect(os.environ['DATABASE']).execute('SELECT 6 * 7').fetchone())"
(42,)
"""


def test_a_session_that_asks_for_postgresql_finds_its_server_in_DATABASE(demo):
    text, lines = guide_text(('{.console database="postgresql"}', ASK_THE_DATABASE))
    assert sessions.check_text(text, demo) == dict.fromkeys(lines)


def test_a_session_that_does_not_ask_has_no_DATABASE(demo):
    text, lines = guide_text(("console", "$ echo ${DATABASE:-none}\nnone\n"))
    assert sessions.check_text(text, demo) == dict.fromkeys(lines)


def test_a_database_the_harness_cannot_start(demo):
    text, lines = guide_text(('{.console database="mysql"}', "$ true\n"))
    assert sessions.check_text(text, demo) == {
        lines[0]: f'guide.md:{lines[0]}: database="mysql" is not a database the harness can'
                  f' start; "postgresql" is'}


def test_a_bad_timewarp(demo):
    text, lines = guide_text(('{.console timewarp="fast"}', "$ true\n"))
    assert sessions.check_text(text, demo) == {
        lines[0]: f'guide.md:{lines[0]}: timewarp="fast" is not a positive number'}


def test_a_bad_timings_value(demo):
    text, lines = guide_text(('{.console timings="any"}', "$ true\n"))
    assert sessions.check_text(text, demo) == {
        lines[0]: f'guide.md:{lines[0]}: timings="any" should be timings="vary" or '
                  f'timings="late"'}


def test_timings_vary_only_where_the_block_says_so(demo):
    slower = "$ echo took 9.0 s\ntook 1.5 s\n"      # the guide's run was faster
    text, lines = guide_text(('{.console timings="vary"}', slower), ("console", slower))
    problems = sessions.check_text(text, demo)
    assert problems[lines[0]] is None
    assert "printed something else" in problems[lines[1]]


def test_timings_may_be_late_only_where_the_block_says_so(demo):
    late = "$ echo '[ 0.30 s] go'\n[ 0.00 s] go\n"   # started late on a busy machine
    text, lines = guide_text(('{.console timings="late"}', late), ("console", late))
    problems = sessions.check_text(text, demo)
    assert problems[lines[0]] is None
    assert "printed something else" in problems[lines[1]]


def test_cd_moves_the_terminal_for_its_later_commands(demo):
    # a folder of its own: code/'s given files would be copied into a
    # capstone/ (capstone/world_given.py), and show in its `ls`
    (demo / "inner").mkdir()
    (demo / "inner" / "here.txt").write_text("inside\n")
    text, lines = guide_text(
        ('{.console session="cd"}', "$ cd inner\n$ cat here.txt\ninside\n"),
        ('{.console session="cd"}', "$ cat here.txt\ninside\n"),
        ('{.console session="cd" terminal="2"}', "$ ls inner\nhere.txt\n"))
    assert sessions.check_text(text, demo) == dict.fromkeys(lines)


# ---------------------------------------------------------------- a person's pace

LEASE = """
import signal, sys, time
from pathlib import Path
if sys.argv[1] == "take":
    Path("lease.txt").write_text(repr(time.time() + float(sys.argv[2])))
    print(f"took a lease of {sys.argv[2]} s")
elif sys.argv[1] == "check":
    held = time.time() < float(Path("lease.txt").read_text())
    print("lease held" if held else "lease expired")
else:
    start = time.time()
    try:                          # a ^C may land while print() is still returning
        print("press Ctrl-C")
        signal.pause()            # not a warped sleep: only a person's pause moves the clock
    except KeyboardInterrupt:
        print("\\npressed after", "a pause" if time.time() - start >= 1 else "no pause")
"""


# A slow person (pace 3) pauses 1.5 s before typing again, and 4.5 s before
# typing in another terminal. The machine pauses not at all, but the real time
# a Python takes to start counts: each lease leaves it a second or more (with
# 0.3 s, beside four CPU hogs and a whole suite, the machine's check missed it).
@pytest.mark.parametrize("lease, check_in, fails", [
    ("1", "1", True),
    ("3", "1", False),
    ("3", "2", True),
], ids=["same terminal", "same terminal, longer lease", "other terminal"])
def test_a_persons_pace_can_fail_where_the_machines_passes(demo, lease, check_in, fails):
    (demo / "lease.py").write_text(LEASE)
    text, lines = guide_text(
        ('{.console session="pace"}', f"$ python3 lease.py take {lease}\n"
                                      f"took a lease of {lease} s\n"),
        (f'{{.console session="pace" terminal="{check_in}"}}', "$ python3 lease.py check\n"
                                                               "lease held\n"))
    assert sessions.check_text(text, demo) == dict.fromkeys(lines)
    assert sessions.check_text(text, demo, pace=3) == {lines[0]: None, lines[1]: (
        f"guide.md:{lines[1] + 1}: `$ python3 lease.py check` (terminal {check_in}) printed "
        f"something else:\n--- expected (guide)\n+++ actual\n@@ -1 +1 @@\n"
        f"-lease held\n+lease expired") if fails else None}


# A slow person pauses 1.5 s before a ^C; the machine, with no pause, has a
# whole second of real time to send it (the program waits in signal.pause(),
# which does not move the warped clock as a loop of sleeps would).
def test_a_person_pauses_before_ctrl_c(demo):
    (demo / "lease.py").write_text(LEASE)
    body = "$ python3 lease.py wait\npress Ctrl-C\n^C\npressed after no pause\n"
    text, lines = guide_text(("console", body))
    assert sessions.check_text(text, demo) == {lines[0]: None}
    assert "+pressed after a pause" in sessions.check_text(text, demo, pace=3)[lines[0]]


def test_which_sessions_run_at_a_persons_pace():
    text, _ = guide_text(("console", "$ true\n"),
                         ("console", "$ true\n$ true\n"),
                         ("console", "$ sleep 9\n^C\n"),
                         ('{.console session="s"}', "$ true\n"),
                         ('{.console session="s" terminal="2"}', "$ true\n"))
    firsts = [region.parsed for region in sessions.parse_console_blocks(Document(text, "guide.md"))
              if region.parsed is region.parsed.session_blocks[0]]
    assert [sessions.paced(first.session_blocks) for first in firsts] == [False, True, True, True]
