"""Every classic mistake of tools/mistakes.py, checked as a learner checks
it: a copy of code/ with the one mistake made, checked with the learner's
checker (tools/check.py), which grades the mistake's file alone as `make
check WORK=` grades it and stops at its first failing step. The verdict
must not be PASS but the mistake's `verdict`, and the checker must give
the mistake's hint there (it does only at a step in the mistake's
`stops_at`, for a failure of that kind). The reference itself
passes every check, and gets no hint.

Why its own file alone is enough: each exercise's tests run code/'s files
with only the learner's copy of that exercise put in (sandbox.copy_sources),
so a mistake in one file cannot change another's verdict.
test_grading.py's classic-mistakes test shows it on a whole class run.

Slow (a check per mistake), so marked `mutations`: `make check` leaves
them out and `make mutations` runs them all. A new mistake's `stops_at`:
leave it empty, and the failure here shows the step it stopped at.
"""
import shutil

import pytest

from tools import check
from tools.harness import results
from tools.harness.catalogue import CODE, LAB
from tools.mistakes import MISTAKES, apply


def checked(folder, exercise):
    """(verdict, what the checker said) for one exercise of folder."""
    said = []
    verdict, _ = check.check(folder, exercise, said.append)
    return verdict, "\n".join(said)


@pytest.mark.mutations
@pytest.mark.timeout(600)
@pytest.mark.parametrize("mistake", MISTAKES, ids=[f"{m.file}: {m.what}" for m in MISTAKES])
def test_a_classic_mistake_fails_its_check_with_its_hint(mistake, tmp_path, monkeypatch,
                                                          mistakes_caught):
    learner = tmp_path / "learner"
    shutil.copytree(CODE, learner, ignore=shutil.ignore_patterns("__pycache__"))
    apply(mistake, learner)
    # Commands that wait for something a mistake prevents give up after 10 s.
    monkeypatch.setenv("COMMAND_TIMEOUT", "10")
    verdict, said = checked(learner, mistake.file)
    assert verdict in results.EXPLAINED, f"{mistake.what}: checked {verdict}\n{said}"
    mistakes_caught.append(mistake)
    assert verdict == mistake.verdict, f"{mistake.what}: checked {verdict}\n{said}"
    assert f"Hint: {mistake.hint}" in said.splitlines() \
        or f"  - {mistake.hint}" in said.splitlines(), f"{mistake.what}: no hint\n{said}"


@pytest.mark.mutations
@pytest.mark.parametrize("exercise", [file for file in check.course_order() if file not in LAB])
def test_the_reference_passes_its_check_without_a_hint(exercise, tmp_path):
    learner = tmp_path / "learner"
    shutil.copytree(CODE, learner, ignore=shutil.ignore_patterns("__pycache__"))
    verdict, said = checked(learner, exercise)
    assert verdict == results.PASS, said
    assert "Hint:" not in said
