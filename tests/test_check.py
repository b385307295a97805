"""The learner's checker, `python3 check.py` (tools/check.py), used as a
learner uses it: from their folder of exercises, on files that pass, that
hold a classic mistake, that will not compile, that hang, or are missing;
interrupted with Ctrl-C; watching a file; remembering what passed."""
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from tools import check, guide
from tools.harness.catalogue import CODE, FILES, OPTIONAL, ROOT, exercise_of
from tools.mistakes import MISTAKES
from tests.helpers import as_in_a_terminal

HANGS = "import time\nwhile True:\n    time.sleep(1)\n"


def learner(tmp_path, *files):
    """A learner's folder holding code/'s copies of these exercise files."""
    folder = tmp_path / "jobs"
    folder.mkdir(parents=True)
    for name in files:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(CODE / name, folder / name)
    return folder


# The checker as check.py starts it, once .venv is ready (the test of
# check.py itself is below).
CHECKER = [sys.executable, "-m", "tools.check"]


def run_check(folder, *args, timeout=120, **env):
    """The checker with ARGS, run from the learner's folder as they would."""
    return subprocess.run([*CHECKER, *args], cwd=folder,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **env})


def transcript_commands(exercise):
    """The `$ ` lines of the exercise's console blocks, in the guide's order."""
    return [line for block in guide.read_guide(ROOT / "guide.md")
            if "console" in block.classes and exercise_of(block) == exercise
            for line in block.source.splitlines() if line.startswith("$ ")]


def told(stdout, mark):
    return [line[4:] for line in stdout.splitlines() if line.startswith(f"  {mark} ")]


def test_a_passing_exercise_is_told_step_by_step_and_remembered(tmp_path):
    """A file that does what the guide says passes: each transcript command,
    then each claim, ticked in the guide's order, and the pass remembered."""
    folder = learner(tmp_path, "ex02_jobs.py")
    run = run_check(folder)
    assert run.returncode == 0, run.stdout + run.stderr
    assert re.match(r"checking ex02_jobs\.py \(about \d+ s\)…\n", run.stdout)
    ticked = told(run.stdout, check.PASSED)
    commands = transcript_commands("ex02_jobs.py")
    assert ticked[:len(commands)] == commands
    claims = ticked[len(commands):]
    assert claims and not any(claim.startswith("$ ") for claim in claims)
    assert "A job holding a sqlite3 connection cannot be turned into JSON (TypeError)." in claims
    assert f"PASS: ex02_jobs.py, all {len(ticked)} steps." in run.stdout
    assert "Hint" not in run.stdout
    assert set(check.still_passing(folder)) == {"ex02_jobs.py"}
    assert "Next: ex01_slow_signup.py, in 1. The Waiter Who Cooks" in run.stdout


def test_the_first_failing_step_stops_the_check_and_says_where_to_look(tmp_path):
    """A classic mistake that every transcript hides: the transcripts are
    ticked, the first claim that sees it fails, and nothing after it runs;
    an exercise that passed before no longer counts."""
    folder = learner(tmp_path, "ex07_retries.py")
    assert run_check(folder).returncode == 0
    path = folder / "ex07_retries.py"
    path.write_text(path.read_text().replace(
        "return fraction * min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1))",
        "return fraction * BACKOFF_BASE * 2 ** (attempt - 1)"))
    run = run_check(folder)
    assert run.returncode == 1
    assert told(run.stdout, check.PASSED)[:len(transcript_commands("ex07_retries.py"))] \
        == transcript_commands("ex07_retries.py")
    failed = told(run.stdout, check.FAILED)
    assert len(failed) == 1
    assert re.search(r"^FAIL: ex07_retries\.py, at tests/exercises/test_ex07\.py:\d+ "
                     r"\(test_ex07_\w+\)\.$", run.stdout, re.M)
    assert "Reread: 6. Retry: Trying Again, Politely › Exercise 7: Retries." in run.stdout
    cap = next(m for m in MISTAKES if m.what == "backoff without its cap")
    assert f"Hint: {cap.hint}" in run.stdout.splitlines()
    assert "PASS" not in run.stdout
    assert check.still_passing(folder) == []


def test_a_failing_command_comes_after_the_commands_of_its_block_that_passed(tmp_path):
    """In a transcript of several commands, those before the failing one are
    ticked, and the failing one is named."""
    folder = learner(tmp_path, "ex07_retries.py")
    path = folder / "ex07_retries.py"
    path.write_text(path.read_text().replace("if attempts >= MAX_ATTEMPTS:",
                                             "if attempts + 1 >= MAX_ATTEMPTS:"))
    run = run_check(folder)
    assert run.returncode == 1
    lines = run.stdout.splitlines()
    failed = next(at for at, line in enumerate(lines) if line.startswith(f"  {check.FAILED}"))
    assert lines[failed - 1] == f"  {check.PASSED} $ python3 ex07_retries.py setup"
    assert lines[failed].startswith(f"  {check.FAILED} `$ python3 ex07_retries.py work --seed 1`")


def test_the_lab_where_no_server_can_start_is_not_graded_and_says_why(tmp_path):
    """Where PostgreSQL cannot start (here POSTGRESQL_BIN names a folder
    without initdb), the lab's file is NOT GRADED, with the reason: never a
    PASS of no steps."""
    folder = learner(tmp_path, "capstone/races_pg.py")
    run = run_check(folder, "races_pg", POSTGRESQL_BIN=str(tmp_path / "nowhere"))
    assert run.returncode == 1
    assert "NOT GRADED: capstone/races_pg.py. The optional lab needs a PostgreSQL server, " \
        f"and none can be started here: POSTGRESQL_BIN is {tmp_path / 'nowhere'}" in run.stdout
    assert "PASS" not in run.stdout


def test_a_file_that_will_not_compile_is_an_error_at_its_line(tmp_path):
    """A syntax error is ERROR, with the file, line and column, and the line."""
    folder = learner(tmp_path, "ex01_slow_signup.py")
    path = folder / "ex01_slow_signup.py"
    lines = path.read_text().splitlines(True)
    lines[4] = "def broken(:\n"
    path.write_text("".join(lines))
    run = run_check(folder)
    assert run.returncode == 1
    assert f"  {check.FAILED} ex01_slow_signup.py:5:12: invalid syntax" in run.stdout \
        or re.search(rf"  {check.FAILED} ex01_slow_signup\.py:5:\d+: ", run.stdout)
    assert "    def broken(:" in run.stdout
    assert "ERROR: ex01_slow_signup.py is not Python yet" in run.stdout


def test_a_missing_exercise_is_named_with_its_chapter(tmp_path):
    folder = learner(tmp_path, "ex01_slow_signup.py")
    run = run_check(folder, "ex05")
    assert run.returncode == 2
    assert run.stderr == (f"check.py: {folder} has no ex05_two_workers.py: you type it in "
                          f"4. The Worker: Where Work Happens › Exercise 5: Two Workers and a "
                          f"Race\n")
    empty = learner(tmp_path / "other", )
    run = run_check(empty)
    assert run.returncode == 2
    assert "holds no exercise file yet; the first is ex01_slow_signup.py, in 1." in run.stderr
    assert run_check(folder, "ex99").returncode == 2


def test_the_file_changed_last_is_the_one_checked(tmp_path):
    """With no exercise named, the newest file is checked; from inside the
    capstone folder, the folder above is the learner's."""
    folder = learner(tmp_path, "ex01_slow_signup.py", "ex02_jobs.py", "capstone/tinyq.py")
    old = time.time() - 100
    os.utime(folder / "ex02_jobs.py", (old, old))
    os.utime(folder / "capstone" / "tinyq.py", (old, old))
    assert check.exercise_to_check(folder, None) == "ex01_slow_signup.py"
    os.utime(folder / "ex02_jobs.py")
    assert check.exercise_to_check(folder, None) == "ex02_jobs.py"
    os.chdir(folder / "capstone")
    assert check.learner_folder(None) == folder


@pytest.mark.parametrize("name, exercise", [
    ("ex05", "ex05_two_workers.py"), ("5", "ex05_two_workers.py"),
    ("05", "ex05_two_workers.py"), ("ex05_two_workers.py", "ex05_two_workers.py"),
    ("tinyq", "capstone/tinyq.py"), ("capstone/tinyq.py", "capstone/tinyq.py"),
    ("herd.py", "herd.py"), ("CHAOS", "capstone/chaos.py"),
    ("ex09", "ex09_charge_worker.py"), ("9", "ex09_charge_worker.py"),
    ("ex09_webhooks", "ex09_webhooks.py")])
def test_an_exercise_can_be_named_as_a_learner_would(name, exercise):
    assert check.exercise_named(name) == exercise


def test_a_hang_is_a_timeout_that_names_its_step(tmp_path):
    """A program that never ends is TIMEOUT, at the command that hung."""
    folder = learner(tmp_path, "ex01_slow_signup.py")
    (folder / "ex01_slow_signup.py").write_text(HANGS)
    run = run_check(folder, COMMAND_TIMEOUT="3")
    assert run.returncode == 1
    assert re.search(rf"^  {check.FAILED} .*`\$ python3 ex01_slow_signup\.py`", run.stdout, re.M)
    assert re.search(r"^TIMEOUT: ex01_slow_signup\.py, at guide\.md:\d+\.$", run.stdout, re.M)


def test_a_check_that_runs_past_its_limit_is_a_timeout_at_its_step(tmp_path, monkeypatch):
    """Whatever hangs, the check ends at its own limit: TIMEOUT, naming the
    step it was waiting for."""
    folder = learner(tmp_path, "ex01_slow_signup.py")
    (folder / "ex01_slow_signup.py").write_text(HANGS)
    monkeypatch.setenv("COMMAND_TIMEOUT", "120")     # the harness waits longer
    said = []
    verdict, seconds = check.check(folder, "ex01_slow_signup.py", said.append, seconds=20)
    assert verdict == "TIMEOUT" and seconds < 60
    assert said[0] == f"  {check.FAILED} $ python3 ex01_slow_signup.py"
    assert said[1].startswith("\nTIMEOUT: ex01_slow_signup.py was still being checked")


def test_a_program_that_deletes_files_leaves_the_learners_folder_alone(tmp_path):
    """The checker runs a copy: a program that deletes every file beside it
    deletes none of the learner's."""
    folder = learner(tmp_path, "ex02_jobs.py", "ex03_memory_queue.py")
    (folder / "ex04_durable_queue.py").write_text(
        "import os\nfor name in os.listdir('.'):\n    os.remove(name)\n")
    before = {path: path.read_bytes() for path in folder.iterdir()}
    assert run_check(folder, "ex04").returncode == 1
    after = {path: path.read_bytes() for path in folder.iterdir() if path.name != check.PROGRESS}
    assert after == before


def carrying(mark):
    """The processes whose environment holds MARK (every one a run started)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if mark.encode() in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            pass
    return found


def command_line(pid):
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""                       # it ended meanwhile


def test_ctrl_c_stops_the_check_and_everything_it_started(tmp_path):
    """Ctrl-C in the middle of a check stops it, says so, and leaves no
    process behind: not pytest, not the learner's hanging program."""
    folder = learner(tmp_path, "ex01_slow_signup.py")
    (folder / "ex01_slow_signup.py").write_text(HANGS)
    mark = f"CHECK_TEST_MARK={uuid.uuid4().hex}"
    process = subprocess.Popen(CHECKER, cwd=folder,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True, preexec_fn=as_in_a_terminal,
                               env={**os.environ, mark.split("=")[0]: mark.split("=")[1]})
    deadline = time.monotonic() + 60
    while not any(b"ex01_slow_signup" in command_line(pid) for pid in carrying(mark)):
        assert time.monotonic() < deadline, "the learner's program never started"
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGINT)        # what a terminal does on Ctrl-C
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert "stopped (Ctrl-C): the check and every program it started are stopped." in err
    assert carrying(mark) == []


def test_piped_into_head_it_stops_quietly_and_leaves_nothing_running(tmp_path):
    """`check.py | head -1`: once the reader of its output has gone, the
    check stops with no traceback, and no program of it is left behind."""
    folder = learner(tmp_path, "ex01_slow_signup.py")    # its next line is its first step's
    mark = f"CHECK_TEST_MARK={uuid.uuid4().hex}"
    process = subprocess.Popen(CHECKER, cwd=folder,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               preexec_fn=as_in_a_terminal,
                               env={**os.environ, mark.split("=")[0]: mark.split("=")[1]})
    assert process.stdout.readline().startswith(b"checking ex01_slow_signup.py")
    process.stdout.close()                       # what head does after its line
    with process.stderr:
        err = process.stderr.read().decode()
    process.wait(timeout=60)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert process.returncode == 1
    assert carrying(mark) == []


def test_watch_checks_again_on_each_save_and_never_moves_on(tmp_path):
    """--watch checks the exercise, then again when its file is saved, even
    while the check that failed is still ending; a newer file of another
    exercise is never checked."""
    folder = learner(tmp_path, "ex01_slow_signup.py", "ex02_jobs.py")
    fine = (folder / "ex01_slow_signup.py").read_text()
    (folder / "ex01_slow_signup.py").write_text(fine.replace("create_account(address)\n", "", 1))
    process = subprocess.Popen([*CHECKER, "ex01", "--watch"],
                               cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               text=True, start_new_session=True, preexec_fn=as_in_a_terminal)
    printed = queue.Queue()
    reader = threading.Thread(target=lambda: [printed.put(line) for line in process.stdout])
    reader.start()
    lines = []

    def read_until(pattern, seconds=90):
        deadline = time.monotonic() + seconds
        while not lines or not re.match(pattern, lines[-1]):
            try:
                lines.append(printed.get(timeout=max(0, deadline - time.monotonic())))
            except queue.Empty:
                raise AssertionError(f"no {pattern!r} in {seconds} s:\n{''.join(lines)}")

    try:
        read_until(r"(FAIL|ERROR): ex01_slow_signup\.py")
        # saved as the failed check stops its programs, before it says it watches
        (folder / "ex02_jobs.py").touch()
        (folder / "ex01_slow_signup.py").write_text(fine)
        read_until(r"watching ex01_slow_signup\.py")
        read_until(r"PASS: ex01_slow_signup\.py")
        read_until(r"watching ex01_slow_signup\.py")
    finally:
        os.killpg(process.pid, signal.SIGINT)
        process.wait(timeout=60)
        reader.join()                    # it ends with the checker's output
        process.stdout.close()
    text = "".join(lines)
    assert [line for line in text.splitlines() if line.startswith("checking")] == \
        [line for line in text.splitlines() if line.startswith("checking ex01_slow_signup")]
    assert len(re.findall(r"^(PASS|FAIL|ERROR|TIMEOUT): ", text, re.M)) == 2, text


def test_progress_lists_what_passed_and_what_comes_next(tmp_path, capsys):
    """The progress file remembers each pass with its file's digest: an edit
    since then does not count, the whole course passing is said, and
    deleting the file starts over."""
    folder = learner(tmp_path, *FILES)
    required = [file for file in check.course_order() if file not in OPTIONAL]
    for file in required[:-1]:
        check.record(folder, file, "PASS", 1.0)
    check.show_progress(folder)
    said = capsys.readouterr().out
    assert f"({len(required) - 1} of {len(required)})" in said
    assert f"Next: {required[-1]}, in" in said
    check.record(folder, required[-1], "PASS", 1.0)
    check.show_progress(folder)
    assert "Every exercise of the course passes." in capsys.readouterr().out
    (folder / required[0]).write_text("# changed\n")
    check.show_progress(folder)
    assert f"Next: {required[0]}, in" in capsys.readouterr().out
    (folder / check.PROGRESS).unlink()
    check.show_progress(folder)
    assert "none yet" in capsys.readouterr().out


def test_progress_alone_is_shown_on_asking(tmp_path):
    folder = learner(tmp_path, "ex01_slow_signup.py")
    run = run_check(folder, "--progress")
    assert run.returncode == 0
    assert run.stdout == ("\nPassed so far (course-progress.txt): none yet (0 of 12).\n"
                          "Next: ex01_slow_signup.py, in 1. The Waiter Who Cooks › "
                          "Exercise 1: A Signup That Makes You Wait.\n")


def test_a_crash_is_shown_in_the_learners_own_file(tmp_path):
    """A traceback names the learner's file, not the copy it ran in."""
    folder = learner(tmp_path, "ex01_slow_signup.py")
    path = folder / "ex01_slow_signup.py"
    path.write_text(path.read_text().replace("    create_account(address)\n",
                                             "    create_acount(address)\n"))
    run = run_check(folder)
    assert run.returncode == 1
    assert re.search(r'^ +\+  File "ex01_slow_signup\.py", line \d+, in ', run.stdout, re.M), \
        run.stdout
    assert "Hint" not in run.stdout      # the mistakes that end at that step print, not crash


def test_the_course_order_is_the_guides():
    order = check.course_order()
    assert sorted(order) == sorted(FILES)
    assert order.index("capstone/chaos.py") < order.index("ex09_charge_worker.py")
    assert order[:3] == ["ex01_slow_signup.py", "ex02_jobs.py", "ex03_memory_queue.py"]


def test_check_py_starts_the_checker_once_the_tools_are_there(tmp_path):
    """check.py, run by any python3, hands over to the checker in .venv. (It
    sets .venv up first where it is missing, which `make` does with it too;
    this test never does, as it would replace the environment it runs in.)"""
    launcher = {"__file__": str(ROOT / "check.py")}
    exec(compile((ROOT / "check.py").read_text(), "check.py", "exec"), launcher)
    assert launcher["ready"](), ".venv is not set up: run make first"
    run = subprocess.run(["python3", str(ROOT / "check.py"), "--help"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("usage: python3 check.py [-h] [--watch]")


def test_the_guide_says_how_long_a_check_takes_as_the_checker_estimates():
    """Checking Your Work's "from a second or two up to about a dozen", "the lab's
    queue ... about a minute", against check.ABOUT (which make bench
    measures)."""
    text = " ".join((ROOT / "guide.md").read_text().split())
    assert ("Checking one exercise takes from a second or two up to about a dozen (it says "
            "how long before it starts); only the PostgreSQL lab's queue takes longer, "
            "about a minute.") in text
    others = dict(check.ABOUT)
    lab_queue = others.pop("capstone/tinyq_pg.py")
    assert 1 <= min(others.values()) <= 2 and 10 <= max(others.values()) <= 15
    assert 40 <= lab_queue <= 80


def test_a_setting_left_changed_is_named_beside_the_failure(tmp_path):
    """A Study Drill's change left in (the review of chapters 0-6, round
    four, finding 4): the step fails, and the checker names the setting
    that differs from the guide's listing, with both values. Settings as
    the guide has them are not named."""
    folder = learner(tmp_path, "ex01_slow_signup.py")
    (folder / "ex01_slow_signup.py").write_text(
        (CODE / "ex01_slow_signup.py").read_text().replace(
            "MAIL_SERVER_SECONDS = 2", "MAIL_SERVER_SECONDS = 0", 1))
    result = run_check(folder, "ex01")
    assert result.returncode == 1
    assert ("Your file's `MAIL_SERVER_SECONDS` is 0, the guide's 2: a Study Drill's change"
            " left in?") in result.stdout, result.stdout
    shutil.copy(CODE / "ex01_slow_signup.py", folder)
    (folder / "ex01_slow_signup.py").write_text(
        (CODE / "ex01_slow_signup.py").read_text().replace(": account created", ": created", 1))
    result = run_check(folder, "ex01")
    assert result.returncode == 1 and "the guide's" not in result.stdout, result.stdout


def test_the_ticks_add_up_and_a_claim_is_told_once(tmp_path):
    """The steps a passing check ticks are the steps its last line counts,
    and a claim tried in several ways (a parametrised test) is one tick."""
    result = run_check(learner(tmp_path, "ex05_two_workers.py"), "ex05")
    ticks = told(result.stdout, check.PASSED)
    (count,) = re.findall(r"^PASS: ex05_two_workers\.py, all (\d+) steps\.$", result.stdout, re.M)
    assert len(ticks) == int(count), result.stdout
    claim = [tick for tick in ticks if tick.startswith("`main` wants naive or atomic")]
    assert len(claim) == 1, result.stdout


def test_a_learners_first_check_installs_only_what_checking_needs(tmp_path):
    """The first `python3 check.py` of a fresh copy of the course sets up
    .venv with requirements-check.txt alone (pytest and its kin), not the
    site's pandoc and typst or the browser tests' Playwright, and checks.
    Needs the network, as that first run does."""
    course = tmp_path / "jobs-course"
    shutil.copytree(ROOT, course, ignore=shutil.ignore_patterns(
        ".venv", "node_modules", "site", ".git", "__pycache__", "*.egg-info", ".pytest_cache"))
    folder = learner(tmp_path, "ex01_slow_signup.py")
    run = subprocess.run([sys.executable, str(course / "check.py"), "ex01"], cwd=folder,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "PASS: ex01_slow_signup.py" in run.stdout
    installed = subprocess.run([str(course / ".venv" / "bin" / "python"), "-m", "pip", "list",
                                "--format=freeze"], capture_output=True, text=True).stdout
    names = {line.partition("==")[0].lower() for line in installed.split()}
    assert {"pytest", "pytest-xdist", "sybil"} <= names, installed
    assert not names & {"playwright", "pypandoc-binary", "typst", "fonttools", "jinja2",
                        "psycopg"}, installed


def test_a_hint_is_given_only_where_its_mistake_shows(tmp_path):
    """Hints match what went wrong (the review of chapters 0-6, round four,
    finding 14). ex07 with its Break It left in (`MAX_ATTEMPTS = 2`) gets the
    hint about MAX_ATTEMPTS, not the one about jitter that ends at the same
    step; ex01 with a retyped line gets no hint at all."""
    folder = learner(tmp_path, "ex07_retries.py", "ex01_slow_signup.py")
    ex07, ex01 = folder / "ex07_retries.py", folder / "ex01_slow_signup.py"
    ex07.write_text(ex07.read_text().replace("MAX_ATTEMPTS = 5", "MAX_ATTEMPTS = 2", 1))
    ex01.write_text(ex01.read_text().replace(": account created", ": created", 1))
    jitter, attempts = (next(m.hint for m in MISTAKES if m.what == what) for what in (
        "no jitter: every retry waits its whole ceiling", "a job dies one attempt early"))
    result = run_check(folder, "ex07")
    assert result.returncode == 1
    assert attempts in result.stdout and jitter not in result.stdout, result.stdout
    result = run_check(folder, "ex01")
    assert result.returncode == 1 and "Hint" not in result.stdout, result.stdout


def test_json_writes_the_verdict_for_a_machine(tmp_path):
    """--json FILE writes what a classroom's grader reads: the exercise, its
    verdict, whether it passed, the steps ticked and every line the check
    said; the exit status is the check's."""
    folder = learner(tmp_path, "ex01_slow_signup.py")
    result = run_check(folder, "ex01", "--json", str(tmp_path / "ex01.json"))
    written = json.loads((tmp_path / "ex01.json").read_text())
    assert result.returncode == 0, result.stdout
    assert written["exercise"] == "ex01_slow_signup.py" and written["verdict"] == "PASS"
    assert written["passed"] is True and written["steps_passed"] == len(
        told(result.stdout, check.PASSED)) > 0
    assert "PASS: ex01_slow_signup.py, all" in "\n".join(written["said"])
    (folder / "ex01_slow_signup.py").write_text("")
    result = run_check(folder, "ex01", "--json", str(tmp_path / "ex01.json"))
    written = json.loads((tmp_path / "ex01.json").read_text())
    assert result.returncode == 1 and written["verdict"] == "FAIL" and not written["passed"]
