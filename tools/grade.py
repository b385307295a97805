"""Grade a class: every folder inside CLASS holds one learner's files.

Usage:  python3 tools/grade.py CLASS      (make grade CLASS=folder)

Each learner is graded as `make check WORK=folder` grades one: the guide's
transcripts and the claims tests, run against their files. Each learner
gets a fresh pytest process with a time limit, so one learner's disaster
(a hang, a crash, a syntax error) ends only their own row. The table, one
row per learner and one column per exercise, is written to CLASS/grades.csv
and CLASS/grades.md, and the Markdown is printed. Exit status: 0 when every
learner passed everything, 1 otherwise.
"""
import csv
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
import console  # noqa: E402  (the harness knows which exercises the guide has)
import fences  # noqa: E402
LEARNER_SECONDS = 1200           # a whole learner's grading, at the most
VERDICT = re.compile(r"^((?:ex\d\d_\w+|capstone/chaos)\.py)  ([A-Z][A-Z ]+)$", re.M)


def grade(folder):
    """{exercise: verdict} for one learner's folder."""
    try:
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
             f"--work={folder}"],
            cwd=ROOT, capture_output=True, text=True, timeout=LEARNER_SECONDS)
    except subprocess.TimeoutExpired:
        return {}
    return dict(VERDICT.findall(result.stdout))


def table(grades):
    """The exercises, in the course's order, and one row per learner."""
    exercises = console.exercises_in(fences.read_guide(ROOT / "guide.md"))
    rows = []
    for learner, verdicts in grades.items():
        marks = [verdicts.get(exercise, "TIMEOUT" if not verdicts else "NOT RUN")
                 for exercise in exercises]
        rows.append([learner, *marks, f"{marks.count('PASS')}/{len(exercises)}"])
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
