"""An exercise's steps, told as they end: what tools/check.py reads.

With --steps-to FOLDER the run writes two files there:

    plan.json    the steps it will run, in their order (results.py's: the
                 guide's transcripts, then the tests), once they are known:
                 [{"id": pytest's node id, "exercise": "ex05_two_workers.py",
                   "title": ["$ python3 ex05_two_workers.py enqueue", ...]}, ...]
    steps.jsonl  one line per step as it ends, in the order they end:
                 {"id", "outcome": "passed", "failed" or "skipped",
                  "problem": results.py's problem for a failed step, else null}

A transcript's title is its commands, a test's the first sentence of its
docstring. The plan is written by the process that collects (an xdist
worker, the first one), the steps by the one that reports.
"""
import json
import os
from pathlib import Path

import pytest

from tools import guide

from .results import first_sentence, sentence

PLAN = "plan.json"
STEPS = "steps.jsonl"


def title(item):
    """What a step does, in the words the learner knows: a transcript's
    commands as the guide shows them, or a test's claim."""
    block = getattr(getattr(item, "example", None), "parsed", None)
    if isinstance(block, guide.Block):
        return [line for line in block.source.splitlines() if line.startswith("$ ")]
    docstring = item.function.__doc__ if isinstance(item, pytest.Function) else ""
    claim = first_sentence(docstring) or item.name.removeprefix("test_").replace("_", " ")
    return [sentence(claim)]


def write_plan(folder, items, order, exercise):
    """The steps in their order, put in place at once (a reader never sees half)."""
    plan = [{"id": item.nodeid, "exercise": exercise(item), "title": title(item)}
            for item in sorted(items, key=order) if exercise(item)]
    temp = Path(folder) / f".{PLAN}.{os.getpid()}"
    temp.write_text(json.dumps(plan, ensure_ascii=False), encoding="utf-8")
    os.replace(temp, Path(folder) / PLAN)


class Stream:
    """Registered in the process that reports: a line per step as it ends."""

    def __init__(self, folder, key):
        self.path = Path(folder) / STEPS
        self.key = key               # of the user property that carries a step
        self.ended = {}              # node id: (outcome, problem) so far

    def pytest_runtest_logreport(self, report):
        step = dict(report.user_properties).get(self.key)
        if not step or not step["exercise"]:
            return
        outcome, problem = self.ended.get(report.nodeid, ("passed", None))
        if report.failed and problem is None:
            outcome, problem = "failed", step["problem"]
        elif report.skipped:
            outcome = "skipped"
        self.ended[report.nodeid] = (outcome, problem)
        if report.when == "teardown":
            line = {"id": report.nodeid, "outcome": outcome, "problem": problem}
            with open(self.path, "a", encoding="utf-8") as out:
                out.write(json.dumps(line, ensure_ascii=False) + "\n")
