"""Grading a class with `make grade CLASS=folder` (tools/grade.py), and the
safety of running learners' files: a syntax error, a hang, a misnamed file
and a file that writes and deletes files around it each end that learner's
exercise with a clear verdict, the other learners are graded all the same,
and the repository is left exactly as it was. And fairness: classic
mistakes fail their own exercise, and no other."""

import csv
import hashlib
import os
import shutil
import subprocess
import sys

import guide
from harness import catalogue, sandbox
from mutations import MISTAKES, apply

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


def test_a_class_is_graded_learner_by_learner(tmp_path):
    learners = tmp_path / "class"
    (learners / "empty").mkdir(parents=True)
    ann = learners / "ann"
    ann.mkdir()
    shutil.copy(CODE / "ex01_slow_signup.py", ann)
    (ann / "ex02_jobs.py").write_text("def broken(:\n    pass\n")
    (ann / "ex03_memory_queue.py").write_text("while True:\n    pass\n")
    (ann / "ex04_durable_queue.py").write_text(VANDAL)
    shutil.copy(CODE / "ex05_two_workers.py", ann / "ex05_two_worker.py")   # a typo in its name
    (ann / "ex09_charge_worker.py").write_text("while True:\n    pass\n")   # hangs on import
    before = repository_fingerprint()

    result = subprocess.run([sys.executable, "tools/grade.py", str(learners)], cwd=ROOT,
                            capture_output=True, text=True,
                            env={**os.environ, "COMMAND_TIMEOUT": "3"})

    assert result.returncode == 1, result.stderr
    with (learners / "grades.csv").open() as table:
        rows = {row[0]: row for row in csv.reader(table)}
    header = rows.pop("learner")
    exercises = catalogue.exercises_in(guide.read_guide(ROOT / "guide.md"))
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


def test_grade_needs_a_class_folder(tmp_path):
    result = subprocess.run([sys.executable, "tools/grade.py", str(tmp_path / "nowhere")],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 2 and result.stderr.startswith("usage: ")
    result = subprocess.run([sys.executable, "tools/grade.py", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 2 and "holds no learner folders" in result.stderr


def test_classic_mistakes_fail_their_exercise_and_no_other(tmp_path, mistakes_caught):
    """One learner who made the first classic mistake of each of six files
    (tests/mutations.py), each in its own file: the grader fails exactly those
    exercises and passes every other."""
    learner = tmp_path / "class" / "everything-wrong"
    shutil.copytree(CODE, learner, ignore=shutil.ignore_patterns("__pycache__"))
    made = {}
    for mistake in MISTAKES:
        if mistake.file not in made:
            made[mistake.file] = apply(mistake, learner)

    # Commands that wait for something a mistake prevents give up after 10 s.
    result = subprocess.run([sys.executable, "tools/grade.py", str(learner.parent)], cwd=ROOT,
                            capture_output=True, text=True,
                            env={**os.environ, "COMMAND_TIMEOUT": "10"})

    with (learner.parent / "grades.csv").open() as table:
        header, row = list(csv.reader(table))
    verdicts = dict(zip(header[1:-1], row[1:-1]))
    assert {name for name, verdict in verdicts.items() if verdict != "PASS"} == set(made), \
        result.stdout
    assert {name: verdicts[name] for name in sorted(made)} == {
        "capstone/shop.py": "FAIL",
        "capstone/tinyq.py": "FAIL",
        "ex02_jobs.py": "ERROR",             # what it should define is not there
        "ex05_two_workers.py": "FAIL",
        "ex06_leases.py": "TIMEOUT",         # a healthy worker waits for ever for the job
        "ex08_idempotency.py": "FAIL",
    }
    assert result.returncode == 1
    mistakes_caught.extend(made.values())


def test_a_function_that_never_returns_is_a_timeout(tmp_path):
    """ex09's tests call the learner's functions in the test process; one
    that loops for ever is stopped by the per-test time limit (pytest.ini's,
    shortened here), and the exercise reads TIMEOUT."""
    learner = tmp_path / "loops"
    learner.mkdir()
    shutil.copy(CODE / "ex09_charge_worker.py", learner)
    sandbox.apply_edit(learner, "ex09_charge_worker.py", "    # 1. Write down what we are",
                       "    while True:\n        pass\n    # 1. Write down what we are")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests/test_exercises.py",
         "-k", "ex09_changed_inputs", "--timeout=5", f"--work={learner}"],
        cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 1
    assert "\nex09_charge_worker.py  TIMEOUT\n" in result.stdout, result.stdout
    assert "Failed: Timeout (>5.0s)" in result.stdout
