"""plugin.py: grading a learner's WORK folder with `make check WORK=`, run
as a subprocess: the verdict of each exercise, in the summary and in the
results file that grading reads; and run_together, the file patterns whose
tests run one after another in one xdist worker, which every test that
opens a browser page must match."""

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from tools import guide
from tools.harness import catalogue, sandbox
from tools.harness import results as results_module
from tools.harness.plugin import refuse_browser_tests_run_apart, runs_together

CODE = catalogue.CODE


def grade(work, *tests):
    """make check WORK=... as a subprocess. With --work, pytest collects only
    the tests that use the learner's files, never this one: no recursion.
    The results file that grading reads says what the summary prints."""
    with tempfile.TemporaryDirectory() as folder:
        results_file = Path(folder) / "results.json"
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *tests, f"--work={work}",
             f"--results-json={results_file}"],
            cwd=catalogue.ROOT, capture_output=True, text=True)
        results = json.loads(results_file.read_text(encoding="utf-8"))
    verdicts = re.findall(r"^((?:ex\d\d_\w+|herd|capstone/\w+)\.py)  (NOT RUN|NOT GRADED|\w+)$",
                          result.stdout,
                          re.MULTILINE)
    assert [(name, each["verdict"]) for name, each in results["exercises"].items()] == \
        verdicts, result.stdout
    assert results["folder"] == str(Path(work).absolute())
    return result.returncode, verdicts, result.stdout, results


EXERCISES = catalogue.FILES
# The exercises every learner is graded on: all but the optional files.
REQUIRED = [name for name in EXERCISES if name not in catalogue.OPTIONAL]


def test_an_empty_work_folder_fails_as_missing(tmp_path):
    """Every exercise is MISSING, and the optional lab is not named at all."""
    status, verdicts, output, _ = grade(tmp_path)
    assert status != 0
    assert verdicts == [(name, "MISSING") for name in REQUIRED], output


def test_a_copy_of_the_reference_passes(tmp_path):
    """Every transcript, graded against a copy of code/. (The claims tests run
    against code/ in the main suite; grading them again would double its time.)"""
    shutil.copytree(CODE, tmp_path / "mine")
    status, verdicts, output, results = grade(tmp_path / "mine", "guide.md")
    assert status == 0, output
    # shop and tinyq_pg have no transcript of their own: their tests are the
    # claims tests, which this run leaves out. (tinyq.py's is Chapter 9's
    # unique_key drill; the lab's chaos monkey is chaos_pg.py's.)
    no_transcript = ("capstone/shop.py", "capstone/tinyq_pg.py")
    assert verdicts == [(name, "NOT RUN" if name in no_transcript else "PASS")
                        for name in EXERCISES], output
    assert results["console_blocks"] == len([b for b in guide.read_guide(catalogue.GUIDE)
                                             if "console" in b.classes])


def test_the_optional_lab_is_graded_once_handed_in(tmp_path):
    """A learner who typed races_pg.py, and no other file: it is graded, on
    the harness's own PostgreSQL server, and tinyq_pg.py is not named."""
    (tmp_path / "mine" / "capstone").mkdir(parents=True)
    shutil.copy(CODE / "capstone" / "races_pg.py", tmp_path / "mine" / "capstone")
    status, verdicts, output, _ = grade(tmp_path / "mine", "guide.md",
                                        "tests/capstone/test_races_pg.py")
    assert verdicts == [(name, "MISSING") for name in REQUIRED] + [
        ("capstone/races_pg.py", "PASS")], output


def test_chapter_6s_optional_herd_is_graded_once_handed_in(tmp_path):
    """herd.py, and no other file: it is graded, in its place in the course."""
    (tmp_path / "mine").mkdir()
    shutil.copy(CODE / "herd.py", tmp_path / "mine")
    status, verdicts, output, _ = grade(tmp_path / "mine", "guide.md")
    assert verdicts == [(name, "PASS" if name == "herd.py" else "MISSING")
                        for name in EXERCISES if name in REQUIRED or name == "herd.py"], output


def test_the_lab_is_not_graded_where_no_server_can_start(tmp_path, monkeypatch):
    """races_pg.py handed in, where PostgreSQL cannot start: NOT GRADED, with
    the reason, and none of its tests or transcripts run."""
    (tmp_path / "mine" / "capstone").mkdir(parents=True)
    shutil.copy(CODE / "capstone" / "races_pg.py", tmp_path / "mine" / "capstone")
    monkeypatch.setenv("POSTGRESQL_BIN", str(tmp_path / "nowhere"))
    status, verdicts, output, results = grade(tmp_path / "mine", "guide.md",
                                              "tests/capstone/test_races_pg.py", "-v")
    assert verdicts == [(name, "MISSING") for name in REQUIRED] + [
        ("capstone/races_pg.py", "NOT GRADED")], output
    lab_blocks = [f"guide.md::line:{b.line},column:1" for b in guide.read_guide(catalogue.GUIDE)
                  if "console" in b.classes and catalogue.exercise_of(b) in catalogue.LAB]
    ran = output.partition("= exercises =")[0]
    assert lab_blocks and not any(name in ran for name in ["test_races_pg.py", *lab_blocks])
    why = ("The optional lab needs a PostgreSQL server, and none can be started here:"
           f" POSTGRESQL_BIN is {tmp_path / 'nowhere'}, which has no initdb")
    assert f"capstone/races_pg.py  NOT GRADED\n    {why}\n" in output
    assert results["exercises"]["capstone/races_pg.py"]["why"] == why


def test_a_changed_exercise_fails_with_a_diff(tmp_path):
    """Only ex01 (one word changed) and ex02 are handed in: the rest is missing."""
    (tmp_path / "mine").mkdir()
    for name in ("ex01_slow_signup.py", "ex02_jobs.py"):
        shutil.copy(CODE / name, tmp_path / "mine")
    sandbox.apply_edit(tmp_path / "mine", "ex01_slow_signup.py", "account created", "account made")
    status, verdicts, output, results = grade(tmp_path / "mine")
    assert status != 0
    assert verdicts == [("ex01_slow_signup.py", "FAIL"), ("ex02_jobs.py", "PASS")] + [
        (name, "MISSING") for name in REQUIRED[2:]], output
    assert re.search(r"^    guide.md:\d+: `\$ python3 ex01_slow_signup.py` printed", output, re.M)
    assert "    +ann@example.com: account made" in output
    assert "    reread: 1. The Waiter Who Cooks › Exercise 1: A Signup That Makes You Wait" \
        in output
    # the results file holds what the summary prints under a FAIL, step by step
    ex01 = results["exercises"]["ex01_slow_signup.py"]
    assert ex01["reread"] == "1. The Waiter Who Cooks › Exercise 1: A Signup That Makes You Wait"
    first = ex01["problems"][0]               # the guide's transcripts come first
    assert re.fullmatch(r"guide.md:\d+", first["where"]) and first["test"] is None, first
    assert first["claim"] == "`$ python3 ex01_slow_signup.py` printed something else.", first
    assert first["kind"] == "FAIL" and ex01["decided_by"] == 0
    assert "+ann@example.com: account made" in first["output"].splitlines(), first
    assert all(len(problem["output"].splitlines()) <= results_module.OUTPUT_LINES
               for problem in ex01["problems"])
    assert results["exercises"]["ex02_jobs.py"] == {"verdict": "PASS", "reread": None,
                                                    "decided_by": None, "problems": []}


# ---- run_together

PATTERNS = ["tests/test_pages.py", "tools/sims/test_page*.py", "tools/sims/*/test_page.py"]
CONFIG = SimpleNamespace(getini=lambda name: PATTERNS)


def an_item(nodeid, *fixtures):
    return SimpleNamespace(nodeid=nodeid, fixturenames=list(fixtures))


@pytest.mark.parametrize("path", ["tests/test_pages.py", "tools/sims/test_pages.py",
                                  "tools/sims/test_page_runtime.py",
                                  "tools/sims/queue_depth/test_page.py"])
def test_the_browser_test_files_and_a_new_simulations_run_together(path):
    assert runs_together(CONFIG, path)


@pytest.mark.parametrize("path", ["tests/test_build.py", "tools/sims/race/test_engine.py"])
def test_other_files_run_apart(path):
    assert not runs_together(CONFIG, path)


def test_a_page_opened_outside_the_patterns_is_refused_by_name():
    inside = an_item("tools/sims/queue_depth/test_page.py::test_tasks", "watched", "page")
    apart = an_item("tests/test_new.py::test_x", "site_url")
    refuse_browser_tests_run_apart(CONFIG, [inside, apart])          # no page: fine
    stray = an_item("tests/test_new.py::test_y", "browser")
    with pytest.raises(pytest.UsageError, match="tests/test_new.py opens a browser page"):
        refuse_browser_tests_run_apart(CONFIG, [inside, stray])
