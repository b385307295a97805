"""Checking time, a part of `make bench`: numbers, never pass or fail.

Each exercise of the catalogue (tools/harness/catalogue.py) is checked
against code/ on its own, as a learner's checker or `make grade
EXERCISE=file` checks it:

    python -m pytest -q -p no:cacheprovider -n N --work=code --exercise=FILE

then the whole folder (--work=code, no --exercise), as `make check WORK=`
grades one learner. Each line gives the wall time and the CPU seconds of
pytest and of every process it waited for (its test processes and the
programs they ran), beside the goal: 10 s for each of ex01-ex09 and
herd.py, 20 s for each capstone file, 45 s for the whole folder.

Run it alone with `python -m tools.bench grading` (--workers N to choose N).
"""
import re
import resource
import subprocess
import sys
import time

from tools.harness.catalogue import EXERCISES, ROOT

EXERCISE_GOAL_SECONDS = 10
CAPSTONE_GOAL_SECONDS = 20
FOLDER_GOAL_SECONDS = 45
# Test processes per check. Most tests wait for the programs they run, so a
# few more processes than the 2 cores help; each costs about a second of CPU
# to start.
EXERCISE_WORKERS = 2
FOLDER_WORKERS = 4


def goal(exercise):
    return CAPSTONE_GOAL_SECONDS if exercise.startswith("capstone/") else EXERCISE_GOAL_SECONDS


def children_cpu_seconds():
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed_check(workers, exercise=None):
    """(wall seconds, CPU seconds, pytest's last line) of one check of code/."""
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               f"--numprocesses={workers}", "--work=code"]
    if exercise:
        command.append(f"--exercise={exercise}")
    cpu = children_cpu_seconds()
    started = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - started
    return wall, children_cpu_seconds() - cpu, summary(result)


def summary(result):
    """pytest's count of passed and failed tests, without its timing."""
    counts = re.findall(r"^=*\s*(\d+ \w+.*?) in [\d.]+s", result.stdout, re.M)
    said = counts[-1] if counts else f"exit status {result.returncode}"
    return said if result.returncode == 0 else f"{said}: NOT ALL PASSED"


def main(workers=EXERCISE_WORKERS, folder_workers=FOLDER_WORKERS):
    print(f"checking code/, one exercise at a time, -n {workers}"
          " (wall s, CPU s of every process, goal):", flush=True)
    for exercise in EXERCISES:
        wall, cpu, said = timed_check(workers, exercise.file)
        print(f"  {exercise.file:26} {wall:6.1f} s wall {cpu:6.1f} s CPU"
              f"   (goal: at most {goal(exercise.file)} s)   {said}", flush=True)
    wall, cpu, said = timed_check(folder_workers)
    print(f"  {'the whole folder, -n ' + str(folder_workers):26} {wall:6.1f} s wall"
          f" {cpu:6.1f} s CPU   (goal: at most {FOLDER_GOAL_SECONDS} s)   {said}")
