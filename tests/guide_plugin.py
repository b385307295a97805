"""pytest wiring: collect guide.md's console blocks with Sybil, choose the
folder whose exercise files are checked (code/, or --work FOLDER), and end
with one line per exercise: PASS, FAIL, ERROR (the program crashed), TIMEOUT
(it ran too long), MISSING or NOT RUN; a problem also names the chapter and
section to reread.

Loaded from the root conftest.py, since guide.md sits at the root.
"""

import re
from collections import defaultdict
from pathlib import Path

import pytest
from sybil import Sybil
from sybil.example import SybilFailure

import console
import fences

GUIDE = console.ROOT / "guide.md"
RESULTS = pytest.StashKey[dict]()


# What grading a learner's folder runs: the tests that use the files under
# test. With --work, every other test file is left out of the run; so is
# test_pace.py, which checks that the guide's stories hold at a person's pace
# (with code/), and is never counted for a learner's exercise.
GRADED = {"guide.md", "test_exercises.py", "test_capstone.py", "test_chaos.py"}


def pytest_addoption(parser):
    parser.addoption("--work", metavar="FOLDER",
                     help="check a learner's exercise files in FOLDER instead of code/ "
                          "(runs only the tests that use them)")


def pytest_ignore_collect(collection_path, config):
    if config.getoption("--work") and collection_path.is_file() \
            and collection_path.name not in GRADED:
        return True
    return None


def source_folder_of(config):
    work = config.getoption("--work")
    return Path(work).absolute() if work else console.ROOT / "code"


def pytest_configure(config):
    if not source_folder_of(config).is_dir():
        raise pytest.UsageError(f"WORK folder {source_folder_of(config)} does not exist")
    config.stash[RESULTS] = {"ran": set(), "problems": defaultdict(list), "blocks": 0}


@pytest.fixture(scope="session")
def source_folder(pytestconfig):
    """The folder of exercise files under test: code/ or the learner's WORK."""
    return source_folder_of(pytestconfig)


pytest_collect_file = Sybil(
    parsers=[console.parse_console_blocks],
    patterns=["guide.md"],
    path=str(console.ROOT),
    fixtures=["source_folder"],
    teardown=console.close_sessions,     # a session whose last block did not run
).pytest()


def pytest_collection_modifyitems(items):
    # A block's exercise is known from its commands; mark it like a claims test.
    for item in items:
        block = getattr(getattr(item, "example", None), "parsed", None)
        if isinstance(block, fences.Block) and console.exercise_of(block):
            item.add_marker(pytest.mark.exercise(console.exercise_of(block)))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    results = item.config.stash[RESULTS]
    if call.when == "call" and hasattr(item, "example"):
        results["blocks"] += 1                  # a console block of guide.md
    marker = item.get_closest_marker("exercise")
    if marker:
        results["ran"].add(marker.args[0])
        if report.failed:
            results["problems"][marker.args[0]].append(short_failure(item, call, report))
    return report


def short_failure(item, call, report):
    error = call.excinfo.value if call.excinfo else None
    if isinstance(error, SybilFailure):
        return error.result                     # already says guide.md:LINE
    claim = (item.function.__doc__ or "").strip() if isinstance(item, pytest.Function) else ""
    text = call.excinfo.exconly() if call.excinfo else report.longreprtext
    return "\n".join([f"{item.nodeid}: {claim}"] + text.splitlines()[:6])


def pytest_terminal_summary(terminalreporter, config):
    results = config.stash[RESULTS]
    if not results["ran"]:
        return                                  # no exercise was checked in this run
    folder = source_folder_of(config)
    terminalreporter.section("exercises")
    terminalreporter.write_line(
        f"{results['blocks']} console blocks of guide.md run against {folder}")
    guide = GUIDE.read_text(encoding="utf-8")
    for exercise in console.exercises_in(fences.read_guide(GUIDE)):
        problems = results["problems"][exercise]
        if not (folder / exercise).is_file():
            status = "MISSING"
        elif problems:
            status = failure_kind(problems)
        elif exercise in results["ran"]:
            status = "PASS"
        else:
            status = "NOT RUN"
        terminalreporter.write_line(f"{exercise}  {status}")
        if status in ("FAIL", "ERROR", "TIMEOUT"):
            terminalreporter.write_line(f"    reread: {where_taught(guide, exercise)}")
            for problem in problems:
                lines = problem.splitlines()
                for line in lines[:12] + (["[...]"] if len(lines) > 12 else []):
                    terminalreporter.write_line("    " + line)


def failure_kind(problems):
    """TIMEOUT when a program ran too long; ERROR when it would not compile,
    or crashed where the guide shows no crash (a traceback on a diff line of
    its own: the guide's Break Its show tracebacks too), unless the crash was
    the transcript's own Ctrl-C arriving at another moment; otherwise FAIL, a
    program that ran and did or printed something else."""
    text = "\n".join(problems)
    if re.search(r"still running|had not printed, after|Failed: Timeout \(>", text):
        return "TIMEOUT"
    if re.search(r"SyntaxError|IndentationError|crashed when imported", text):
        return "ERROR"
    crashed = re.search(r"^\s*\+Traceback \(most recent call last\)", text, re.M)
    interrupted = re.search(r"^\s*\+KeyboardInterrupt$", text, re.M)
    return "ERROR" if crashed and not interrupted else "FAIL"


def where_taught(guide, exercise):
    """The chapter and section that present the exercise's listing."""
    include = guide.find(f'include="code/{exercise}"')
    before = guide[:include] if include >= 0 else ""
    chapter = re.findall(r"^# (.+)$", before, re.M)
    section = re.findall(r"^## (.+)$", before[before.rfind("\n# "):], re.M) if chapter else []
    return " › ".join((chapter[-1:] + section[-1:]) or ["the guide"])

