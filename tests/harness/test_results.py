"""results.py: a failing step as a problem, its kind, its short output, and
which step decides an exercise's verdict."""

import subprocess
import sys
from types import SimpleNamespace

import pytest

from tests.harness.demo import guide_text
from tools.harness import catalogue, sandbox, sessions
from tools.harness import results as results_module


def diff_problem(*printed, expected=("worker: job 1 done",), where="guide.md:10"):
    """A transcript's failure as sessions.py makes it, made into a problem."""
    command = SimpleNamespace(text="python3 ex04_durable_queue.py work")
    failure = sessions.printed_other_lines(where, "`$ python3 ex04_durable_queue.py work` "
                                           "printed something else", command,
                                           list(expected), list(printed)).failure
    return results_module.transcript_problem(failure)


CRASH = ["Traceback (most recent call last):", '  File "ex04_durable_queue.py", line 85, in work',
         "    HANDLERS[kind](**json.loads(args))",
         "json.decoder.JSONDecodeError: Expecting property name enclosed in double quotes"]


def test_a_crash_the_guide_does_not_show_is_an_error():
    crashed = diff_problem(*CRASH)
    assert crashed["kind"] == "ERROR"
    assert crashed["claim"] == "`$ python3 ex04_durable_queue.py work` printed something else."
    assert crashed["output"].splitlines()[-1] == "+" + CRASH[-1]


def test_a_wrong_value_then_a_crash_is_a_fail():
    """The first line that differs decides: a wrong value, and the crash that follows it."""
    wrong = diff_problem("worker: claimed job 1, welcome_email {'address': 'ann@example.com'}",
                         *CRASH)
    assert wrong["kind"] == "FAIL"


def test_the_first_failing_step_decides_the_verdict():
    wrong, crashed = diff_problem("worker: job 2 done"), diff_problem(*CRASH)
    silent = diff_problem()                  # printed less than the guide shows, nothing else
    assert results_module.verdict_of([wrong, crashed]) == ("FAIL", 0)
    assert results_module.verdict_of([crashed, wrong]) == ("ERROR", 0)
    # a file that defines nothing prints nothing, then crashes: that crash says why
    assert results_module.verdict_of([silent, crashed, wrong]) == ("ERROR", 1)
    assert results_module.verdict_of([silent]) == ("FAIL", 0)


def test_a_problem_is_cut_to_twelve_lines_with_the_error_kept():
    frames = [f'  File "/usr/lib/python3.11/x.py", line {n}, in f' for n in range(8)]
    problem = diff_problem(*CRASH[:3], *frames, CRASH[3],
                           expected=[f"line {n}" for n in range(6)])
    lines = problem["output"].splitlines()
    assert len(lines) <= results_module.OUTPUT_LINES, lines
    assert lines == ["-line 0", "-line 1", "-[...]", "+" + CRASH[0], "+" + CRASH[1], "+" + CRASH[2],
                     "+  ...", "+" + CRASH[3]]


def test_a_traceback_the_guide_shows_too_keeps_both_errors():
    """Where the guide shows a traceback with `...` for its frames, the short
    diff keeps the guide's error, the program's last frame and its error."""
    problem = diff_problem(CRASH[0], '  File "<string>", line 1, in <module>', *CRASH[1:3],
                           "AttributeError: module 'ex04' has no attribute 'claim'",
                           expected=[CRASH[0], "...", "ValueError: no handler"])
    assert problem["output"].splitlines() == [
        " " + CRASH[0], "-...", "-ValueError: no handler", "+  ...", "+" + CRASH[1],
        "+" + CRASH[2], "+AttributeError: module 'ex04' has no attribute 'claim'"]
    assert problem["kind"] == "FAIL"        # the guide shows a crash here


# ---------------------------------------------------------------- kinds travel as data

# Programs that fail a transcript each in one way, run by the real harness.
# The last prints the words an older harness read its kinds from.
# (A wait for output fails at the line the guide shows last, 5; the others
# at the command's, 4.)
KINDS = {
    "FAIL": ("$ echo job 2\njob 1\n", {}),
    "ERROR, a syntax error": ("$ python3 broken.py\nok\n", {"broken.py": "def broken(:\n"}),
    "ERROR, a crash": ("$ python3 crash.py\nok\n", {"crash.py": "print(1 / 0)\n"}),
    "TIMEOUT, silent": ("$ sleep 30\ndone\n", {}),
    "TIMEOUT, still running": ("$ sleep 30\n", {}),
    "FAIL, in misleading words": ("$ python3 words.py\nok\n", {"words.py": (
        "print('still running; had not printed, after 3 s')\n"
        "print('SyntaxError, crashed when imported, already failed at guide.md:1')\n"
        "print('Traceback (most recent call last):')\n")}),
}


def real_failure(demo, monkeypatch, name):
    """The failure the harness reports for KINDS[name], and the command's text.
    Only a TIMEOUT waits out its time limit, shortened; the others are
    reported as soon as their commands have printed, however busy the machine."""
    if name.startswith("TIMEOUT"):
        monkeypatch.setattr(sandbox, "SYNC_TIMEOUT", 1)
        monkeypatch.setattr(sandbox, "EXIT_TIMEOUT", 1)
    body, files = KINDS[name]
    for file_name, source in files.items():
        (demo / file_name).write_text(source)
    text, [line] = guide_text(("console", body))
    return sessions.check_text(text, demo)[line], body.splitlines()[0][2:]


@pytest.mark.parametrize("name", KINDS)
def test_each_kind_comes_from_the_harness_as_data(demo, monkeypatch, name):
    """The kind, the command and where travel as attributes of the failure,
    and the problem takes them from there."""
    failure, command = real_failure(demo, monkeypatch, name)
    kind = name.partition(",")[0]
    where = "guide.md:5" if name == "TIMEOUT, silent" else "guide.md:4"
    assert (failure.kind, failure.command, failure.where) == (kind, command, where)
    problem = results_module.transcript_problem(failure)
    assert (problem["kind"], problem["command"], problem["where"]) == (kind, command, where)


@pytest.mark.parametrize("name", KINDS)
def test_rewording_a_failure_cannot_change_its_kind(demo, monkeypatch, name):
    """The same failure said in other words (here in French) is the same
    problem but for its claim: a message's wording never decides a grade."""
    failure, _ = real_failure(demo, monkeypatch, name)
    reworded = sandbox.Failure(failure.where, "la commande a fait autre chose",
                               failure.output, kind=failure.kind, command=failure.command,
                               unexpected=failure.unexpected)
    said, resaid = (results_module.transcript_problem(each) for each in (failure, reworded))
    assert resaid["claim"] == "la commande a fait autre chose."
    assert {**said, "claim": None} == {**resaid, "claim": None}


def test_a_block_after_its_session_failed_is_silent_whatever_it_says(demo):
    """A later block of a session that had already failed says where it had,
    as data, and is passed over for the step that said why, however the
    first is worded."""
    text, lines = guide_text(('{.console session="s"}', "$ echo job 2\njob 1\n"),
                             ('{.console session="s"}', "$ echo job 3\njob 3\n"))
    first, later = sessions.check_text(text, demo).values()
    assert later.failed_earlier == f"guide.md:{lines[0]}" and later.command is None
    reworded = sandbox.Failure(later.where, "the wrong line printed was: +job 2",
                               failed_earlier=later.failed_earlier)
    for each in (later, reworded):
        problems = [results_module.transcript_problem(each),
                    results_module.transcript_problem(first)]
        assert problems[0]["silent"] and not problems[1]["silent"]
        assert results_module.verdict_of(problems) == ("FAIL", 1)


TEST_KINDS = '''
import time
import pytest
from tests.helpers import import_learner_file
from tools.harness import sandbox

@pytest.mark.exercise("ex01_slow_signup.py")
def test_hangs():
    time.sleep(60)

@pytest.mark.exercise("ex02_jobs.py")
def test_says_timeout_and_more():
    pytest.fail("Timeout (>4.0s) from pytest-timeout. still running, SyntaxError, "
                "crashed when imported")

@pytest.mark.exercise("ex03_memory_queue.py")
def test_imports_a_syntax_error(tmp_path):
    (tmp_path / "broken.py").write_text("def broken(:\\n")
    import_learner_file(tmp_path / "broken.py", "broken")

@pytest.mark.exercise("ex04_durable_queue.py")
def test_imports_a_file_that_hangs(tmp_path, monkeypatch):
    monkeypatch.setattr(sandbox, "COMMAND_TIMEOUT", 1)
    (tmp_path / "stuck.py").write_text("import time\\ntime.sleep(60)\\n")
    import_learner_file(tmp_path / "stuck.py", "stuck")

@pytest.mark.exercise("ex05_two_workers.py")
def test_fails_because_a_command_hung(tmp_path):
    try:
        sandbox.run("sleep 60", tmp_path, timeout=1)
    except sandbox.TranscriptError as error:
        pytest.fail(f"it did not end: {error}")
'''


def test_a_tests_kind_comes_from_its_exception(tmp_path):
    """Graded tests, each failing in one way: pytest-timeout's alarm is a
    TIMEOUT, a test whose message only says the same is a FAIL; a learner
    file that will not compile is an ERROR, one that hangs on import a
    TIMEOUT, and so is a test that failed because a command it ran hung."""
    (tmp_path / "test_kinds.py").write_text(TEST_KINDS)
    results_file = tmp_path / "results.json"
    subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                    "-c", str(catalogue.ROOT / "pytest.ini"), "--rootdir", str(catalogue.ROOT),
                    "--timeout=4", f"--results-json={results_file}", str(tmp_path)],
                   cwd=catalogue.ROOT, capture_output=True, text=True)
    graded = results_module.read(results_file)
    kinds = {exercise: [problem["kind"] for problem in each["problems"]]
             for exercise, each in graded.items() if each["problems"]}
    assert kinds == {"ex01_slow_signup.py": ["TIMEOUT"], "ex02_jobs.py": ["FAIL"],
                     "ex03_memory_queue.py": ["ERROR"], "ex04_durable_queue.py": ["TIMEOUT"],
                     "ex05_two_workers.py": ["TIMEOUT"]}, graded
