"""catalogue.py: which exercise a console block checks, and the given files."""

from sybil import Document

from tools.harness import catalogue, sessions
from tests.harness.demo import guide_text


def test_a_session_belongs_to_the_exercise_it_names():
    text, _ = guide_text(('{.console session="q"}', "$ ls\n"),
                         ('{.console session="q" terminal="2"}', "$ python3 ex97_queue.py\n"),
                         ('{.console session="q"}', "more output\n"),
                         ("console", "$ true\n"))
    blocks = [region.parsed for region in sessions.parse_console_blocks(Document(text, "guide.md"))]
    assert [catalogue.exercise_of(block) for block in blocks] == ["ex97_queue.py"] * 3 + [None]


def test_a_command_that_imports_tinyq_belongs_to_the_capstone_library():
    """A one-line Python command that imports tinyq (Chapter 9's unique_key
    drill) is graded for capstone/tinyq.py; tinyq_pg.py stays the lab's."""
    text, _ = guide_text(("console", "$ cd capstone\n$ python3 -c \"import tinyq; print(1)\"\n1\n"),
                         ("console", "$ python3 -c \"import tinyq_pg\"\n"),
                         ("console", "$ python3 chaos.py\n"))
    blocks = [region.parsed for region in sessions.parse_console_blocks(Document(text, "guide.md"))]
    assert [catalogue.exercise_of(block) for block in blocks] == [
        "capstone/tinyq.py", None, "capstone/chaos.py"]


def test_every_given_file_of_code_says_which_exercise_it_serves():
    """catalogue.GIVEN names each file of code/ named *_given.py, and no
    other, with an exercise that code/ has."""
    code = catalogue.CODE
    assert set(catalogue.GIVEN) == {p.relative_to(code).as_posix() for p in code.rglob("*_given.py")}
    assert all((code / serves).is_file() for serves in catalogue.GIVEN.values())


def test_a_command_that_runs_a_given_file_belongs_to_the_exercise_it_serves():
    """A given file is never an exercise of its own: a command that runs or
    imports ex09_practice_given.py is graded for ex09_charge_worker.py."""
    text, _ = guide_text(("console", "$ python3 ex09_practice_given.py o7\n"),
                         ("console", "$ python3 -c \"import ex09_practice_given\"\n"),
                         ("console", "$ python3 ex09_charge_worker.py o7\n"))
    blocks = [region.parsed for region in sessions.parse_console_blocks(Document(text, "guide.md"))]
    assert [catalogue.exercise_of(block) for block in blocks] == ["ex09_charge_worker.py"] * 3


def test_a_command_that_names_the_capstones_given_world_belongs_to_chaos_py():
    """The capstone's given file, capstone/world_given.py, serves the
    capstone, whose transcripts count for chaos.py: a command that runs or
    imports it is graded for chaos.py, never for a file of its own."""
    assert catalogue.given_to("capstone/world_given.py") == catalogue.CHAOS
    text, _ = guide_text(("console", "$ cd capstone\n$ python3 world_given.py\n"),
                         ("console", "$ cd capstone\n$ python3 -c \"import world_given\"\n"))
    blocks = [region.parsed for region in sessions.parse_console_blocks(Document(text, "guide.md"))]
    assert [catalogue.exercise_of(block) for block in blocks] == [catalogue.CHAOS] * 2
    assert "capstone/world_given.py" not in catalogue.CAPSTONE
