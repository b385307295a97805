"""catalogue.py: the exercises declared once, which exercise a console block
checks, the given files, and that the guide, code/, the tests and the
README agree with the declaration."""

import json
import os
import re
import subprocess
import sys

from sybil import Document

from tools import guide
from tools.harness import catalogue, sessions
from tests.harness.demo import guide_text


def exercises_named(*blocks):
    """The exercise each console block of a demo guide checks."""
    text, _ = guide_text(*blocks)
    parsed = [region.parsed for region in sessions.parse_console_blocks(Document(text, "guide.md"))]
    return [catalogue.exercise_of(block) for block in parsed]


# ---------------------------------------------------------------- which exercise a block checks

def test_a_session_belongs_to_the_exercise_it_names():
    assert exercises_named(('{.console session="q"}', "$ ls\n"),
                           ('{.console session="q" terminal="2"}', "$ python3 ex97_queue.py\n"),
                           ('{.console session="q"}', "more output\n"),
                           ("console", "$ true\n")) == ["ex97_queue.py"] * 3 + [None]


def test_a_command_that_imports_tinyq_belongs_to_the_capstone_library():
    """A one-line Python command that imports tinyq (Chapter 9's unique_key
    drill) is graded for capstone/tinyq.py; one that imports tinyq_pg, for
    the lab's tinyq_pg.py."""
    assert exercises_named(
        ("console", "$ cd capstone\n$ python3 -c \"import tinyq; print(1)\"\n1\n"),
        ("console", "$ python3 -c \"import tinyq_pg\"\n"),
        ("console", "$ python3 chaos.py\n")) == [
        "capstone/tinyq.py", "capstone/tinyq_pg.py", "capstone/chaos.py"]


def test_every_given_file_of_code_says_which_exercise_it_serves():
    """catalogue.GIVEN names each file of code/ named *_given.py, and no
    other, with an exercise that code/ has."""
    code = catalogue.CODE
    assert set(catalogue.GIVEN) == {p.relative_to(code).as_posix() for p in code.rglob("*_given.py")}
    assert all((code / serves).is_file() for serves in catalogue.GIVEN.values())


def test_a_command_that_runs_a_given_file_belongs_to_the_exercise_it_serves():
    """A given file is never an exercise of its own: a command that runs or
    imports ex09_practice_given.py is graded for ex09_charge_worker.py."""
    assert exercises_named(("console", "$ python3 ex09_practice_given.py o7\n"),
                           ("console", "$ python3 -c \"import ex09_practice_given\"\n"),
                           ("console", "$ python3 ex09_charge_worker.py o7\n")) == [
        "ex09_charge_worker.py"] * 3


def test_a_command_that_names_the_capstones_given_world_belongs_to_chaos_py():
    """The capstone's given file, capstone/world_given.py, serves the
    capstone, whose transcripts count for chaos.py: a command that runs or
    imports it is graded for chaos.py, never for a file of its own."""
    assert catalogue.given_to("capstone/world_given.py") == "capstone/chaos.py"
    assert exercises_named(("console", "$ cd capstone\n$ python3 world_given.py\n"),
                           ("console", "$ cd capstone\n$ python3 -c \"import world_given\"\n")
                           ) == ["capstone/chaos.py"] * 2
    assert "capstone/world_given.py" not in catalogue.FILES


# ---------------------------------------------------------------- the declaration holds

def test_code_holds_the_catalogues_exercises_and_given_files_and_nothing_else():
    """A new file in code/ is an exercise the catalogue declares, or a given file."""
    code = {path.relative_to(catalogue.CODE).as_posix() for path in catalogue.CODE.rglob("*.py")}
    assert code == {*catalogue.FILES, *catalogue.GIVEN}


def test_the_guide_teaches_every_exercise_and_runs_none_the_catalogue_lacks():
    """Each exercise has a listing in the guide (where a learner who failed it
    is sent back to), and every file a console block runs is declared."""
    text = catalogue.GUIDE.read_text(encoding="utf-8")
    untaught = [name for name in catalogue.FILES
                if catalogue.where_taught(text, name) == "the guide"]
    assert untaught == []
    blocks = guide.blocks(text)
    run = {catalogue.exercise_of(block) for block in blocks if "console" in block.classes}
    assert run - {None} <= set(catalogue.FILES)


# The one test file whose tests are marked with an exercise and yet never
# graded: it re-runs the guide's sessions at a person's pace, with code/.
NEVER_GRADED = {"tests/test_pace.py"}
# Records, at collection, each test's file and the exercise it is marked with.
MARKS_PLUGIN = """
import json, os
def pytest_collection_finish(session):
    marks = sorted({(item.path.relative_to(session.config.rootpath).as_posix(), marker.args[0])
                    for item in session.items
                    for marker in [item.get_closest_marker("exercise")] if marker})
    with open(os.environ["MARKS_FILE"], "w") as out:
        json.dump(marks, out)
"""


def marked_tests(tmp_path):
    """{(test file, exercise)} for every test of the suite marked with an exercise."""
    (tmp_path / "record_marks.py").write_text(MARKS_PLUGIN)
    env = {**os.environ, "MARKS_FILE": str(tmp_path / "marks.json"),
           "PYTHONPATH": os.pathsep.join([str(catalogue.ROOT), str(tmp_path)])}
    result = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                             "-p", "record_marks", "--collect-only", "-q"],
                            cwd=catalogue.ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    return {tuple(pair) for pair in json.loads((tmp_path / "marks.json").read_text())}


def test_each_exercises_tests_are_the_modules_the_catalogue_names(tmp_path):
    """A test marked with an exercise lies in a module the catalogue names
    for that exercise (or make check WORK= would leave it out), and each
    module named holds tests marked with it."""
    marked = {(path, name) for path, name in marked_tests(tmp_path)
              if path != "guide.md" and path not in NEVER_GRADED}
    declared = {(test, exercise.file) for exercise in catalogue.EXERCISES
                for test in exercise.tests}
    assert marked - declared == set(), "marked for an exercise, in a module it does not name"
    assert declared - marked == set(), "named by the catalogue, but no test there is marked so"


# ---------------------------------------------------------------- the README's counts

NUMBERS = dict(zip("two three four five six seven eight nine ten eleven twelve".split(),
                   range(2, 13)))


def readme_says(pattern):
    """The groups of pattern in README.md, its lines joined."""
    readme = " ".join((catalogue.ROOT / "README.md").read_text(encoding="utf-8").split())
    found = re.search(pattern, readme)
    assert found, f"README.md no longer says {pattern!r}: update it or this test"
    return found.groups()


def test_the_readme_counts_the_exercises_the_catalogue_declares():
    """README.md's "the capstone's three typed files after the nine
    exercises", its optional files and its given files are the catalogue's."""
    capstone, first = readme_says(r"the capstone's (\w+) typed files after the (\w+) exercises")
    required = [name for name in catalogue.FILES if name not in catalogue.OPTIONAL]
    in_capstone = [name for name in required if name.startswith("capstone/")]
    assert (NUMBERS[first], NUMBERS[capstone]) == \
        (len(required) - len(in_capstone), len(in_capstone))
    optional, lab = readme_says(r"Optional files get a line only from a learner who handed them"
                                r" in: (.*?), and Chapter 12's lab on PostgreSQL, last \((.*?)\)")
    assert re.findall(r"`([^`]+)`", optional + lab) == list(catalogue.OPTIONAL)
    assert re.findall(r"`([^`]+)`", lab) == list(catalogue.LAB)
    given, = readme_says(r"download it into the same folder \((.*?)\)\.")
    assert re.findall(r"`([\w/]+_given\.py)`", given) == list(catalogue.GIVEN)
