"""An exercise's verdict, and the results file that grading reads.

The plugin gives each exercise one verdict, prints them in its summary and,
with --results-json PATH, writes them to a JSON file:

    {"folder": "/path/checked", "console_blocks": 51,
     "exercises": {"ex01_slow_signup.py": {"verdict": "FAIL",
                                           "reread": "1. The Waiter Who Cooks › Exercise 1: ...",
                                           "problems": ["guide.md:LINE: `$ python3 ...` ..."]},
                   ...}}

in the course's order. `reread` and `problems` are what the summary prints
under a FAIL, ERROR or TIMEOUT (None and [] otherwise). tools/grade.py reads
the file back with `verdicts`.
"""

import json
import re
from pathlib import Path

PASS = "PASS"
FAIL = "FAIL"                 # the program ran, and did or printed something else
ERROR = "ERROR"               # it would not compile, or crashed
TIMEOUT = "TIMEOUT"           # it ran too long
MISSING = "MISSING"           # the file is not in the folder under test
NOT_RUN = "NOT RUN"           # no test of it ran (deselected)
# The verdicts whose summary names the section to reread and what went wrong.
EXPLAINED = (FAIL, ERROR, TIMEOUT)


def failure_kind(problems):
    """TIMEOUT when a program ran too long; ERROR when it would not compile,
    or crashed where the guide shows no crash (a traceback on a diff line of
    its own: the guide's Break Its show tracebacks too), unless the crash was
    the transcript's own Ctrl-C arriving at another moment; otherwise FAIL, a
    program that ran and did or printed something else."""
    text = "\n".join(problems)
    if re.search(r"still running|had not printed, after|Failed: Timeout \(>", text):
        return TIMEOUT
    if re.search(r"SyntaxError|IndentationError|crashed when imported", text):
        return ERROR
    crashed = re.search(r"^\s*\+Traceback \(most recent call last\)", text, re.M)
    interrupted = re.search(r"^\s*\+KeyboardInterrupt$", text, re.M)
    return ERROR if crashed and not interrupted else FAIL


def write(path, folder, console_blocks, exercises):
    """exercises: {exercise: {"verdict", "reread", "problems"}}, in the course's order."""
    data = {"folder": str(folder), "console_blocks": console_blocks, "exercises": exercises}
    Path(path).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n",
                          encoding="utf-8")


def verdicts(path):
    """{exercise: verdict} from a results file; {} if the run wrote none."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    return {exercise: each["verdict"] for exercise, each in data["exercises"].items()}
