"""Grading's verdicts at their edges: a copy-and-change exercise built on
the learner's own file, harmless differences and all, passes; a TIMEOUT
that was the machine's, not the learner's, is graded again alone; a
function that never returns is a TIMEOUT. (Grading's safety, fairness and
reports are in test_grading.py.)"""
import shutil
import subprocess
import sys
import threading

import pytest

from tools import grade
from tools.harness import catalogue, results, sandbox

ROOT = catalogue.ROOT
CODE = ROOT / "code"
EX04 = "ex04_durable_queue.py"


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
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
         "tests/exercises/test_ex09.py",
         "-k", "ex09_changed_inputs", "--timeout=5", f"--work={learner}"],
        cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 1
    assert "\nex09_charge_worker.py  TIMEOUT\n" in result.stdout, result.stdout
    assert "Failed: Timeout (>5.0s)" in result.stdout


# Harmless differences a learner's own typing has: the review of chapters 0-6
# (round four, finding 1) found each one failing the next exercise.
HARMLESS = {
    "a comment reworded": (
        "    # isolation_level=None: each statement is committed as soon as it runs",
        "    # autocommit: every statement is saved at once"),
    "a name of one's own": (
        "    cursor = db.execute(\"INSERT INTO jobs (kind, args) VALUES (?, ?)\",\n"
        "                        (kind, json.dumps(args)))\n    return cursor.lastrowid",
        "    cur = db.execute(\"INSERT INTO jobs (kind, args) VALUES (?, ?)\",\n"
        "                     (kind, json.dumps(args)))\n    return cur.lastrowid"),
}


@pytest.mark.parametrize("handed_in", ["ex04 too", "ex05 alone"])
@pytest.mark.parametrize("difference", HARMLESS)
def test_a_copy_and_change_of_the_learners_own_file_passes(tmp_path, difference, handed_in):
    """A learner whose ex04 has a harmless difference of their own copies it
    and makes ex05 exactly as the guide says. ex05's check that only the
    guide's pieces changed compares it with their own ex04; and without
    their ex04, with the course's, judging statements, not comments or the
    names of a function's own variables."""
    learner = tmp_path / "learner"
    learner.mkdir()
    for name in (EX04, "ex05_two_workers.py"):
        shutil.copy(CODE / name, learner)
        sandbox.apply_edit(learner, name, *HARMLESS[difference])
    if handed_in == "ex05 alone":
        (learner / EX04).unlink()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests/exercises/test_ex05.py",
         "-k", "differs_from_the_one_before", f"--work={learner}"],
        cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_a_copy_and_change_that_changed_more_names_the_file_it_was_compared_with(tmp_path):
    """A statement the guide does not change, changed: the failure names the
    statement and the learner's own file it was compared with."""
    learner = tmp_path / "learner"
    learner.mkdir()
    for name in (EX04, "ex05_two_workers.py"):
        shutil.copy(CODE / name, learner)
    sandbox.apply_edit(learner, "ex05_two_workers.py", "    return cursor.lastrowid",
                       "    return cursor.lastrowid or 0")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests/exercises/test_ex05.py",
         "-k", "differs_from_the_one_before", f"--work={learner}"],
        cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 1
    assert ("compared with your ex04_durable_queue.py: changed or added, though the guide"
            " leaves as it was: enqueue") in result.stdout, result.stdout


def test_a_timeout_is_graded_again_alone_before_it_stands(tmp_path, monkeypatch, capsys):
    """A TIMEOUT may be the machine's, loaded by the other learners graded
    beside it: once every learner is graded, each TIMEOUT is graded again,
    with nothing else running, and the second verdict stands (the review of
    chapters 0-6, round four: 11 of 28 reference shops TIMEOUT at 12 side by
    side)."""
    learners = []
    for name in ("ann", "bob", "cat"):
        (tmp_path / name).mkdir()
        learners.append(tmp_path / name)
    calls, active, lock = [], [], threading.Lock()

    def graded(folder, exercises=(), workers=1, seconds=grade.LEARNER_SECONDS):
        with lock:
            active.append(folder.name)
            calls.append((folder.name, tuple(exercises), len(active)))
        again = sum(name == folder.name for name, *_ in calls) > 1
        slow = folder.name == "bob" and not again      # the machine's fault, the first time
        hangs = folder.name == "cat"                   # the learner's, every time
        verdicts = {EX04: results.TIMEOUT if slow or hangs else results.PASS,
                    "ex05_two_workers.py": results.PASS}
        with lock:
            active.remove(folder.name)
        return {exercise: {"verdict": verdicts[exercise], "reread": "", "decided_by": None,
                           "problems": []} for exercise in exercises or verdicts}

    monkeypatch.setattr(grade, "grade", graded)
    exercises = [EX04, "ex05_two_workers.py"]
    grades = grade.grade_all(learners, [], exercises, jobs=3)
    assert {name: grades[name][EX04]["verdict"] for name in grades} == {
        "ann": results.PASS, "bob": results.PASS, "cat": results.TIMEOUT}
    assert grades["bob"]["ex05_two_workers.py"]["verdict"] == results.PASS
    again = calls[3:]
    assert sorted(again) == [("bob", (EX04,), 1), ("cat", (EX04,), 1)]    # alone, that one
    assert "graded again, alone" in capsys.readouterr().err
