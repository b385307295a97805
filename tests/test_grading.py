"""Grading a class with `make grade CLASS=folder` (tools/grade.py), and the
safety of running learners' files: a syntax error, a hang and a file that
writes and deletes files around it each end that learner's exercise with a
clear verdict, the other learners are graded all the same, and the
repository is left exactly as it was."""

import csv
import hashlib
import os
import shutil
import subprocess
import sys

import console

ROOT = console.ROOT
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
    before = repository_fingerprint()

    result = subprocess.run([sys.executable, "tools/grade.py", str(learners)], cwd=ROOT,
                            capture_output=True, text=True,
                            env={**os.environ, "COMMAND_TIMEOUT": "3"})

    assert result.returncode == 1, result.stderr
    with (learners / "grades.csv").open() as table:
        rows = {row[0]: row for row in csv.reader(table)}
    header = rows.pop("learner")
    exercises = console.exercises_in(console.fences.read_guide(ROOT / "guide.md"))
    assert header == ["learner", *exercises, "passed"]
    verdicts = dict(zip(exercises, rows["ann"][1:]))
    assert verdicts["ex01_slow_signup.py"] == "PASS"
    assert verdicts["ex02_jobs.py"] == "ERROR"           # the syntax error
    assert verdicts["ex03_memory_queue.py"] == "TIMEOUT"  # the endless loop
    assert verdicts["ex04_durable_queue.py"] == "FAIL"    # it ran, and printed the wrong thing
    assert {verdicts[name] for name in exercises[4:]} == {"MISSING"}
    assert rows["ann"][-1] == f"1/{len(exercises)}"
    assert rows["empty"][1:] == ["MISSING"] * len(exercises) + [f"0/{len(exercises)}"]
    assert result.stdout == (learners / "grades.md").read_text()
    assert result.stdout.startswith("| learner | ex01_slow_signup.py |")
    # the vandal wrote beside its own temporary copy, not in the learner's folder or ours
    assert repository_fingerprint() == before
    assert sorted(p.name for p in ann.iterdir()) == [
        "ex01_slow_signup.py", "ex02_jobs.py", "ex03_memory_queue.py", "ex04_durable_queue.py"]


def test_grade_needs_a_class_folder(tmp_path):
    result = subprocess.run([sys.executable, "tools/grade.py", str(tmp_path / "nowhere")],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 2 and result.stderr.startswith("usage: ")
    result = subprocess.run([sys.executable, "tools/grade.py", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 2 and "holds no learner folders" in result.stderr
