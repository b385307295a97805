"""pytest wiring: collect guide.md's console blocks with Sybil, choose the
folder whose exercise files are checked (code/, or --work FOLDER), and end
with one line per exercise: PASS, FAIL, ERROR (the program crashed), TIMEOUT
(it ran too long), MISSING, NOT RUN, or NOT GRADED (the optional lab, where
no PostgreSQL server can start; results.py); a problem also names
the chapter and section to reread. With --results-json PATH it also writes
them to a JSON file, which grading reads. It works the same with -n
(pytest-xdist): its scheduler keeps a session's blocks in one worker, in
order (xdist's own `--dist loadgroup` no longer groups anything under
pytest 9), and runs the tests of the files that pytest.ini's `run_together`
patterns match one after another in one worker (a test that opens a page in
a file no pattern matches is a usage error); each worker attaches what the
summary needs to its reports, as a user property, and the process that
reports counts those, so the per-exercise lines are the same with -n as
without.

A failed step's kind travels as data (results.py): a transcript's with the
sandbox.Failure that sessions.py returns to Sybil, a test's from its
exception (`kind_of_test_failure`). Whether a PostgreSQL server can start is
asked once, in pytest_configure, so that xdist's controller, which counts,
knows too: where none can, a lab file handed in is NOT GRADED, with the
reason, and none of its tests run.

With --steps-to FOLDER it also tells each step as it ends, in files that
the learner's checker reads (steps.py).

With --update-transcripts (`make transcripts`), a console block whose
commands print something else is rewritten in guide.md instead of failing
(update.py): the workers send their edits with their reports, and the
process that reports rewrites the guide once, at the end.

Loaded with `-p tools.harness.plugin` in pytest.ini: pytest offers guide.md, at
the root, only to plugins and to a conftest.py above it.
"""

from collections import defaultdict
from fnmatch import fnmatch
from pathlib import Path

import pytest
import pytest_timeout
from sybil import Sybil
from sybil.example import SybilFailure

from tools import guide

from . import postgres, steps, update
from .catalogue import (BY_FILE, CODE, FILES, GRADED_TESTS, GUIDE, LAB, OPTIONAL, ROOT,
                        exercise_of, where_taught)
from .results import (ERROR, EXPLAINED, FAIL, MISSING, NOT_GRADED, NOT_RUN, PASS, TIMEOUT,
                      as_text, test_problem, transcript_problem, verdict_of,
                      write as write_results)
from .sandbox import Failure, TranscriptError
from .sessions import UPDATES, close_sessions, parse_console_blocks

RESULTS = pytest.StashKey[dict]()
HARNESS = "harness step"      # the name of the user property each report carries


# What grading a learner's folder runs: the guide and the test modules that
# grade its exercises (catalogue.py), by their paths from the root. With
# --work, every other test file is left out of the run; so is test_pace.py,
# which checks that the guide's stories hold at a person's pace (with
# code/), and is never counted for a learner's exercise.
GRADED = {"guide.md", *GRADED_TESTS}


def pytest_addoption(parser):
    parser.addini("run_together", type="linelist",
                  help="patterns of test files (from the root) whose tests all run one "
                       "after another in one xdist worker: the browser tests")
    parser.addoption("--work", metavar="FOLDER",
                     help="check a learner's exercise files in FOLDER instead of code/ "
                          "(runs only the tests that use them)")
    parser.addoption("--exercise", metavar="FILE", action="append",
                     help="run only the tests of this exercise (a file as the summary "
                          "names it, like ex06_leases.py or capstone/tinyq.py); "
                          "give it again for more than one")
    parser.addoption("--results-json", metavar="PATH",
                     help="also write each exercise's verdict to PATH, as JSON "
                          "(what tools/grade.py reads)")
    parser.addoption("--steps-to", metavar="FOLDER",
                     help="also write the exercises' steps to FOLDER: their order once "
                          "they are collected, and each as it ends (steps.py; what "
                          "tools/check.py reads)")
    parser.addoption("--update-transcripts", action="store_true",
                     help="rewrite in guide.md each console block whose commands print "
                          "something else (keeping its pids, close timings and `...`)")


def pytest_ignore_collect(collection_path, config):
    """With --work, only what grades exercises is collected; with
    --exercise, only what grades those (the rest would be deselected)."""
    if not collection_path.is_file():
        return None
    only = config.getoption("--exercise")
    graded = {"guide.md", *(test for name in only for test in BY_FILE[name].tests)} \
        if only and all(name in BY_FILE for name in only) else GRADED
    if (config.getoption("--work") or only) and from_root(collection_path) not in graded:
        return True
    return None


def from_root(path):
    """A path as the catalogue names it: from the repository's root."""
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def source_folder_of(config):
    work = config.getoption("--work")
    return Path(work).absolute() if work else CODE


def pytest_configure(config):
    if not source_folder_of(config).is_dir():
        raise pytest.UsageError(f"WORK folder {source_folder_of(config)} does not exist")
    if config.getoption("--update-transcripts") and config.getoption("--work"):
        raise pytest.UsageError("--update-transcripts rewrites guide.md from code/; "
                                "it cannot be given with --work")
    # The lab is optional: a learner who did not hand it in is not graded
    # on it. One who did is NOT GRADED where no PostgreSQL server can be
    # started, rather than failed for what the machine lacks. (Asked here,
    # not at collection, so that xdist's controller, which counts, knows too.)
    folder = source_folder_of(config)
    handed_in = config.getoption("--work") and any((folder / name).is_file() for name in LAB)
    config.stash[RESULTS] = {"ran": set(), "problems": defaultdict(list), "blocks": 0,
                             "no_server": postgres.unavailable() if handed_in else None}
    if not hasattr(config, "workerinput"):      # not an xdist worker
        config.pluginmanager.register(Counter(config.stash[RESULTS]))
        if config.getoption("--steps-to"):
            config.pluginmanager.register(steps.Stream(config.getoption("--steps-to"), HARNESS))
        if config.getoption("--update-transcripts"):
            config.pluginmanager.register(update.Updater(GUIDE))


@pytest.fixture(scope="session")
def source_folder(pytestconfig):
    """The folder of exercise files under test: code/ or the learner's WORK."""
    return source_folder_of(pytestconfig)


@pytest.fixture(scope="session")
def update_transcripts(pytestconfig):
    """Whether console blocks that print something else are rewritten, not failed."""
    return pytestconfig.getoption("--update-transcripts")


pytest_collect_file = Sybil(
    parsers=[parse_console_blocks],
    patterns=["guide.md"],
    path=str(ROOT),
    fixtures=["source_folder", "update_transcripts"],
    teardown=close_sessions,     # a session whose last block did not run
).pytest()


def pytest_collection_modifyitems(config, items):
    refuse_browser_tests_run_apart(config, items)
    # A block's exercise is known from its commands; mark it like a claims test.
    for item in items:
        block = getattr(getattr(item, "example", None), "parsed", None)
        if isinstance(block, guide.Block) and exercise_of(block):
            item.add_marker(pytest.mark.exercise(exercise_of(block)))
    if config.getoption("--work"):
        # An optional file's tests only if it is handed in; the lab's only if
        # a server can start, too (configure).
        folder = source_folder_of(config)
        no_server = config.stash[RESULTS]["no_server"]
        skipped = [item for item in items if exercise_marked(item) in OPTIONAL
                   and (not (folder / exercise_marked(item)).is_file()
                        or exercise_marked(item) in LAB and no_server)]
        config.hook.pytest_deselected(items=skipped)
        items[:] = [item for item in items if item not in skipped]
    only = config.getoption("--exercise")
    if only:
        for name in only:
            if name not in FILES:
                raise pytest.UsageError(f"--exercise {name}: the guide has no such exercise")
        others = [item for item in items if exercise_marked(item) not in only]
        config.hook.pytest_deselected(items=others)
        items[:] = [item for item in items if exercise_marked(item) in only]


def pytest_collection_finish(session):
    """With --steps-to, the steps' order: written by one collecting process."""
    folder = session.config.getoption("--steps-to")
    worker = getattr(session.config, "workerinput", {}).get("workerid", "gw0")
    if folder and worker == "gw0":
        steps.write_plan(folder, session.items, step_order, exercise_marked)


BROWSER_FIXTURES = {"page", "browser", "context"}     # pytest-playwright's


def runs_together(config, path):
    """Whether a test file (its path from the root) matches `run_together`."""
    return any(fnmatch(path, pattern) for pattern in config.getini("run_together"))


def refuse_browser_tests_run_apart(config, items):
    """A test that opens Chromium in a file `run_together` does not match
    would run beside the others, with a second Chromium booting Python at
    the same time: say so rather than let it flake."""
    for item in items:
        path = item.nodeid.partition("::")[0]
        if BROWSER_FIXTURES & set(getattr(item, "fixturenames", ())) \
                and not runs_together(config, path):
            raise pytest.UsageError(f"{path} opens a browser page, but no pattern of "
                                    "run_together in pytest.ini matches it")


# With -n (pytest-xdist), a console session's blocks must run in one worker,
# in order. xdist's `--dist loadgroup` would do it, but with pytest 9 it no
# longer groups anything (pytest-xdist issue 1386), so this scheduler does:
# each session is one unit of work, and so are all the tests of the files
# the ini option `run_together` matches, together; every other test is a
# unit of its own. Units are sent in the order of collection.
@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") not in ("load", "loadgroup"):
        return None                     # another --dist, asked for by name
    from xdist.scheduler import LoadScopeScheduling

    session_of = {f"guide.md::line:{block.line},column:1": block.attributes["session"]
                  for block in guide.read_guide(GUIDE) if block.attributes.get("session")}

    class BySession(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            if nodeid in session_of:
                return "session " + session_of[nodeid]
            path = nodeid.partition("::")[0]
            return "run together" if runs_together(config, path) else nodeid

    config.option.loadscopereorder = False
    return BySession(config, log)


def exercise_marked(item):
    marker = item.get_closest_marker("exercise")
    return marker.args[0] if marker else None


# The verdicts are counted where the reports arrive: in this process without
# xdist, in the controller with it. A worker attaches what counting needs to
# each report, as a user property: xdist sends those to the controller.
@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    exercise = exercise_marked(item)
    step = {"exercise": exercise,
            "block": call.when == "call" and hasattr(item, "example"),
            "order": step_order(item),
            "title": steps.title(item) if exercise else None,
            "problem": problem_of(item, call, report) if exercise and report.failed else None}
    report.user_properties.append((HARNESS, step))
    edits = item.example.namespace.pop(UPDATES, None) if hasattr(item, "example") else None
    if edits:                            # a session ended in update mode, and changed lines
        report.user_properties.append((update.EDITS, edits))
    return report


def step_order(item):
    """Where a step comes: the guide's blocks in the guide's order, then the
    tests module by module, in the order the catalogue names its exercise's
    modules, each in the order they are written (whatever order they ran in,
    in whichever worker). The first failing step decides the verdict."""
    block = getattr(getattr(item, "example", None), "parsed", None)
    if isinstance(block, guide.Block):
        return [0, block.line]
    path, line, _ = item.location
    return [1, module_rank(item), path, line or 0, item.nodeid]


def module_rank(item):
    """Where the test's module comes among its exercise's (catalogue.py)."""
    exercise = BY_FILE.get(exercise_marked(item))
    modules = exercise.tests if exercise else ()
    module = from_root(item.path)
    return modules.index(module) if module in modules else len(modules)


class Counter:
    """Registered in the process that reports: it counts each step's report."""

    def __init__(self, results):
        self.results = results

    def pytest_runtest_logreport(self, report):
        for name, step in report.user_properties:
            if name != HARNESS:
                continue
            self.results["blocks"] += step["block"]   # a console block of guide.md ran
            if step["exercise"]:
                self.results["ran"].add(step["exercise"])
                if step["problem"]:
                    self.results["problems"][step["exercise"]].append(
                        (step["order"], step["problem"]))


def problem_of(item, call, report):
    """A failed step as results.py's problem: where, claim, kind, short output."""
    error = call.excinfo.value if call.excinfo else None
    if isinstance(error, SybilFailure):
        return transcript_problem(error.result)  # a sandbox.Failure (check_in_session's)
    docstring = item.function.__doc__ if isinstance(item, pytest.Function) else ""
    path, line, _ = item.location
    text = call.excinfo.exconly() if call.excinfo else report.longreprtext
    return test_problem(item.nodeid, path, (line or 0) + 1, docstring, text,
                        kind_of_test_failure(error))


def kind_of_test_failure(error):
    """A failed test's kind, from its exception: TIMEOUT when pytest-timeout
    stopped it; the kind of the harness's failure it carries, or was raised
    while handling (a learner file that would not import, a command that
    hung); ERROR for a file Python would not compile; FAIL otherwise."""
    if raised_by(error, pytest_timeout.timeout_sigalrm):
        return TIMEOUT
    failure = harness_failure(error)
    if failure is not None:
        return failure.kind
    return ERROR if isinstance(error, SyntaxError) else FAIL


def raised_by(error, function):
    """Whether the error was raised inside a call of function: whether a
    frame of its traceback runs the function's code."""
    entry = error.__traceback__ if error is not None else None
    while entry is not None:
        if entry.tb_frame.f_code is function.__code__:
            return True
        entry = entry.tb_next
    return False


def harness_failure(error):
    """The sandbox.Failure that the error carries (a TranscriptError's, or
    one given to pytest.fail), or that the error it was raised while
    handling carries; None if none does."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, TranscriptError):
            return error.failure
        if isinstance(error, pytest.fail.Exception) and isinstance(error.msg, Failure):
            return error.msg
        error = error.__cause__ or error.__context__
    return None


def pytest_terminal_summary(terminalreporter, config):
    results = config.stash[RESULTS]
    if not results["ran"] and not results["no_server"]:
        return                                  # no exercise was checked in this run
    folder = source_folder_of(config)
    exercises = exercise_results(folder, results)
    if config.getoption("--results-json"):
        write_results(config.getoption("--results-json"), folder, results["blocks"], exercises)
    terminalreporter.section("exercises")
    terminalreporter.write_line(
        f"{results['blocks']} console blocks of guide.md run against {folder}")
    for exercise, each in exercises.items():
        terminalreporter.write_line(f"{exercise}  {each['verdict']}")
        if each["verdict"] == NOT_GRADED:
            terminalreporter.write_line(f"    {each['why']}")
        if each["verdict"] in EXPLAINED:
            terminalreporter.write_line(f"    reread: {each['reread']}")
            first = each["problems"][0]
            terminalreporter.write_line(f"    failed first: {first['where']} ({first['kind']})")
            if each["decided_by"]:
                decider = each["problems"][each["decided_by"]]
                terminalreporter.write_line(f"    {each['verdict']} from: {decider['where']}")
            for problem in each["problems"]:
                for line in as_text(problem).split("\n"):
                    terminalreporter.write_line("    " + line)


def exercise_results(folder, results):
    """{exercise: {"verdict", "reread", "decided_by", "problems"}} in the
    course's order, the problems in the order their steps come."""
    text = GUIDE.read_text(encoding="utf-8")
    exercises = {}
    for exercise in FILES:
        if exercise in OPTIONAL and not (folder / exercise).is_file():
            continue                             # optional, and not handed in
        problems = [problem for _, problem in sorted(results["problems"][exercise],
                                                      key=lambda pair: pair[0])]
        decided_by = None
        if not (folder / exercise).is_file():
            verdict = MISSING
        elif exercise in LAB and results["no_server"]:
            verdict = NOT_GRADED
        elif problems:
            verdict, decided_by = verdict_of(problems)
        elif exercise in results["ran"]:
            verdict = PASS
        else:
            verdict = NOT_RUN
        explained = verdict in EXPLAINED
        exercises[exercise] = {
            "verdict": verdict,
            "reread": where_taught(text, exercise) if explained else None,
            "decided_by": decided_by,
            "problems": problems if explained else [],
        }
        if verdict == NOT_GRADED:
            exercises[exercise]["why"] = (f"The optional lab needs a PostgreSQL server, and"
                                          f" none can be started here: {results['no_server']}")
    return exercises
