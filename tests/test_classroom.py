"""classroom/: the template of a learner's repository for GitHub Classroom.
Its workflow checks every required exercise with check.py, as a learner
does, one step each (three of them run here), and it is a workflow GitHub
accepts (actionlint)."""
import json
import re
import shlex
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tools import check
from tools.harness.catalogue import CODE, OPTIONAL, ROOT

WORKFLOW = ROOT / "classroom" / "template" / ".github" / "workflows" / "classroom.yml"


def commands():
    """The workflow's `command:` and `run:` lines, in order."""
    return re.findall(r"^\s+(?:command|run): (.+)$", WORKFLOW.read_text(encoding="utf-8"), re.M)


def test_the_workflow_checks_every_required_exercise_in_the_courses_order():
    """One step for each exercise the course requires, in the course's order,
    each a check of it that writes its JSON; and a reporter that counts
    every one of those steps."""
    text = WORKFLOW.read_text(encoding="utf-8")
    checked = [shlex.split(command)[2] for command in commands() if "--json" in command]
    required = [exercise for exercise in check.course_order() if exercise not in OPTIONAL]
    assert [check.exercise_named(name) for name in checked] == required
    ids = re.findall(r"^\s+id: (\S+)$", text, re.M)
    (runners,) = re.findall(r"^\s+runners: (\S+)$", text, re.M)
    assert runners.split(",") == ids and len(ids) == len(required)
    for step in ids:
        assert f'{step.upper()}_RESULTS: "${{{{ steps.{step}.outputs.result }}}}"' in text


def test_actionlint_finds_nothing_wrong_with_the_workflow():
    linted = subprocess.run([str(Path(sys.executable).parent / "actionlint"), str(WORKFLOW)],
                            capture_output=True, text=True)
    assert linted.returncode == 0, linted.stdout + linted.stderr


# Every check step is one command with its exercise's name and a results
# file of its own (the names and their order are the test above's). Three
# run here: the first, a copy-and-change compared with the learner's own
# previous file, and the last; make check runs every exercise's tests on
# code/ itself, as check.py runs them.
CHECK = re.compile(r"python3 \.jobs-course/check\.py (\w+) --json \.results/(\w+)\.json")
RUN_HERE = ["ex01_slow_signup", "ex05_two_workers", "ex09_charge_worker"]


def test_the_workflows_commands_pass_on_the_courses_own_exercises(tmp_path):
    """Run as the workflow runs them, in a learner's repository holding the
    course's exercises with the course checked out beside them in
    .jobs-course: each exits 0, writes its verdict, PASS, and prints nothing
    on stderr (GitHub Classroom's command grader fails a test that does)."""
    setup, *checks = commands()
    shapes = [CHECK.fullmatch(command) for command in checks]
    assert all(shapes), checks
    assert len({shape[2] for shape in shapes}) == len(checks), "two steps share a file"
    chosen = [command for command, shape in zip(checks, shapes) if shape[1] in RUN_HERE]
    assert len(chosen) == len(RUN_HERE)
    learner = tmp_path / "learner"
    required = [exercise for exercise in check.course_order() if exercise not in OPTIONAL]
    for name in [*required, "ex09_practice_given.py", "capstone/world_given.py"]:
        (learner / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(CODE / name, learner / name)
    (learner / ".jobs-course").symlink_to(ROOT)

    def run(command):
        return command, subprocess.run(command, shell=True, cwd=learner, capture_output=True,
                                       text=True, timeout=600)
    assert run(setup)[1].returncode == 0
    with ThreadPoolExecutor(2) as pool:
        for command, result in pool.map(run, chosen):
            assert result.returncode == 0 and result.stderr == "", \
                f"{command}\n{result.stdout}{result.stderr}"
            written = json.loads((learner / shlex.split(command)[-1]).read_text())
            assert written["verdict"] == "PASS" and written["passed"], written
