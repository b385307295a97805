"""Grade a class: every folder inside CLASS holds one learner's files.

Usage:  python3 tools/grade.py CLASS      (make grade CLASS=folder)

Each learner is graded as `make check WORK=folder` grades one: the guide's
transcripts and the claims tests, run against their files. Each learner
gets a fresh pytest process with a time limit, so one learner's disaster
(a hang, a crash, a syntax error) ends only their own row; the process
writes the learner's verdicts to a results file (--results-json, see
tools/harness/results.py), and this reads them from there. The table, one
row per learner and one column per exercise, is written to CLASS/grades.csv
and CLASS/grades.md, and the Markdown is printed. Exit status: 0 when every
learner passed everything, 1 otherwise.
"""
import csv
import subprocess
import sys
import tempfile
from pathlib import Path

import guide
from harness import results
from harness.catalogue import GUIDE, ROOT, exercises_in

LEARNER_SECONDS = 1200           # a whole learner's grading, at the most


def grade(folder):
    """{exercise: verdict} for one learner's folder; {} if the run wrote none."""
    with tempfile.TemporaryDirectory() as temp:
        results_file = Path(temp) / "results.json"
        try:
            subprocess.run(
                [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                 f"--work={folder}", f"--results-json={results_file}"],
                cwd=ROOT, capture_output=True, text=True, timeout=LEARNER_SECONDS)
        except subprocess.TimeoutExpired:
            return {}
        return results.verdicts(results_file)


def table(grades):
    """The exercises, in the course's order, and one row per learner."""
    exercises = exercises_in(guide.read_guide(GUIDE))
    rows = []
    for learner, verdicts in grades.items():
        marks = [verdicts.get(exercise, results.TIMEOUT if not verdicts else results.NOT_RUN)
                 for exercise in exercises]
        rows.append([learner, *marks, f"{marks.count(results.PASS)}/{len(exercises)}"])
    return ["learner", *exercises, "passed"], rows


def markdown(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows]) + "\n"


def main(argv=None):
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not Path(args[0]).is_dir():
        print("usage: python3 tools/grade.py CLASS   (a folder holding one folder per learner)",
              file=sys.stderr)
        return 2
    class_folder = Path(args[0]).resolve()
    learners = sorted(p for p in class_folder.iterdir()
                      if p.is_dir() and not p.name.startswith("."))
    if not learners:
        print(f"{class_folder} holds no learner folders", file=sys.stderr)
        return 2
    grades = {}
    for learner in learners:
        print(f"grading {learner.name} ...", file=sys.stderr, flush=True)
        grades[learner.name] = grade(learner)
    header, rows = table(grades)
    with open(class_folder / "grades.csv", "w", newline="", encoding="utf-8") as out:
        csv.writer(out).writerows([header, *rows])
    text = markdown(header, rows)
    (class_folder / "grades.md").write_text(text, encoding="utf-8")
    print(text, end="")
    everyone_passed = all(row[-1].split("/")[0] == row[-1].split("/")[1] for row in rows)
    return 0 if everyone_passed else 1


if __name__ == "__main__":
    sys.exit(main())
