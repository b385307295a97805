"""The course's exercises, as the guide presents them.

Which exercise a console block checks (the file its session's commands name
first), the exercises of the guide in the course's order, and the chapter
and section that teach each one. The per-exercise summary and grading use it.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "guide.md"
CODE = ROOT / "code"

# A command naming ex02_jobs.py, or the module ex02_jobs, belongs to that
# exercise; one that runs chaos.py, to the capstone's chaos.py; one that
# runs herd.py, to Chapter 6's herd.py; one naming races_pg.py,
# tinyq_pg.py or chaos_pg.py, to that file of the lab; one that imports
# tinyq or names tinyq.py, to the capstone's tinyq.py; one naming a given
# file (ex09_practice_given.py, or capstone/world_given.py as a file or a
# module), to the exercise it serves (given_to).
EXERCISE = re.compile(r"\bex\d\d_\w+|\b(?:chaos|herd)(?=\.py\b)"
                      r"|\b(?:tinyq|races|chaos)_pg(?=\.py\b)"
                      r"|(?<=\bimport )tinyq\b|\btinyq(?=\.py\b)"
                      r"|\bworld_given(?=\.py\b)|(?<=\bimport )world_given\b")
CHAOS = "capstone/chaos.py"
# Chapter 12's lab, on PostgreSQL: optional. A learner's folder without
# these files is graded as if the guide did not have them.
TINYQ_PG = "capstone/tinyq_pg.py"
LAB = ("capstone/races_pg.py", TINYQ_PG, "capstone/chaos_pg.py")
# The files a learner may leave out: the lab's, and Chapter 6's herd.py, an
# optional experiment the reader may copy. Graded only if handed in.
OPTIONAL = ("herd.py", *LAB)
# The capstone's files, each graded on its own, in the order the guide has
# you type them. The tests that exercise a file are marked with it. Its
# outside world, capstone/world_given.py, is given, not typed: never graded.
TINYQ = "capstone/tinyq.py"
CAPSTONE = (TINYQ, "capstone/shop.py", CHAOS)


# The given files (named *_given.py: downloaded, never typed, never graded),
# each with the exercise its commands count for: the capstone's world serves
# chaos.py, as every capstone transcript does.
GIVEN = {"ex09_practice_given.py": "ex09_charge_worker.py",
         "capstone/world_given.py": CHAOS}


def given_to(name):
    """The exercise a given file serves; any other name is its own."""
    return GIVEN.get(name, name)


def exercise_of(block):
    """The exercise file that its session's commands name first, or None."""
    blocks = getattr(block, "session_blocks", None) or [block]
    for each in blocks:
        for line in each.source.splitlines():
            match = EXERCISE.search(line) if line.startswith("$ ") else None
            if match:
                if match.group() == "chaos":
                    return CHAOS
                if match.group() == "tinyq":
                    return TINYQ
                capstone = match.group().endswith("_pg") or match.group() == "world_given"
                return given_to(("capstone/" if capstone else "") + match.group() + ".py")
    return None


def exercises_in(blocks):
    """The exercises that blocks name, in the course's order: the capstone's
    files (all of them if its chaos.py is named), then the lab's."""
    names = {exercise_of(b) for b in blocks if "console" in b.classes} - {None}
    if CHAOS in names:
        names.update(CAPSTONE)
    if names & set(LAB):
        names.update(LAB)
    last = CAPSTONE + LAB
    return sorted(names, key=lambda name: (name in last, last.index(name)
                                           if name in last else name))


def where_taught(guide, exercise):
    """The chapter and section that present the exercise's listing."""
    include = guide.find(f'include="code/{exercise}"')
    before = guide[:include] if include >= 0 else ""
    chapter = re.findall(r"^# (.+)$", before, re.M)
    section = re.findall(r"^## (.+)$", before[before.rfind("\n# "):], re.M) if chapter else []
    return " › ".join((chapter[-1:] + section[-1:]) or ["the guide"])

