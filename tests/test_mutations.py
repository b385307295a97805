"""Every classic mistake of tools/mistakes.py, graded as an instructor's
grading would grade it: a copy of code/ with the one mistake made, graded
for the mistake's file alone (`--exercise`). Its verdict must not be PASS,
its first problem (the step where checking stops) must be one of the
mistake's `stops_at`, and there the learner must get the mistake's hint.

Why its own file alone is enough: each exercise's tests run code/'s files
with only the learner's copy of that exercise put in (sandbox.copy_sources),
so a mistake in one file cannot change another's verdict.
test_grading.py's classic-mistakes test shows it on a whole class run.

Slow (a grading run per mistake), so marked `mutations`: `make check` leaves
them out and `make mutations` runs them all. A new mistake's `stops_at`:
leave it empty, and the failure here names the step it stopped at.
"""
import os
import shutil
import subprocess
import sys

import pytest

from tools.harness import results
from tools.harness.catalogue import CODE, ROOT
from tools.mistakes import MISTAKES, apply, hints_for, step_of


@pytest.mark.mutations
@pytest.mark.timeout(1200)           # a mistake that makes commands wait takes minutes
@pytest.mark.parametrize("mistake", MISTAKES, ids=[f"{m.file}: {m.what}" for m in MISTAKES])
def test_a_classic_mistake_fails_its_own_exercise(mistake, tmp_path, mistakes_caught):
    learner = tmp_path / "learner"
    shutil.copytree(CODE, learner, ignore=shutil.ignore_patterns("__pycache__"))
    apply(mistake, learner)
    verdicts = tmp_path / "results.json"
    # Commands that wait for something a mistake prevents give up after 10 s,
    # and a test that waits on and on is stopped after 2 minutes: TIMEOUT.
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--work={learner}",
         f"--exercise={mistake.file}", f"--results-json={verdicts}", "--timeout=120"],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "COMMAND_TIMEOUT": "10"})
    graded = results.read(verdicts).get(mistake.file, {})
    assert graded.get("verdict") in results.EXPLAINED, \
        f"{mistake.what}: graded {graded.get('verdict')}\n{run.stdout[-3000:]}"
    mistakes_caught.append(mistake)
    first = graded["problems"][0]
    assert step_of(first) in mistake.stops_at, \
        f"{mistake.what}: stopped at {step_of(first)!r}\n{results.as_text(first)}"
    assert mistake.hint in hints_for(mistake.file, step_of(first))
