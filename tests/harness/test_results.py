"""results.py: a failing step as a problem, its kind, its short output, and
which step decides an exercise's verdict."""

from tools.harness import compare
from tools.harness import results as results_module


def diff_problem(*printed, expected=("worker: job 1 done",), where="guide.md:10"):
    """A transcript's failure as sessions.py words it, made into a problem."""
    diff = compare.short_diff(list(expected), list(printed))
    return results_module.transcript_problem(
        f"{where}: `$ python3 ex04_durable_queue.py work` printed something else:\n{diff}")


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
