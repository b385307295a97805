"""Grading a class with `make grade CLASS=folder` (tools/grade.py), and the
safety of running learners' files: a syntax error, a hang, a misnamed file
and a file that writes and deletes files around it each end that learner's
exercise with a clear verdict, the other learners are graded all the same,
and the repository is left exactly as it was. And fairness: classic
mistakes fail their own exercise, and no other. And what the instructor
gets: a report per learner that says why, a quiet `make grade`, and files
written all at once."""

import csv
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tools import grade
from tools.harness import catalogue, sandbox
from tools.mistakes import MISTAKES, apply
from tests.helpers import as_in_a_terminal

ROOT = catalogue.ROOT
CODE = ROOT / "code"

# A learner's ex04 that writes outside its folder and deletes what is in it.
VANDAL = """
import os
open(os.path.join("..", "escaped.txt"), "w").write("out of bounds")
for name in os.listdir("."):
    if os.path.isfile(name):
        os.remove(name)
print("all gone")
"""


# A file that never ends: it waits, as a learner's stuck program usually
# does, rather than keep a core busy while the grader waits for it.
HANGS = "import time\nwhile True:\n    time.sleep(1)\n"


def repository_fingerprint():
    """A hash of every tracked file's name and bytes, and of what git sees."""
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.split(b"\0")
    digest = hashlib.sha256()
    for name in filter(None, names):
        path = ROOT / os.fsdecode(name)
        digest.update(name + (path.read_bytes() if path.is_file() else b"<gone>"))
    status = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True,
                            check=True).stdout
    return digest.hexdigest(), status


def progress(stderr, passed, jobs=grade.JOBS):
    """Whether stderr is grade.py's progress, and only that: a first line,
    then a line as each learner's grading ends (in any order: they are graded
    side by side), numbered in order, a line for each learner whose TIMEOUT
    was graded again, then the time it took."""
    lines = [line for line in stderr.splitlines()
             if not re.fullmatch(r"graded again, alone: .+, .+ [A-Z ]+", line)]
    ended = [re.fullmatch(r"(\d+) of (\d+) graded: (.+), (\d+/\d+) passed \(\d+:\d\d so far\)",
                          line) for line in lines[1:-1]]
    assert all(ended), stderr
    assert lines[0] == f"grading {len(passed)} learners, {min(jobs, len(passed))} side by side"
    assert [(int(k), int(n)) for k, n, _, _ in (m.groups() for m in ended)] == [
        (k, len(passed)) for k in range(1, len(passed) + 1)], stderr
    assert {name: ratio for _, _, name, ratio in (m.groups() for m in ended)} == passed, stderr
    assert re.fullmatch(rf"graded {len(passed)} in \d+:\d\d", lines[-1]), stderr
    return True


def test_a_class_is_graded_learner_by_learner(tmp_path):
    learners = tmp_path / "class"
    (learners / "empty").mkdir(parents=True)
    ann = learners / "ann"
    ann.mkdir()
    shutil.copy(CODE / "ex01_slow_signup.py", ann)
    (ann / "ex02_jobs.py").write_text("def broken(:\n    pass\n")
    (ann / "ex03_memory_queue.py").write_text(HANGS)
    (ann / "ex04_durable_queue.py").write_text(VANDAL)
    shutil.copy(CODE / "ex05_two_workers.py", ann / "ex05_two_worker.py")   # a typo in its name
    (ann / "ex09_charge_worker.py").write_text(HANGS)               # hangs on import
    before = repository_fingerprint()

    result = subprocess.run([sys.executable, "tools/grade.py", str(learners)], cwd=ROOT,
                            capture_output=True, text=True,
                            env={**os.environ, "COMMAND_TIMEOUT": "3"})

    assert result.returncode == 1, result.stderr
    with (learners / "grades.csv").open() as table:
        rows = {row[0]: row for row in csv.reader(table)}
    header = rows.pop("learner")
    exercises = [name for name in catalogue.FILES
                 if name not in catalogue.OPTIONAL]  # nobody handed in an optional file
    assert header == ["learner", *exercises, "passed"]
    verdicts = dict(zip(exercises, rows["ann"][1:]))
    assert verdicts["ex01_slow_signup.py"] == "PASS"
    assert verdicts["ex02_jobs.py"] == "ERROR"           # the syntax error
    assert verdicts["ex03_memory_queue.py"] == "TIMEOUT"  # the endless loop
    assert verdicts["ex04_durable_queue.py"] == "FAIL"    # it ran, and printed the wrong thing
    assert verdicts["ex09_charge_worker.py"] == "TIMEOUT"  # its tests import it, and wait
    assert {verdicts[name] for name in exercises[4:] if name != "ex09_charge_worker.py"} == {
        "MISSING"}                                        # ex05 misnamed, too
    assert rows["ann"][-1] == f"1/{len(exercises)}"
    assert rows["empty"][1:] == ["MISSING"] * len(exercises) + [f"0/{len(exercises)}"]
    assert result.stdout == (learners / "grades.md").read_text()
    assert result.stdout.startswith("| learner | ex01_slow_signup.py |")
    # the vandal wrote beside its own temporary copy, not in the learner's folder or ours
    assert repository_fingerprint() == before
    assert sorted(p.name for p in ann.iterdir()) == [
        "ex01_slow_signup.py", "ex02_jobs.py", "ex03_memory_queue.py", "ex04_durable_queue.py",
        "ex05_two_worker.py", "ex09_charge_worker.py"]


def test_a_grading_past_its_time_limit_is_stopped_with_everything_it_started(tmp_path):
    """A learner whose ex03 waits for ever, graded with --time-limit 60 while
    each command may wait 10 minutes: after 60 s grading stops their pytest
    and every program it had started (each in a process group of its own),
    and their row reads TIMEOUT. (60 s: on a busy machine, pytest may take
    tens of seconds to start the first program.)"""
    pids = tmp_path / "pids"
    learners = tmp_path / "class"
    (learners / "stuck").mkdir(parents=True)
    (learners / "stuck" / "ex03_memory_queue.py").write_text(
        f"import os\nopen({str(pids)!r}, 'a').write(f'{{os.getpid()}}\\n')\n" + HANGS)

    result = subprocess.run(
        [sys.executable, "tools/grade.py", str(learners), "--exercise", "ex03_memory_queue.py",
         "--time-limit", "60"], cwd=ROOT, capture_output=True, text=True,
        env={**os.environ, "COMMAND_TIMEOUT": "600"})

    assert result.returncode == 1, result.stderr
    assert progress(result.stderr, {"stuck": "0/1"})
    with (learners / "grades.csv").open() as table:
        assert list(csv.reader(table))[1:] == [["stuck", "TIMEOUT", "0/1"]]
    assert "Grading stopped after 60 s" in (learners / "reports" / "stuck.md").read_text()
    started = [int(pid) for pid in pids.read_text().split()]
    assert started                                   # the program did run, and waited
    assert not [pid for pid in started if running(pid)]


def test_ctrl_c_stops_every_grading_and_writes_nothing(tmp_path):
    """Ctrl-C reaches grade.py alone (each learner's pytest has a session of
    its own): it stops both gradings in progress, and every program they
    had started, writes no table and no report, and says so."""
    learners = tmp_path / "class"
    pids = {}
    for name in ("ann", "bob"):
        (learners / name).mkdir(parents=True)
        pids[name] = tmp_path / f"{name}.pids"
        (learners / name / "ex03_memory_queue.py").write_text(
            f"import os\nopen({str(pids[name])!r}, 'a').write(f'{{os.getpid()}}\\n')\n" + HANGS)
    # Ctrl-C as a terminal delivers it: a shell script that starts a program in
    # the background (as one that runs make check may) starts it deaf to SIGINT.
    grading = subprocess.Popen(
        [sys.executable, "tools/grade.py", str(learners), "--exercise", "ex03_memory_queue.py",
         "--jobs", "2"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "COMMAND_TIMEOUT": "600"},
        preexec_fn=as_in_a_terminal)
    started = lambda: [int(pid) for path in pids.values() if path.exists()
                       for pid in path.read_text().split()]
    try:
        deadline = time.monotonic() + 120
        while grading.poll() is None and time.monotonic() < deadline \
                and not all(path.exists() for path in pids.values()):
            time.sleep(0.1)                   # until both learners' programs wait
        grading.send_signal(signal.SIGINT)
        out, err = grading.communicate(timeout=60)
    finally:                                  # if it failed, leave nothing running
        grading.kill()
        grading.communicate()
        left = [pid for pid in started() if running(pid)]
        for pid in left:
            os.kill(pid, signal.SIGKILL)
    assert all(path.exists() for path in pids.values()), err
    assert not left                           # grade.py had stopped them all
    assert grading.returncode == 130, err
    assert err.splitlines() == ["grading 2 learners, 2 side by side",
                                "grading interrupted: nothing written"], err
    assert out == ""
    assert sorted(path.name for path in learners.iterdir()) == ["ann", "bob"]


def test_sigterm_stops_every_grading_and_writes_nothing(tmp_path):
    """SIGTERM (a CI limit, `timeout`, a service manager) stops grade.py as
    Ctrl-C does: every learner's pytest and every program it started end
    with it, it writes nothing, says so, and exits as a shell reports a
    SIGTERM (143). What grade.py starts is found by a variable of this test's
    own in its environment, which every process it starts inherits."""
    learners = tmp_path / "class"
    (learners / "ann").mkdir(parents=True)
    pids = tmp_path / "ann.pids"
    (learners / "ann" / "ex03_memory_queue.py").write_text(
        f"import os\nopen({str(pids)!r}, 'a').write(f'{{os.getpid()}}\\n')\n" + HANGS)
    tag = uuid.uuid4().hex
    mark = f"SIGTERM_TEST={tag}"
    grading = subprocess.Popen(
        [sys.executable, "tools/grade.py", str(learners), "--exercise", "ex03_memory_queue.py"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "COMMAND_TIMEOUT": "600", "SIGTERM_TEST": tag})
    try:
        deadline = time.monotonic() + 120
        while grading.poll() is None and time.monotonic() < deadline and not pids.exists():
            time.sleep(0.1)                   # until the learner's program waits
        assert pids.exists() and marked(mark), "the learner's program never started"
        grading.send_signal(signal.SIGTERM)
        out, err = grading.communicate(timeout=60)
        left = marked(mark)
    finally:                                  # if it failed, leave nothing running
        grading.kill()
        grading.communicate()
        for pid in marked(mark):
            os.kill(pid, signal.SIGKILL)
    assert not left, left
    assert grading.returncode == 143, err
    assert err.splitlines() == ["grading 1 learners, 1 side by side",
                                "grading stopped by SIGTERM: nothing written"], err
    assert out == ""
    assert sorted(path.name for path in learners.iterdir()) == ["ann"]


def marked(mark):
    """{pid: command line} of the running processes whose environment holds
    mark ("NAME=value")."""
    found = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if mark.encode() in (entry / "environ").read_bytes().split(b"\0") \
                    and running(int(entry.name)):
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            pass                              # gone, or not ours to read
    return found


def running(pid):
    """Whether a process runs (a zombie, dead and not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_grade_needs_a_class_folder(tmp_path):
    result = subprocess.run([sys.executable, "tools/grade.py", str(tmp_path / "nowhere")],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 2 and result.stderr.startswith("usage: ")
    result = subprocess.run([sys.executable, "tools/grade.py", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 2 and "holds no learner folders" in result.stderr


def built_on(name):
    """The exercises whose tests could see a mistake in exercise `name`:
    those that run it (the catalogue's `runs`) and the one compared with
    it as its edit (an Edit in tests/exercises/). Every other exercise's
    tests touch only its own file and the given ones."""
    compared = [re.search(r'^EDIT = Edit\("(\S+)", "(\S+)"', path.read_text(), re.M)
                for path in (ROOT / "tests" / "exercises").glob("test_ex*.py")]
    return {*(edit[2] for edit in compared if edit and edit[1] == name),
            *(exercise.file for exercise in catalogue.EXERCISES if name in exercise.runs)}


# ex06's TIMEOUT is graded twice, the second time alone: past pytest.ini's
# 300 s on a busy machine.
@pytest.mark.timeout(900)
def test_classic_mistakes_fail_their_exercise_and_no_other(tmp_path, mistakes_caught):
    """One learner who made a classic mistake (the first of tools/mistakes.py
    for that file) in six files, among them the files others build on: ex07,
    which ex08 is compared with, and tinyq.py and shop.py, which chaos.py
    runs. Graded on those six and on the exercises built on them,
    the grader fails exactly the six and passes the others."""
    learner = tmp_path / "class" / "six-mistakes"
    # Without the optional lab, as most learners hand in: grading the lab is
    # held by test_the_optional_lab_has_a_column_for_those_who_handed_it_in.
    shutil.copytree(CODE, learner, ignore=shutil.ignore_patterns("__pycache__", "*_pg.py"))
    wrong = {"ex02_jobs.py", "ex05_two_workers.py", "ex06_leases.py", "ex07_retries.py",
             "capstone/tinyq.py", "capstone/shop.py"}
    made = {}
    for mistake in MISTAKES:
        if mistake.file in wrong and mistake.file not in made:
            made[mistake.file] = apply(mistake, learner)
    assert set(made) == wrong
    graded = wrong.union(*map(built_on, wrong))
    assert graded - wrong == {"ex08_idempotency.py", "capstone/chaos.py"}

    # Commands that wait for something a mistake prevents give up after 20 s
    # (a busy machine can take 10 s over a legitimate chaos.py run).
    result = subprocess.run([sys.executable, "tools/grade.py", str(learner.parent),
                             *(f"--exercise={name}" for name in sorted(graded))], cwd=ROOT,
                            capture_output=True, text=True,
                            env={**os.environ, "COMMAND_TIMEOUT": "20"})

    with (learner.parent / "grades.csv").open() as table:
        header, row = list(csv.reader(table))
    verdicts = dict(zip(header[1:-1], row[1:-1]))
    # the learner's report says why a verdict is what it is
    assert verdicts == {name: "PASS" if name not in wrong else {
        "ex02_jobs.py": "ERROR",             # what it should define is not there
        "ex06_leases.py": "TIMEOUT",         # a healthy worker waits for ever for the job
    }.get(name, "FAIL") for name in graded}, (learner.parent / "reports" /
                                              "six-mistakes.md").read_text()
    assert result.returncode == 1
    mistakes_caught.extend(made.values())


# Each given file, the files of the learner's that it serves (graded), and
# tests of theirs that run it: Exercise 9's practice world, and the
# capstone's outside world, which shop.py imports and chaos.py runs.
GIVEN = {
    "ex09_practice_given.py": (
        ["ex09_charge_worker.py"],
        ["tests/exercises/test_ex09.py", "-k", "ex09 and (trusting or new_id or crash)"]),
    "capstone/world_given.py": (
        ["capstone/shop.py", "capstone/chaos.py"],
        ["tests/capstone/test_shop.py", "tests/capstone/test_chaos.py",
         "-k", "key_reused or idle_worker"]),
}


@pytest.mark.parametrize("name", GIVEN)
@pytest.mark.parametrize("given", ["reference", "broken", "missing"])
def test_a_learners_given_file_is_never_graded(tmp_path, given, name):
    """A given file (ex09_practice_given.py, capstone/world_given.py) is
    downloaded, not typed: a learner's folder with a broken copy, or none,
    is graded as one with the reference's copy, since the tests run code/'s
    given file with the learner's exercise."""
    typed, tests = GIVEN[name]
    learner = tmp_path / "ann"
    for path in [*typed, name]:
        (learner / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(CODE / path, learner / path)
    if given == "broken":
        (learner / name).write_text("raise SystemExit('not this one')\n")
    elif given == "missing":
        (learner / name).unlink()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *tests, f"--work={learner}"],
        cwd=ROOT, capture_output=True, text=True)
    ran = re.findall(r"^(\S+\.py)  PASS$", result.stdout, re.MULTILINE)
    assert ran == typed, result.stdout
    summary = result.stdout.splitlines()[-1]
    assert " passed" in summary and "failed" not in summary, result.stdout
    # a session that names no exercise runs the learner's folder as it is,
    # but for its given files, which are code/'s, in each folder of theirs
    # that has one: a folder without capstone/ gets none made for it
    sandbox.copy_sources(learner, tmp_path / "copy")
    assert (tmp_path / "copy" / name).read_bytes() == (CODE / name).read_bytes()
    (tmp_path / "empty").mkdir()
    sandbox.copy_sources(tmp_path / "empty", tmp_path / "copy-of-empty")
    assert [p.name for p in (tmp_path / "copy-of-empty").iterdir()] == ["ex09_practice_given.py"]


# ---------------------------------------------------------------- reports

EX04 = "ex04_durable_queue.py"


def ex04_learner(folder, old, new):
    """A learner who handed in code/'s ex04 with one change."""
    folder.mkdir(parents=True)
    shutil.copy(CODE / EX04, folder)
    sandbox.apply_edit(folder, EX04, old, new)


def guide_line(text):
    """The line of guide.md that is exactly text (its first)."""
    lines = (ROOT / "guide.md").read_text(encoding="utf-8").splitlines()
    return lines.index(text) + 1


def test_each_learner_gets_a_report_that_says_why(tmp_path):
    """A FAIL, an ERROR and a TIMEOUT learner, graded on ex04 alone: each
    report names the section to reread, the step that failed first (a guide
    line or a test), its claim in a sentence, and its short diff; the table
    links each name to its report. A wrong value that makes the worker crash
    afterwards is a FAIL: only a crash that comes first is an ERROR."""
    learners = tmp_path / "class"
    # the args stored as Python's repr, not JSON: the worker prints them, then crashes on them
    ex04_learner(learners / "fail", "(kind, json.dumps(args))", "(kind, str(args))")
    # a typo: the worker crashes at its first job, having printed nothing wrong
    ex04_learner(learners / "error", "HANDLERS[kind](**json.loads(args))",
                 "HANDLERS[kind](**json.loads(arg))")
    # every command waits for ever
    ex04_learner(learners / "timeout", "def connect():\n",
                 "def connect():\n    while True:\n        time.sleep(1)\n")

    result = subprocess.run([sys.executable, "tools/grade.py", str(learners), "--exercise", EX04,
                             "--jobs", "3"],
                            cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, "COMMAND_TIMEOUT": "3"})

    assert result.returncode == 1, result.stderr
    # progress only on stderr, the table only on stdout
    assert progress(result.stderr, {"error": "0/1", "fail": "0/1", "timeout": "0/1"}, jobs=3)
    assert result.stdout == (learners / "grades.md").read_text() == (
        f"| learner | {EX04} | passed |\n|---|---|---|\n"
        "| [error](reports/error.md) | ERROR | 0/1 |\n"
        "| [fail](reports/fail.md) | FAIL | 0/1 |\n"
        "| [timeout](reports/timeout.md) | TIMEOUT | 0/1 |\n")
    with (learners / "grades.csv").open() as table:
        assert list(csv.reader(table)) == [["learner", EX04, "passed"], ["error", "ERROR", "0/1"],
                                           ["fail", "FAIL", "0/1"], ["timeout", "TIMEOUT", "0/1"]]
    assert sorted(p.name for p in (learners / "reports").iterdir()) == [
        "error.md", "fail.md", "timeout.md"]

    work = guide_line(f"$ python3 {EX04} work")
    reread = ("Reread: 4. The Worker: Where Work Happens › "
              "Exercise 4: A Durable Queue and a Worker.")
    fail = (learners / "reports" / "fail.md").read_text()
    assert fail.startswith("# fail\n\n0 of 1 exercises pass.\n\n- ex04_durable_queue.py: FAIL\n"
                           "\n## ex04_durable_queue.py: FAIL\n"), fail
    assert reread in fail
    assert (f"Failed first: guide.md:{work}: `$ python3 {EX04} work` (terminal 1) printed "
            f"something else.") in fail
    assert "+worker: claimed job 1, welcome_email {'address': 'ann@example.com'}" in fail
    assert "+json.decoder.JSONDecodeError: Expecting property name" in fail
    # a claims test's failure names the test, where it is, and its claim
    assert re.search(r"^### \d\. tests/exercises/test_ex04.py:\d+, "
                     r"test_ex04_reset_starts_the_numbers_again \(FAIL\)\n\nAfter a run, reset "
                     r"empties the queue and the outbox, and the next job is job 1 again, so a "
                     r"learner who ran an earlier version sees the guide's job numbers\.$",
                     fail, re.M), fail

    error = (learners / "reports" / "error.md").read_text()
    assert "- ex04_durable_queue.py: ERROR" in error and reread in error
    assert f"Failed first: guide.md:{work}: `$ python3 {EX04} work` (terminal 1)" in error
    assert "+NameError: name 'arg' is not defined" in error

    timeout = (learners / "reports" / "timeout.md").read_text()
    assert "- ex04_durable_queue.py: TIMEOUT" in timeout and reread in timeout
    first = re.search(r"^Failed first: (.*)$", timeout, re.M).group(1)
    assert first.startswith(f"guide.md:{guide_line(f'$ python3 {EX04} reset')}: "
                            f"`$ python3 {EX04} reset`"), timeout
    for report in (fail, error, timeout):           # every diff or error is short
        blocks = re.findall(r"^````\n(.*?)\n````$", report, re.M | re.S)
        assert blocks and all(len(block.splitlines()) <= 12 for block in blocks), report


def test_make_grade_prints_only_its_progress_and_the_table(tmp_path):
    """`make grade` echoes no command: stdout is the table, stderr the progress.
    When a learner failed, its exit status says so; GNU make then adds the one
    line it prints for every failing recipe (see the Makefile)."""
    learners = tmp_path / "class"
    (learners / "ann").mkdir(parents=True)
    shutil.copy(CODE / "ex01_slow_signup.py", learners / "ann")
    (learners / "bob").mkdir()
    shutil.copy(CODE / "ex01_slow_signup.py", learners / "bob")
    sandbox.apply_edit(learners / "bob", "ex01_slow_signup.py", "account created", "account made")

    # -o: take the virtualenv as it is (a fresh checkout's requirements.txt is newer).
    # Run as a person runs it, not as a make inside `make check`, which would
    # say "make[1]: Entering directory".
    top_level = {name: value for name, value in os.environ.items()
                 if name not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    result = subprocess.run(["make", "-o", ".venv/installed", "grade", f"CLASS={learners}",
                             "EXERCISE=ex01_slow_signup.py"],
                            cwd=ROOT, capture_output=True, text=True, env=top_level)

    assert result.stdout == (learners / "grades.md").read_text()
    assert result.stdout.startswith("| learner | ex01_slow_signup.py | passed |\n")
    grading, _, make = result.stderr.rpartition("make: ")
    assert progress(grading, {"ann": "1/1", "bob": "0/1"})
    assert re.fullmatch(r"\*\*\* \[Makefile:\d+: grade\] Error 1\n", make), result.stderr
    assert result.returncode == 2                    # make's own status for a failed recipe


def test_the_optional_lab_has_a_column_for_those_who_handed_it_in(tmp_path):
    """Ann typed Chapter 12's races_pg.py, Bob did not: the lab's column says
    so, Bob's passed count and report leave it out, and the class passed."""
    learners = tmp_path / "class"
    for name in ("ann", "bob"):
        (learners / name / "capstone").mkdir(parents=True)
        shutil.copy(CODE / "ex01_slow_signup.py", learners / name)
    shutil.copy(CODE / "capstone" / "races_pg.py", learners / "ann" / "capstone")
    result = subprocess.run([sys.executable, "tools/grade.py", str(learners),
                             "--exercise=ex01_slow_signup.py",
                             "--exercise=capstone/races_pg.py"],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    with (learners / "grades.csv").open() as table:
        assert list(csv.reader(table)) == [
            ["learner", "ex01_slow_signup.py", "capstone/races_pg.py", "passed"],
            ["ann", "PASS", "PASS", "2/2"],
            ["bob", "PASS", "-", "1/1"]]
    assert "races_pg" not in (learners / "reports" / "bob.md").read_text()
    assert "- capstone/races_pg.py: PASS" in (learners / "reports" / "ann.md").read_text()


def test_the_lab_is_not_graded_where_no_postgresql_server_can_start(tmp_path):
    """Ann handed in races_pg.py, on a machine where PostgreSQL cannot start
    (here POSTGRESQL_BIN names a folder without initdb): NOT GRADED, not a
    failure. Her passed count leaves it out, and her report says why."""
    learners = tmp_path / "class"
    (learners / "ann" / "capstone").mkdir(parents=True)
    shutil.copy(CODE / "ex01_slow_signup.py", learners / "ann")
    shutil.copy(CODE / "capstone" / "races_pg.py", learners / "ann" / "capstone")
    nowhere = tmp_path / "no-postgresql"
    result = subprocess.run([sys.executable, "tools/grade.py", str(learners),
                             "--exercise=ex01_slow_signup.py",
                             "--exercise=capstone/races_pg.py"],
                            cwd=ROOT, capture_output=True, text=True,
                            env={**os.environ, "POSTGRESQL_BIN": str(nowhere)})
    assert result.returncode == 0, result.stdout + result.stderr
    with (learners / "grades.csv").open() as table:
        assert list(csv.reader(table)) == [
            ["learner", "ex01_slow_signup.py", "capstone/races_pg.py", "passed"],
            ["ann", "PASS", "NOT GRADED", "1/1"]]
    report = (learners / "reports" / "ann.md").read_text()
    assert "1 of 1 exercises pass." in report
    assert "- capstone/races_pg.py: NOT GRADED" in report
    assert ("## capstone/races_pg.py: NOT GRADED\n\nThe optional lab needs a PostgreSQL server,"
            f" and none can be started here: POSTGRESQL_BIN is {nowhere}, which has no initdb\n"
            in report), report


def test_without_the_lab_there_is_no_column_for_it(tmp_path):
    learners = tmp_path / "class"
    (learners / "ann").mkdir(parents=True)
    shutil.copy(CODE / "ex01_slow_signup.py", learners / "ann")
    result = subprocess.run([sys.executable, "tools/grade.py", str(learners),
                             "--exercise=ex01_slow_signup.py"],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("| learner | ex01_slow_signup.py | passed |\n")
    asked = subprocess.run([sys.executable, "tools/grade.py", str(learners),
                            "--exercise=capstone/tinyq_pg.py"],
                           cwd=ROOT, capture_output=True, text=True)
    assert (asked.returncode, asked.stdout) == (2, "")
    assert asked.stderr == "no learner handed in capstone/tinyq_pg.py, which is optional\n"


def test_grading_writes_all_of_its_files_or_none(tmp_path, monkeypatch):
    """An earlier grading's table and reports stay as they were if this one
    stops before the end, whether while grading or while writing; a grading
    that ends replaces them all, old reports included."""
    learners = tmp_path / "class"
    for name in ("ann", "bob"):
        (learners / name).mkdir(parents=True)
    (learners / "reports").mkdir()                     # from an earlier grading
    old = {"grades.csv": "old csv\n", "grades.md": "old table\n", "reports/cat.md": "old\n"}
    for name, text in old.items():
        (learners / name).write_text(text)

    def files():
        return {str(path.relative_to(learners)): path.read_text()
                for path in sorted(learners.rglob("*")) if path.is_file()}

    passed = {exercise: {"verdict": "PASS", "reread": None, "decided_by": None, "problems": []}
              for exercise in catalogue.FILES}

    def interrupted(folder, *options):
        if folder.name == "bob":
            raise KeyboardInterrupt
        return passed
    monkeypatch.setattr(grade, "grade", interrupted)
    with pytest.raises(KeyboardInterrupt):
        grade.main([str(learners)])
    assert files() == old

    monkeypatch.setattr(grade, "grade", lambda folder, *options: passed)
    real_markdown = grade.markdown

    def full_disk(header, rows):
        raise OSError("No space left on device")
    monkeypatch.setattr(grade, "markdown", full_disk)
    with pytest.raises(OSError):
        grade.main([str(learners)])
    assert files() == old
    assert [p.name for p in learners.iterdir() if p.name.startswith(".")] == []

    monkeypatch.setattr(grade, "markdown", real_markdown)
    missing = {**passed, "ex05_two_workers.py": {**passed["ex05_two_workers.py"],
                                                 "verdict": "MISSING"}}
    monkeypatch.setattr(grade, "grade", lambda folder, *options:
                        missing if folder.name == "bob" else passed)
    assert grade.main([str(learners)]) == 1
    assert sorted(files()) == ["grades.csv", "grades.md", "reports/ann.md", "reports/bob.md"]
    assert "## ex05_two_workers.py: MISSING\n\nThe folder has no ex05_two_workers.py: a file " \
        "of another name is not graded.\n" in files()["reports/bob.md"]
    assert "## " not in files()["reports/ann.md"]

