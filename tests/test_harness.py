"""The harness itself: normalisation, comparison, the time warp, and proof
that it can fail (a harness that always passes would keep no promise)."""

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from sybil import Document

from tools import guide
from tools.harness import catalogue, compare, sandbox, sessions
from tools.harness import results as results_module

CODE = catalogue.ROOT / "code"
normalise = compare.normalise


# ---------------------------------------------------------------- normalisation

@pytest.mark.parametrize("expected, actual", [
    ("took 2.00 s", "took 2.13 s"),           # within 10%
    ("took 6.00 s", "took 5.41 s"),
    ("[ 0.00 s] go", "[ 0.04 s] go"),         # within the 0.05 s floor
    ("after 0.029 ms", "after 0.311 ms"),     # 0.05 s is 50 ms
    ("6.01s", "6.02s"),
])
def test_close_timings_take_the_expected_value(expected, actual):
    assert normalise(expected, actual) == expected


@pytest.mark.parametrize("expected, actual", [
    ("took 2.00 s", "took 2.21 s"),           # beyond 10%
    ("[ 0.00 s] go", "[ 0.06 s] go"),         # beyond the floor
    ("after 0.029 ms", "after 51.000 ms"),
    ("took 2.00 s", "took 2000 ms"),          # units must match
    ("a 1.00 s, b 2.00 s", "a 1.00 s"),       # different counts: no pairing
])
def test_other_timings_are_left_alone(expected, actual):
    assert normalise(expected, actual) == actual


def test_only_the_number_is_replaced():
    assert normalise("took 6.01s", "took 6.00 s") == "took 6.01 s"


def test_timings_pair_in_order():
    assert normalise("2.00 s then 4.00 s", "2.01 s then 4.02 s") == "2.00 s then 4.00 s"
    assert normalise("2.00 s then 4.00 s", "4.01 s then 2.01 s") == "4.01 s then 2.01 s"


def test_timings_that_vary_take_the_expected_value_in_the_same_unit():
    assert normalise("in 1.0 s", "in 2.7 s", timings="vary") == "in 1.0 s"
    assert normalise("in 1.0 s", "in 950 ms", timings="vary") == "in 950 ms"


@pytest.mark.parametrize("actual, close", [
    ("[ 0.24 s] go", True),                  # started late, beside four CPU hogs
    ("[ 0.50 s] go", True),
    ("[ 0.56 s] go", False),                 # beyond the 0.5 s, and the 0.05 s floor
    ("[ 2.00 s] go", False),                 # two seconds late is a wrong program
])
def test_timings_that_may_be_late(actual, close):
    assert (normalise("[ 0.00 s] go", actual, timings="late") == "[ 0.00 s] go") == close
    assert normalise("[ 0.00 s] go", actual) == actual       # without "late", none is close


def test_late_timings_are_never_early():
    assert normalise("[ 2.00 s] go", "[ 1.79 s] go", timings="late") == "[ 1.79 s] go"
    assert normalise("[ 2.00 s] go", "[ 1.81 s] go", timings="late") == "[ 2.00 s] go"


def test_what_is_not_a_timing():
    text = "3 signups (50 bytes) Python 3.11.7 42 seconds 0.5 sec v1.2s"
    assert compare.TIMING.findall(text) == []


def test_pids_take_the_expected_value():
    expected = "worker pid 4242 started\nPID 17 and pid=9"
    assert normalise(expected, "worker pid 31337 started\nPID 5 and pid=123456") == expected
    assert normalise("rapid 5", "rapid 6") == "rapid 6"


def test_pids_pair_by_identity_not_position():
    expected = "worker 7: start\nworker 8: start\nworker 7: done\nworker 8: done"
    # the same two processes, the other way round: each keeps its own number
    assert normalise(expected, "worker 51: start\nworker 60: start\n"
                               "worker 51: done\nworker 60: done") == expected
    swapped = normalise(expected, "worker 51: start\nworker 60: start\n"
                                  "worker 60: done\nworker 51: done")
    assert swapped == "worker 7: start\nworker 8: start\nworker 8: done\nworker 7: done"
    # a `...` may hide some lines: the pids still pair
    assert normalise("worker 7: start\n...\nworker 7: done",
                     "worker 51: start\nworker 51: work\nworker 51: done") == \
        "worker 7: start\nworker 7: work\nworker 7: done"
    # a third process the guide does not show keeps its number, and so fails
    assert normalise("worker 7: a", "worker 51: a\nworker 60: b") == \
        "worker 7: a\nworker 60: b"


# ---------------------------------------------------------------- comparison

def matches(expected, actual):
    return compare.output_matches(compare.tidy(expected), compare.tidy(actual))


@pytest.mark.parametrize("actual", ["a\nz\n", "a\nb\nz\n", "a\nb\nc\nz\n"])
def test_an_ellipsis_line_stands_for_any_number_of_lines(actual):
    assert matches("a\n...\nz\n", actual)


def test_an_ellipsis_line_keeps_lines_whole():
    assert not matches("a\n...\nz\n", "a\nbz\n")
    assert not matches("a\n...\nz\n", "xa\nz\n")
    assert matches("...\nz\n", "z\n") and matches("a\n...\n", "a\n")


def test_ellipsis_inside_a_line():
    assert matches("Python 3...\n", "Python 3.11.7\n")
    assert not matches("Python 3...\n", "Python 2.7.18\n")


def test_trailing_whitespace_and_final_blank_lines_do_not_count():
    assert matches("a\nb\n\n", "a   \nb\n")


def test_columns_matter():
    assert not matches("a  b\n", "a b\n")
    assert not matches("True\n", "1\n")


# ---------------------------------------------------------------- time warp

def run_python(tmp_path, script, timewarp=sandbox.TIMEWARP_FACTOR):
    (tmp_path / "script.py").write_text(script)
    status, output = sandbox.run("python3 script.py", tmp_path, timewarp=timewarp)
    assert status == 0, output
    return output


def test_a_warped_sleep_is_quick_but_the_clocks_see_it_all(tmp_path):
    output = run_python(tmp_path, """
import sitecustomize, time
asked = []                                  # what the warp really sleeps
sitecustomize.real_sleep = asked.append
start = [time.time(), time.monotonic(), time.perf_counter(),
         time.time_ns(), time.monotonic_ns(), time.perf_counter_ns()]
time.sleep(2)
end = [time.time(), time.monotonic(), time.perf_counter(),
       time.time_ns() / 1e9, time.monotonic_ns() / 1e9, time.perf_counter_ns() / 1e9]
print(*asked)
for before, after in zip(start[:3] + [n / 1e9 for n in start[3:]], end):
    print(after - before)
""")
    real, *advances = map(float, output.split())
    assert real == 2 / sandbox.TIMEWARP_FACTOR
    # each clock sees the 2 s, once (a busy machine may add real time to it)
    assert all(2 <= advance < 3 for advance in advances), advances


def test_threads_sleeping_together_share_the_time(tmp_path):
    # Together: both wait at a barrier, then sleep 1 s, which at a time warp
    # of 2 is half a second of real time. (At 20 it is 50 ms, and a busy
    # machine once started the second thread after the first had woken.)
    output = run_python(tmp_path, """
import threading, time
together = threading.Barrier(2)
def sleeper():
    together.wait()
    time.sleep(1)
start = time.perf_counter()
sleepers = [threading.Thread(target=sleeper) for _ in range(2)]
for t in sleepers: t.start()
for t in sleepers: t.join()
print(time.perf_counter() - start)
""", timewarp=2)
    assert 1 <= float(output) < 1.5


CLOCK_SCRIPT = """
import os, sys, time
from pathlib import Path
import sitecustomize
name, *sleeps = sys.argv[1:]
# Both start sleeping together, however long each took to start Python.
Path(f"{name}.ready").touch()
while not (Path("a.ready").exists() and Path("b.ready").exists()):
    sitecustomize.real_sleep(0.002)
start = time.time()
for seconds in sleeps:
    time.sleep(float(seconds))
say = sys.stdout.write                # one write a line: the two share one pipe
say(f"{name} slept {time.time() - start}\\n")
if name == "a":                       # a sleeps 3 s more, then writes the time down
    time.sleep(3)
    Path("a.tmp").write_text(repr(time.time()))
    os.rename("a.tmp", "a.txt")
else:                                 # b waits for it without sleeping on the clock
    while not Path("a.txt").exists():
        sitecustomize.real_sleep(0.002)
    say(f"{name} gap {time.time() - float(Path('a.txt').read_text())}\\n")
"""


@pytest.mark.parametrize("shared", [True, False])
def test_processes_of_a_session_share_one_clock(tmp_path, shared):
    (tmp_path / "clock.py").write_text(CLOCK_SCRIPT)
    clock = sandbox.new_clock(tmp_path / "clock") if shared else None
    # At a warp of 4, a sleeps 1.25 s of real time: a busy machine may keep b
    # waiting for a core that long, and b still sees its sleeps overlap a's.
    status, output = sandbox.run("python3 clock.py a 5 & python3 clock.py b 1 1 1 1 1; wait",
                                 tmp_path, timewarp=4, clock=clock)
    assert status == 0, output
    seen = {tuple(line.split()[:2]): float(line.split()[2]) for line in output.splitlines()}
    # Sleeping side by side, each sees the 5 s pass, once: a clock that added
    # the sleeps up would show 10. (Real time counts on every warped clock, so
    # b, kept waiting, sees up to 6.25; the bound is halfway to 10.)
    assert 5 <= seen["a", "slept"] < 7.5 and 5 <= seen["b", "slept"] < 7.5, output
    if shared:    # b reads a's time soon after a wrote it, on the same clock
        assert 0 <= seen["b", "gap"] < 1, output
    else:         # a's last 3 s of sleep moved only a's clock: 2.25 s past b's, as
        assert seen["b", "gap"] < -1, output  # the 0.75 s a really slept counts on both


def test_no_warp_without_timewarp(tmp_path):
    (tmp_path / "script.py").write_text("import time; print(time.sleep.__module__)\n")
    _, warped = sandbox.run("python3 script.py", tmp_path)
    _, plain = sandbox.run("TIMEWARP= python3 script.py", tmp_path)
    assert (warped.strip(), plain.strip()) == ("sitecustomize", "time")


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


def test_a_command_that_hangs_is_stopped(tmp_path):
    with pytest.raises(sandbox.TranscriptError, match="still running after 1 s"):
        sandbox.run("echo started; sleep 30", tmp_path, timeout=1)


# ---------------------------------------------------------------- sessions, terminals, ^C

WORKER = """
import os, time
with open(PGIDS, "a") as record:          # for the test: its process group
    record.write(f"{os.getpgrp()}\\n")
print("worker: waiting for jobs")
done = 0
try:
    while True:
        try:
            with open("jobs.txt") as jobs:
                waiting = [line.strip() for line in jobs if line.endswith("\\n")][done:]
        except FileNotFoundError:
            waiting = []
        for job in waiting:
            print(f"worker: did {job}")
            done += 1
        time.sleep(0.5)
except KeyboardInterrupt:
    print("\\nworker: stopped")
"""

PRODUCER = """
import sys, time
try:
    with open("jobs.txt") as jobs:
        number = len(jobs.readlines())
except FileNotFoundError:
    number = 0
for _ in range(int(sys.argv[1])):
    number += 1
    with open("jobs.txt", "a") as jobs:
        jobs.write(f"job {number}\\n")
    print(f"producer: added job {number}")
    time.sleep(1)
"""

SENDER = """
import time
try:
    print("sending")
    time.sleep(2)
    print("sent")
except KeyboardInterrupt:
    print("\\nstopped")
"""


@pytest.fixture
def demo(tmp_path):
    """A folder of demo programs: a worker that runs until ^C, a producer, a sender."""
    folder = tmp_path / "code"
    folder.mkdir()
    (folder / "worker.py").write_text(WORKER.replace("PGIDS", repr(str(tmp_path / "pgids"))))
    (folder / "producer.py").write_text(PRODUCER)
    (folder / "sender.py").write_text(SENDER)
    return folder


def guide_text(*blocks):
    """A guide holding console blocks, given as (info, body): its text, and their fence lines."""
    text, lines = "# Demo\n\n", []
    for info, body in blocks:
        lines.append(text.count("\n") + 1)
        text += f"```{info}\n{textwrap.dedent(body).lstrip()}```\n\n"
    return text, lines


WORKER_STARTS = ('{.console session="jobs"}', """
    $ python3 worker.py
    worker: waiting for jobs
    """)
PRODUCER_ADDS_TWO = ('{.console session="jobs" terminal="2"}', """
    $ python3 producer.py 2
    producer: added job 1
    producer: added job 2
    """)
WORKER_DOES_THEM = ('{.console session="jobs"}', """
    worker: did job 1
    worker: did job 2
    ^C
    worker: stopped
    """)


def worker_groups_gone(demo):
    """Whether every worker's process group has ended (all its processes reaped)."""
    groups = (demo.parent / "pgids").read_text().split()
    assert groups
    for group in groups:
        with pytest.raises(ProcessLookupError):
            os.killpg(int(group), 0)
    return True


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
    "$ python3 sender.py\nsending\n^C\nstopped\n",   # ^C lands during the sleep
    "$ echo waiting; sleep 30\nwaiting\n^C\n",      # bash and its sleep both stop
], ids=["without ^C", "with ^C", "a group"])
def test_ctrl_c_at_a_moment(demo, body):
    # At 4 times faster, the 2 s sleep leaves 0.5 s to send ^C in.
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
    monkeypatch.setattr(sandbox, "SYNC_TIMEOUT", 0.5)
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
        f"{lines[0] + 1}) had not printed, after 0.5 s, what the guide shows up to here:\n")
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
    monkeypatch.setattr(sandbox, "SYNC_TIMEOUT", 0.5)
    text, lines = guide_text(*blocks)
    assert sessions.check_text(text, demo)[lines[1]].startswith(
        f"guide.md:{lines[0] + 1}: {running} is still running "
        f"{moment.format(line=lines[1] + 1)} (0.5 s later); "
        f"end it with ^C in the transcript. Its last lines:\nworker: waiting for jobs\n")
    assert worker_groups_gone(demo)


def test_extra_lines_after_the_expected_ones(demo):
    text, lines = guide_text(('{.console timewarp="4"}', "$ python3 sender.py\nsending\n^C\n"))
    assert sessions.check_text(text, demo)[lines[0]] == (
        f"guide.md:{lines[0] + 1}: `$ python3 sender.py` printed something else:\n"
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


# ---------------------------------------------------------------- grading a WORK folder

def grade(work, *tests):
    """make check WORK=... as a subprocess. With --work, pytest collects only
    the tests that use the learner's files, never this one: no recursion.
    The results file that grading reads says what the summary prints."""
    with tempfile.TemporaryDirectory() as folder:
        results_file = Path(folder) / "results.json"
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *tests, f"--work={work}",
             f"--results-json={results_file}"],
            cwd=catalogue.ROOT, capture_output=True, text=True)
        results = json.loads(results_file.read_text(encoding="utf-8"))
    verdicts = re.findall(r"^((?:ex\d\d_\w+|herd|capstone/\w+)\.py)  (NOT RUN|NOT GRADED|\w+)$",
                          result.stdout,
                          re.MULTILINE)
    assert [(name, each["verdict"]) for name, each in results["exercises"].items()] == \
        verdicts, result.stdout
    assert results["folder"] == str(Path(work).absolute())
    return result.returncode, verdicts, result.stdout, results


EXERCISES = catalogue.FILES
# The exercises every learner is graded on: all but the optional files.
REQUIRED = [name for name in EXERCISES if name not in catalogue.OPTIONAL]


def test_an_empty_work_folder_fails_as_missing(tmp_path):
    """Every exercise is MISSING, and the optional lab is not named at all."""
    status, verdicts, output, _ = grade(tmp_path)
    assert status != 0
    assert verdicts == [(name, "MISSING") for name in REQUIRED], output


def test_a_copy_of_the_reference_passes(tmp_path):
    """Every transcript, graded against a copy of code/. (The claims tests run
    against code/ in the main suite; grading them again would double its time.)"""
    shutil.copytree(CODE, tmp_path / "mine")
    status, verdicts, output, results = grade(tmp_path / "mine", "guide.md")
    assert status == 0, output
    # shop and tinyq_pg have no transcript of their own: their tests are the
    # claims tests, which this run leaves out. (tinyq.py's is Chapter 9's
    # unique_key drill; the lab's chaos monkey is chaos_pg.py's.)
    no_transcript = ("capstone/shop.py", "capstone/tinyq_pg.py")
    assert verdicts == [(name, "NOT RUN" if name in no_transcript else "PASS")
                        for name in EXERCISES], output
    assert results["console_blocks"] == len([b for b in guide.read_guide(catalogue.GUIDE)
                                             if "console" in b.classes])


def test_the_optional_lab_is_graded_once_handed_in(tmp_path):
    """A learner who typed races_pg.py, and no other file: it is graded, on
    the harness's own PostgreSQL server, and tinyq_pg.py is not named."""
    (tmp_path / "mine" / "capstone").mkdir(parents=True)
    shutil.copy(CODE / "capstone" / "races_pg.py", tmp_path / "mine" / "capstone")
    status, verdicts, output, _ = grade(tmp_path / "mine", "guide.md", "tests/test_races_pg.py")
    assert verdicts == [(name, "MISSING") for name in REQUIRED] + [
        ("capstone/races_pg.py", "PASS")], output


def test_chapter_6s_optional_herd_is_graded_once_handed_in(tmp_path):
    """herd.py, and no other file: it is graded, in its place in the course."""
    (tmp_path / "mine").mkdir()
    shutil.copy(CODE / "herd.py", tmp_path / "mine")
    status, verdicts, output, _ = grade(tmp_path / "mine", "guide.md")
    assert verdicts == [(name, "PASS" if name == "herd.py" else "MISSING")
                        for name in EXERCISES if name in REQUIRED or name == "herd.py"], output


def test_the_lab_is_not_graded_where_no_server_can_start(tmp_path, monkeypatch):
    """races_pg.py handed in, where PostgreSQL cannot start: NOT GRADED, with
    the reason, and none of its tests or transcripts run."""
    (tmp_path / "mine" / "capstone").mkdir(parents=True)
    shutil.copy(CODE / "capstone" / "races_pg.py", tmp_path / "mine" / "capstone")
    monkeypatch.setenv("POSTGRESQL_BIN", str(tmp_path / "nowhere"))
    status, verdicts, output, results = grade(tmp_path / "mine", "guide.md",
                                              "tests/test_races_pg.py", "-v")
    assert verdicts == [(name, "MISSING") for name in REQUIRED] + [
        ("capstone/races_pg.py", "NOT GRADED")], output
    lab_blocks = [f"guide.md::line:{b.line},column:1" for b in guide.read_guide(catalogue.GUIDE)
                  if "console" in b.classes and catalogue.exercise_of(b) in catalogue.LAB]
    ran = output.partition("= exercises =")[0]
    assert lab_blocks and not any(name in ran for name in ["test_races_pg.py", *lab_blocks])
    why = ("The optional lab needs a PostgreSQL server, and none can be started here:"
           f" POSTGRESQL_BIN is {tmp_path / 'nowhere'}, which has no initdb")
    assert f"capstone/races_pg.py  NOT GRADED\n    {why}\n" in output
    assert results["exercises"]["capstone/races_pg.py"]["why"] == why


def test_a_changed_exercise_fails_with_a_diff(tmp_path):
    """Only ex01 (one word changed) and ex02 are handed in: the rest is missing."""
    (tmp_path / "mine").mkdir()
    for name in ("ex01_slow_signup.py", "ex02_jobs.py"):
        shutil.copy(CODE / name, tmp_path / "mine")
    sandbox.apply_edit(tmp_path / "mine", "ex01_slow_signup.py", "account created", "account made")
    status, verdicts, output, results = grade(tmp_path / "mine")
    assert status != 0
    assert verdicts == [("ex01_slow_signup.py", "FAIL"), ("ex02_jobs.py", "PASS")] + [
        (name, "MISSING") for name in REQUIRED[2:]], output
    assert re.search(r"^    guide.md:\d+: `\$ python3 ex01_slow_signup.py` printed", output, re.M)
    assert "    +ann@example.com: account made" in output
    assert "    reread: 1. The Waiter Who Cooks › Exercise 1: A Signup That Makes You Wait" \
        in output
    # the results file holds what the summary prints under a FAIL, step by step
    ex01 = results["exercises"]["ex01_slow_signup.py"]
    assert ex01["reread"] == "1. The Waiter Who Cooks › Exercise 1: A Signup That Makes You Wait"
    first = ex01["problems"][0]               # the guide's transcripts come first
    assert re.fullmatch(r"guide.md:\d+", first["where"]) and first["test"] is None, first
    assert first["claim"] == "`$ python3 ex01_slow_signup.py` printed something else.", first
    assert first["kind"] == "FAIL" and ex01["decided_by"] == 0
    assert "+ann@example.com: account made" in first["output"].splitlines(), first
    assert all(len(problem["output"].splitlines()) <= results_module.OUTPUT_LINES
               for problem in ex01["problems"])
    assert results["exercises"]["ex02_jobs.py"] == {"verdict": "PASS", "reread": None,
                                                    "decided_by": None, "problems": []}


# ---------------------------------------------------------------- which step decides

def diff_problem(*printed, expected=("worker: job 1 done",), where="guide.md:10"):
    """A transcript's failure as sessions.py words it, made into a problem."""
    diff = compare.short_diff(list(expected), list(printed))
    return results_module.transcript_problem(
        f"{where}: `$ python3 ex04_durable_queue.py work` printed something else:\n{diff}")


CRASH = ["Traceback (most recent call last):", '  File "ex04_durable_queue.py", line 85, in work',
         "    HANDLERS[kind](**json.loads(args))",
         "json.decoder.JSONDecodeError: Expecting property name enclosed in double quotes"]


def test_a_crash_the_guide_does_not_show_is_an_error():
    crashed = diff_problem(*CRASH)
    assert crashed["kind"] == "ERROR"
    assert crashed["claim"] == "`$ python3 ex04_durable_queue.py work` printed something else."
    assert crashed["output"].splitlines()[-1] == "+" + CRASH[-1]


def test_a_wrong_value_then_a_crash_is_a_fail():
    """The first line that differs decides: a wrong value, and the crash that follows it."""
    wrong = diff_problem("worker: claimed job 1, welcome_email {'address': 'ann@example.com'}",
                         *CRASH)
    assert wrong["kind"] == "FAIL"


def test_the_first_failing_step_decides_the_verdict():
    wrong, crashed = diff_problem("worker: job 2 done"), diff_problem(*CRASH)
    silent = diff_problem()                  # printed less than the guide shows, nothing else
    assert results_module.verdict_of([wrong, crashed]) == ("FAIL", 0)
    assert results_module.verdict_of([crashed, wrong]) == ("ERROR", 0)
    # a file that defines nothing prints nothing, then crashes: that crash says why
    assert results_module.verdict_of([silent, crashed, wrong]) == ("ERROR", 1)
    assert results_module.verdict_of([silent]) == ("FAIL", 0)


def test_a_problem_is_cut_to_twelve_lines_with_the_error_kept():
    frames = [f'  File "/usr/lib/python3.11/x.py", line {n}, in f' for n in range(8)]
    problem = diff_problem(*CRASH[:3], *frames, CRASH[3],
                           expected=[f"line {n}" for n in range(6)])
    lines = problem["output"].splitlines()
    assert len(lines) <= results_module.OUTPUT_LINES, lines
    assert lines == ["-line 0", "-line 1", "-[...]", "+" + CRASH[0], "+" + CRASH[1], "+" + CRASH[2],
                     "+  ...", "+" + CRASH[3]]


def test_a_traceback_the_guide_shows_too_keeps_both_errors():
    """Where the guide shows a traceback with `...` for its frames, the short
    diff keeps the guide's error, the program's last frame and its error."""
    problem = diff_problem(CRASH[0], '  File "<string>", line 1, in <module>', *CRASH[1:3],
                           "AttributeError: module 'ex04' has no attribute 'claim'",
                           expected=[CRASH[0], "...", "ValueError: no handler"])
    assert problem["output"].splitlines() == [
        " " + CRASH[0], "-...", "-ValueError: no handler", "+  ...", "+" + CRASH[1],
        "+" + CRASH[2], "+AttributeError: module 'ex04' has no attribute 'claim'"]
    assert problem["kind"] == "FAIL"        # the guide shows a crash here


# ---------------------------------------------------------------- a person's pace

def test_a_persons_pause_is_quick_but_the_clock_sees_it(tmp_path):
    clock = sandbox.new_clock(tmp_path / "clock")
    start = time.monotonic()
    sandbox.pause(clock, 2, 20)
    real = time.monotonic() - start
    skip = struct.unpack("d", clock.read_bytes())[0]
    assert 0.1 <= real < 0.5, real               # 2 s at 20 times faster, plus a little
    assert 2 <= real + skip < 2.1, (real, skip)  # the virtual clock moved on 2 s


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


# ---- make soak

SOAK = Path(__file__).resolve().parent.parent / "tools" / "soak.py"


def soak(tmp_path, test, runs):
    (tmp_path / "test_soaked.py").write_text(test)
    return subprocess.run([sys.executable, str(SOAK), "--runs", str(runs), "--hogs", "1",
                           "--workers", "0", "--", str(tmp_path / "test_soaked.py")],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("test, runs, status, last", [
    ("def test_ok(): pass\n", 2, 0, "soak: 2 of 2 runs passed"),
    ("def test_broken(): assert False\n", 1, 1, "soak: 0 of 1 runs passed; logs in "),
], ids=["green", "red"])
def test_soak_reports_each_run_and_stops_its_hogs(tmp_path, test, runs, status, last):
    """make soak reports how each run ended, stops its hogs by their ids, and
    exits 0 only if every run passed."""
    result = soak(tmp_path, test, runs)
    lines = result.stdout.splitlines()
    assert result.returncode == status, result.stdout + result.stderr
    verdict = "passed" if status == 0 else "FAILED"
    assert [line.split(" in ")[0] for line in lines[1:-2]] == [
        f"run {run} of {runs}: {verdict}" for run in range(1, runs + 1)]
    assert lines[-1].startswith(last)
    started = re.search(r"beside 1 hogs \(ids (\d+)\)", lines[0]).group(1)
    assert lines[-2] == f"hogs stopped: {started}"
    assert not Path(f"/proc/{started}").exists()     # killed and reaped
