"""The course's exercises, declared once, in the course's order.

Each Exercise is a file the learner types and is graded on: whether it is
optional, whether it is Chapter 12's lab (graded only where a PostgreSQL
server can start), the given files its commands count for, the other typed
files its transcripts run, and the test modules that grade it. Grading's
order, columns and collected test files, the summary, tools/load.py and
the README's counts all come from this list; where each exercise is taught
comes from the guide (the chapter and section of its first listing).

A console block counts for the exercise that its session's commands name
first (exercise_of): so the guide's capstone transcripts count for chaos.py,
the file they run, except Chapter 9's `python3 -m doctest tinyq.py` and its
unique_key drill, which imports tinyq: those count for capstone/tinyq.py.
"""

import re
from dataclasses import dataclass
from pathlib import Path

from tools import guide

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "guide.md"
CODE = ROOT / "code"


@dataclass(frozen=True)
class Exercise:
    file: str                   # its path inside code/ and inside a learner's folder
    tests: tuple = ()           # the test modules that grade it, from the repository's root,
                                # in the order their failures are told (the first decides)
    optional: bool = False      # graded only if handed in
    lab: bool = False           # Chapter 12's lab: graded only where PostgreSQL can start
    given: tuple = ()           # given files (*_given.py): commands naming them count for it
    runs: tuple = ()            # other typed files that its transcripts run too


def _exercise(number, name, *more):
    """Exercise number's file, ex<number>_<name>.py, graded by
    tests/exercises/test_ex<number>.py (and any more modules named)."""
    return Exercise(f"ex{number:02}_{name}.py", (f"tests/exercises/test_ex{number:02}.py", *more))


# In the order grading lists them, which is not the guide's: Exercise 9 is
# taught after the capstone. The capstone's three typed files, each graded
# on its own; its outside world, capstone/world_given.py, is given, and its
# transcripts (chaos.py's) count for chaos.py. Chapter 6's herd.py is an
# optional experiment, graded by its transcripts and a test of its seed; the
# lab's chaos_pg.py by its transcripts alone, as its tests grade tinyq_pg.py,
# the queue it runs.
EXERCISES = (
    _exercise(1, "slow_signup"),
    _exercise(2, "jobs"),
    _exercise(3, "memory_queue"),
    _exercise(4, "durable_queue"),
    _exercise(5, "two_workers"),
    _exercise(6, "leases"),
    _exercise(7, "retries"),
    _exercise(8, "idempotency"),
    Exercise("ex09_charge_worker.py",
             ("tests/exercises/test_ex09.py", "tests/exercises/test_ex09_admission.py",
              "tests/exercises/test_ex09_budgets.py", "tests/exercises/test_ex09_payments.py"),
             given=("ex09_practice_given.py",)),
    Exercise("ex09_webhooks.py", ("tests/exercises/test_ex09_webhooks.py",), optional=True),
    Exercise("herd.py", ("tests/exercises/test_herd.py",), optional=True),
    Exercise("capstone/tinyq.py", ("tests/capstone/test_tinyq.py", "tests/capstone/test_chaos.py",
                                   "tests/capstone/test_killed_workers.py")),
    Exercise("capstone/shop.py", ("tests/capstone/test_shop.py",)),
    Exercise("capstone/chaos.py", ("tests/capstone/test_chaos.py",),
             given=("capstone/world_given.py",), runs=("capstone/tinyq.py", "capstone/shop.py")),
    Exercise("capstone/races_pg.py", ("tests/capstone/test_races_pg.py",),
             optional=True, lab=True),
    # test_tinyq.py holds tinyq's promises on both backends, and
    # test_killed_workers.py the queue check (tests/capstone/conftest.py).
    Exercise("capstone/tinyq_pg.py", ("tests/capstone/test_tinyq.py",
                                      "tests/capstone/test_chaos_pg.py",
                                      "tests/capstone/test_tinyq_pg.py",
                                      "tests/capstone/test_killed_workers.py"),
             optional=True, lab=True),
    Exercise("capstone/chaos_pg.py", optional=True, lab=True),
)
BY_FILE = {exercise.file: exercise for exercise in EXERCISES}
FILES = tuple(BY_FILE)
OPTIONAL = tuple(exercise.file for exercise in EXERCISES if exercise.optional)
LAB = tuple(exercise.file for exercise in EXERCISES if exercise.lab)
# Each given file, and the exercise it serves.
GIVEN = {given: exercise.file for exercise in EXERCISES for given in exercise.given}
# The test modules that grade a learner's folder (pytest --work collects no other).
GRADED_TESTS = tuple(dict.fromkeys(test for exercise in EXERCISES for test in exercise.tests))


def given_to(name):
    """The exercise a given file serves; any other name is its own."""
    return GIVEN.get(name, name)


def files_run(name):
    """The typed files that a transcript of exercise name runs: its own,
    and the others it declares (chaos.py runs tinyq.py and shop.py)."""
    return [name, *BY_FILE[name].runs] if name in BY_FILE else [name]


def _command_pattern():
    """What in a `$` command names a file of the course: ex02_jobs.py or the
    module ex02_jobs (any exNN_ name); any other exercise's or given file's
    name as a file (chaos.py), or as a module after `import` (tinyq)."""
    paths = {Path(name).stem: name for name in [*FILES, *GIVEN]}
    others = [stem for stem in paths if not re.match(r"ex\d\d_", stem)]
    names = "|".join(sorted(map(re.escape, others), key=len, reverse=True))
    pattern = re.compile(rf"\bex\d\d_\w+|\b(?:{names})(?=\.py\b)|(?<=\bimport )(?:{names})\b")
    return pattern, paths


EXERCISE, PATHS = _command_pattern()


def exercise_of(block):
    """The exercise file that its session's commands name first, or None."""
    blocks = getattr(block, "session_blocks", None) or [block]
    for each in blocks:
        for line in each.source.splitlines():
            match = EXERCISE.search(line) if line.startswith("$ ") else None
            if match:
                return given_to(PATHS.get(match.group(), match.group() + ".py"))
    return None


def where_taught(text, exercise):
    """The chapter and section of the guide (its text) whose listing first
    shows the exercise's file."""
    listing = next((block for block in guide.blocks(text)
                    if block.attributes.get("include") == f"code/{exercise}"), None)
    return section_ending(text[:listing.start] if listing else "")


def section_ending(before):
    """The chapter and section that a part of the guide's text, from its
    start, ends in."""
    chapter = re.findall(r"^# (.+)$", before, re.M)
    section = re.findall(r"^## (.+)$", before[before.rfind("\n# "):], re.M) if chapter else []
    return " › ".join((chapter[-1:] + section[-1:]) or ["the guide"])
