"""The classic mistakes of tools/mistakes.py against the course as it stands,
fast enough for `make check`: each still applies to code/ and still compiles
there; each has a hint, and stops at steps its exercise has (tests collected
from its modules, commands of its console blocks); and `hints_for` gives a
mistake's hint at its steps only. Whether each mistake still fails its
exercise, and at those steps, is test_mutations.py's (slow: a grading run each).
"""
import shutil
import subprocess
import sys
from collections import defaultdict
from types import SimpleNamespace

import pytest

from tools.harness import catalogue, results
from tools.harness.sessions import parse_console_blocks
from tools.mistakes import MISTAKES, apply, hints_for, step_of

IDS = [f"{mistake.file}: {mistake.what}" for mistake in MISTAKES]
FILES = sorted({mistake.file for mistake in MISTAKES})


@pytest.mark.parametrize("mistake", MISTAKES, ids=IDS)
def test_a_classic_mistake_still_applies_to_code(mistake, tmp_path):
    """Each edit's old text occurs once in code/'s file as the edits before
    it leave it, the file changes, and it still compiles."""
    copy = tmp_path / mistake.file
    copy.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(catalogue.CODE / mistake.file, copy)
    apply(mistake, tmp_path)              # sandbox.EditError names the file and the text
    made = copy.read_text(encoding="utf-8")
    assert made != (catalogue.CODE / mistake.file).read_text(encoding="utf-8")
    compile(made, str(copy), "exec")      # a SyntaxError names the file and line


@pytest.fixture(scope="module")
def steps():
    """{exercise: its steps}: the names of the tests collected from its
    modules, and the commands of the console blocks that count for it."""
    found = defaultdict(set)
    for block in blocks_in_sessions():
        exercise = catalogue.exercise_of(block)
        found[exercise].update(commands_of(block))
    tests = collected(catalogue.GRADED_TESTS)
    for exercise in FILES:
        for module in catalogue.BY_FILE[exercise].tests:
            found[exercise].update(tests[module])
    return found


def blocks_in_sessions():
    """guide.md's console blocks, each knowing its session, as the harness reads them."""
    document = SimpleNamespace(text=catalogue.GUIDE.read_text(encoding="utf-8"), path="guide.md")
    return [region.parsed for region in parse_console_blocks(document)]


def collected(modules):
    """{module: names of the test functions pytest collects from it}."""
    listing = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
         *modules], cwd=catalogue.ROOT, capture_output=True, text=True)
    assert listing.returncode == 0, listing.stdout[-3000:] + listing.stderr
    names = defaultdict(set)
    for line in listing.stdout.splitlines():
        module, separator, test = line.partition("::")
        if separator:
            names[module].add(test.partition("[")[0])
    assert set(names) == set(modules), listing.stdout[-3000:]
    return names


@pytest.mark.parametrize("mistake", MISTAKES, ids=IDS)
def test_a_classic_mistake_has_a_hint_and_stops_at_steps_its_exercise_has(mistake, steps):
    assert mistake.hint.strip() and mistake.hint[-1] in ".?", "a hint of one or two sentences"
    assert mistake.stops_at, "no step: grade it (test_mutations.py) and note where it stops"
    unknown = set(mistake.stops_at) - steps[mistake.file]
    assert not unknown, f"{mistake.file} has no such step"


def test_hints_for_gives_nothing_at_a_step_no_mistake_stops_at(steps):
    quiet = [(exercise, step) for exercise in FILES for step in steps[exercise]
             if not any(mistake.file == exercise and step in mistake.stops_at
                        for mistake in MISTAKES)]
    assert len(quiet) > 100              # most steps catch no classic mistake
    assert [(exercise, step) for exercise, step in quiet
            if any(hints_for(exercise, step, kind) for kind in results.EXPLAINED)] == []
    assert hints_for("ex01_slow_signup.py", "python3 no_such_exercise.py", results.FAIL) == []


def test_hints_for_gives_every_mistake_that_stops_at_a_step_and_of_that_file_only():
    """Several mistakes may stop at one step (a transcript shows many): the
    learner gets the hint of each."""
    shared = 0
    for mistake in MISTAKES:
        for step in mistake.stops_at:
            given = hints_for(mistake.file, step, mistake.verdict)
            assert mistake.hint in given
            shared += len(given) > 1
            for other in set(FILES) - {mistake.file}:
                assert mistake.hint not in hints_for(other, step, mistake.verdict)
            for kind in set(results.EXPLAINED) - {mistake.verdict}:
                assert mistake.hint not in hints_for(mistake.file, step, kind)
    assert shared


def test_a_step_is_a_tests_function_or_a_transcripts_command():
    """A claims test by its function's name without parameters; a transcript
    by its command; a block whose edit= failed before any command ran by its
    first command; a problem the guide cannot place, by nothing."""
    test = {"where": "tests/capstone/test_tinyq.py:99", "command": None,
            "test": "tests/capstone/test_tinyq.py::test_a_claim_is_a_lease[sqlite]"}
    assert step_of(test) == "test_a_claim_is_a_lease"
    blocks = blocks_in_sessions()
    several = next(block for block in blocks if len(set(commands_of(block))) > 1)
    transcript = {"where": several.where(3), "test": None, "command": commands_of(several)[-1]}
    assert step_of(transcript) == commands_of(several)[-1] != commands_of(several)[0]
    edited = next(block for block in blocks if "edit" in block.attributes)
    failed_first = {"where": edited.where(), "test": None, "command": None}
    assert step_of(failed_first) == commands_of(edited)[0]
    assert step_of({"where": "guide.md", "test": None, "command": None}) is None


def commands_of(block):
    return [line[2:] for line in block.body if line.startswith("$ ")]


def test_mistakes_that_share_a_step_each_say_what_their_failure_shows():
    """Where two mistakes can stop at one step with one verdict, each has a
    `shows`, so that a failure there gets the hint of the mistake it shows,
    not every hint of the step (the review of chapters 0-6, round four,
    finding 14)."""
    sharing = defaultdict(list)
    for mistake in MISTAKES:
        for step in mistake.stops_at:
            sharing[mistake.file, step, mistake.verdict].append(mistake)
    unsaid = {mistake.what for together in sharing.values() if len(together) > 1
              for mistake in together if not mistake.shows}
    assert not unsaid, sorted(unsaid)


def test_a_failure_that_shows_no_mistake_gets_no_hint():
    """A step several mistakes stop at, failing in a way none of them shows
    (a line retyped), gives no hint; failing as one of them shows, its hint."""
    step = "python3 ex01_slow_signup.py"
    retyped = ("`$ python3 ex01_slow_signup.py` printed something else.\n"
               "-ann@example.com: account created\n+ann@example.com: created")
    assert hints_for("ex01_slow_signup.py", step, results.FAIL, retyped) == []
    swapped = "+ann@example.com: welcome email sent\n ann@example.com: account created"
    assert hints_for("ex01_slow_signup.py", step, results.FAIL, swapped) == [
        next(m.hint for m in MISTAKES if m.what.startswith("Study Drill 3's swap kept"))]
