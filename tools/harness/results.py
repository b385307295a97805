"""An exercise's verdict, its problems, and the results file that grading reads.

The plugin gives each exercise one verdict, prints them in its summary and,
with --results-json PATH, writes them to a JSON file:

    {"folder": "/path/checked", "console_blocks": 51,
     "exercises": {"ex01_slow_signup.py": {
         "verdict": "FAIL",
         "reread": "1. The Waiter Who Cooks › Exercise 1: ...",
         "decided_by": 0,
         "problems": [{"where": "guide.md:LINE", "test": null,
                       "claim": "`$ python3 ex01_slow_signup.py` printed something else.",
                       "kind": "FAIL",
                       "output": "-ann@example.com: account created\\n+ann@...",
                       "command": "python3 ex01_slow_signup.py",
                       "silent": false}]},
                   ...}}

in the course's order. A problem is one step that failed: a transcript's
command (`where` is its guide.md:LINE, `test` is null, the claim names the
command) or a claims test (`where` is the test file's LINE, `test` its pytest
id, the claim the first sentence of its docstring). `kind` is what that step
did (FAIL, ERROR or TIMEOUT, below), and `output` its short diff or error,
at most OUTPUT_LINES lines. `command` is the transcript's command that
failed, as the guide shows it after its `$ ` (null for a test, and for a
block that failed before any command ran). `silent` is true for a step that
does not say why it failed (see `verdict_of`). The kind comes with the
failure as data, from where it happened: sessions.py's diff of the lines
(`kind_of_printed`) or its timeout, sandbox.py's import check, or the
test's exception (plugin.py), never from a message's words, so that
rewording a message cannot change a grade. The problems
are in the order the steps come:
the guide's transcripts in the guide's order (the path the learner walks),
then the tests, file by file, in the order they are written; so
problems[0] is the step that comes first. `decided_by` is the
index of the problem whose kind is the verdict (see `verdict_of`).
`reread`, `decided_by` and `problems` are filled under a FAIL, ERROR or
TIMEOUT only (None, None and [] otherwise). tools/grade.py reads the file
back with `read`. A failed step's problem also goes, as it ends, to the
learner's checker (steps.py), which uses its `command` to tick the
commands of a failing block that came before it and to find a classic
mistake's hint (tools/mistakes.py's `step_of`).
"""

import json
import re
from pathlib import Path

PASS = "PASS"
FAIL = "FAIL"                 # the program ran, and did or printed something else
ERROR = "ERROR"               # it would not compile, or crashed by itself
TIMEOUT = "TIMEOUT"           # it ran too long
MISSING = "MISSING"           # the file is not in the folder under test
NOT_RUN = "NOT RUN"           # no test of it ran (deselected)
NOT_GRADED = "NOT GRADED"     # the optional lab, where no PostgreSQL server can start
# The verdicts whose summary names the section to reread and what went wrong.
EXPLAINED = (FAIL, ERROR, TIMEOUT)
OUTPUT_LINES = 12             # of a problem's diff or error, at the most

TRACEBACK = "Traceback (most recent call last):"
# How Python reports a file it would not compile (with no traceback when it
# is the program itself); the second and third are kinds of the first.
COMPILE_ERRORS = ("SyntaxError: ", "IndentationError: ", "TabError: ")


def transcript_problem(failure):
    """A transcript's failure (a sandbox.Failure, as sessions.py reports it) as
    a problem. A step that printed nothing the guide does not show, and did
    not crash or hang, is silent (see verdict_of)."""
    silent = failure.kind == FAIL and not failure.unexpected
    return problem(failure.where or "guide.md", None, sentence(failure.claim), failure.output,
                   failure.kind, command=failure.command, silent=silent)


def test_problem(nodeid, path, line, docstring, error, kind):
    """A claims test's failure as a problem: where the test is, its claim, its error."""
    claim = first_sentence(docstring) or nodeid.rpartition("::")[2].removeprefix(
        "test_").replace("_", " ")
    return problem(f"{path}:{line}", nodeid, sentence(claim), error, kind)


def problem(where, test, claim, output, kind, command=None, silent=False):
    return {"where": where, "test": test, "claim": claim, "kind": kind,
            "output": shortened(output.strip("\n")), "command": command, "silent": silent}


def first_sentence(text):
    words = " ".join((text or "").split())
    match = re.match(r"(.+?[.!?])(\s|$)", words)
    return match.group(1) if match else words


def sentence(text):
    text = text.strip().rstrip(":").strip()
    return text if not text or text[-1] in ".!?" else text + "."


def kind_of_printed(lines):
    """The kind of a command that printed these lines the guide does not
    show (in the order printed): ERROR when it crashed by itself, FAIL when
    it ran and printed something else. It crashed when Python says it would
    not compile a file, or when the first of these lines starts a traceback
    (the guide's Break Its show tracebacks too, and a traceback after a wrong
    line is that wrong value's consequence), unless the crash was the
    transcript's own Ctrl-C arriving at another moment."""
    lines = [line for line in lines if line.strip()]
    if any(line.startswith(COMPILE_ERRORS) for line in lines):
        return ERROR
    crashed = bool(lines) and lines[0] == TRACEBACK
    return ERROR if crashed and "KeyboardInterrupt" not in lines else FAIL


def verdict_of(problems):
    """(verdict, index of the problem that decides it) for an exercise's
    problems in the order their steps come. The first failing step decides:
    ERROR only if it crashed by itself, TIMEOUT if it hung, FAIL if it printed
    or did something else, even when a later step then crashed. Silent steps,
    which do not say why they failed (they only printed less than the guide
    shows, as a file that defines nothing prints nothing, or their session
    had already failed), are passed over for the first that says more (when
    none does, the verdict is FAIL, from the first)."""
    for index, each in enumerate(problems):
        if not each["silent"]:
            return each["kind"], index
    return FAIL, 0


def shortened(text, most=OUTPUT_LINES):
    """At most `most` lines: a diff without its headers and with long runs of
    the guide's lines cut, a traceback cut to its first line, the last frame
    in a file that is not Python's own, and its error; a test's error without
    pytest's restatement of the assertion."""
    lines = text.splitlines()
    if lines and lines[0].startswith("AssertionError: "):     # a test's
        if not lines[0].startswith("AssertionError: assert "):
            restated = next((at for at, line in enumerate(lines) if line.startswith("assert ")),
                            len(lines))
            lines = lines[:restated]
        lines = [line for line in lines if line.strip() not in ("Use -v to get more diff", "")]
    lines = short_tracebacks(short_diff(lines))
    while lines and not lines[-1].strip():
        lines.pop()
    if len(lines) > most:
        lines = lines[:most - 1] + [f"[{len(lines) - most + 1} more lines]"]
    return "\n".join(lines)


def short_diff(lines, run=3):
    """A unified diff's lines without its ---, +++ and @@ lines, and each run
    of more than `run` lines only the guide shows cut to its first two and -[...]."""
    kept = []
    for line in lines:
        if line.startswith(("--- expected", "+++ actual", "@@ ")):
            continue
        kept.append(line)
        removed = 0
        while len(kept) > removed and kept[-1 - removed].startswith("-"):
            removed += 1
        if removed > run:
            del kept[-removed + 2:]
            kept.append("-[...]")
    return kept


def short_tracebacks(lines):
    kept = []
    index = 0
    while index < len(lines):
        line = lines[index]
        kept.append(line)
        index += 1
        start = line.find(TRACEBACK)
        if start < 0 or line[start:] != TRACEBACK:
            continue
        prefix = line[:start]                       # "+" in a diff, spaces in a test's error
        # Under a traceback the guide shows too (" Traceback"), the guide's
        # lines ("-...", "-ValueError: ...") come between the program's frames.
        framed = (prefix + "  ", "+  ") if prefix == " " else (prefix + "  ",)
        end = index
        while end < len(lines) and (lines[end].startswith(framed)
                                    or prefix == " " and lines[end].startswith("-")):
            end += 1
        frames = [at for at in range(index, end) if lines[at].startswith(framed)]
        files = [at for at in frames if lines[at][len(framed[-1]):].startswith("File ")]
        own = [at for at in files if "/lib/python" not in lines[at]] or files
        last = own[-1] if own else index
        after = next((at for at in files if at > last), end)
        shown = {at for at in frames if last <= at < after}
        for at in range(index, end):
            if at in shown or at not in frames:
                kept.append(lines[at])
            elif kept[-1][len(framed[-1]):] != "...":
                kept.append(lines[at][:len(framed[-1])] + "...")
        index = end
    return kept


def as_text(problem):
    """A problem as the summary prints it: where and the claim, then its output."""
    test = f" {problem['test'].rpartition('::')[2]}" if problem["test"] else ""
    return "\n".join([f"{problem['where']}{test}: {problem['claim']}"]
                     + problem["output"].splitlines())


def write(path, folder, console_blocks, exercises):
    """exercises: {exercise: {"verdict", "reread", "decided_by", "problems"}},
    in the course's order; a NOT_GRADED one also has "why"."""
    data = {"folder": str(folder), "console_blocks": console_blocks, "exercises": exercises}
    Path(path).write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n",
                          encoding="utf-8")


def read(path):
    """{exercise: {"verdict", "reread", "decided_by", "problems"}} from a
    results file; {} if the run wrote none."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    return data["exercises"]


def verdicts(path):
    """{exercise: verdict} from a results file; {} if the run wrote none."""
    return {exercise: each["verdict"] for exercise, each in read(path).items()}
