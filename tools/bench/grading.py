"""Checking time, a part of `make bench`: numbers, never pass or fail.

Each exercise of the catalogue (tools/harness/catalogue.py) is checked in
a copy of code/ with the learner's checker, as a learner checks it:

    python3 check.py FILE          (tools/check.py)

then the whole folder as `make check WORK=` grades one learner, with and
without the optional PostgreSQL lab's files:

    python -m pytest -q -p no:cacheprovider -n 4 --work=code

Each line gives the wall time and the CPU seconds of every process it
waited for (the checker, its test processes and the programs they ran),
and for a whole folder the busy CPU seconds of the whole machine too,
which count the lab's PostgreSQL server: pg_ctl starts it apart, so no
process above waits for it. Then the goal (10 s for each of ex01-ex09 and
herd.py, 20 s for each capstone file, 45 s for the whole folder) and the
checker's own estimate, check.ABOUT, which it prints as "about N s".

Run it alone with `python -m tools.bench grading`.
"""
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tools import check
from tools.harness.catalogue import CODE, EXERCISES, LAB, ROOT

EXERCISE_GOAL_SECONDS = 10
CAPSTONE_GOAL_SECONDS = 20
FOLDER_GOAL_SECONDS = 45
FOLDER_WORKERS = 4


def goal(exercise):
    return CAPSTONE_GOAL_SECONDS if exercise.startswith("capstone/") else EXERCISE_GOAL_SECONDS


def children_cpu_seconds():
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def machine_busy_seconds():
    """CPU seconds this machine has spent busy since it started (Linux's
    /proc/stat), counting processes no command waits for: the PostgreSQL
    lab's server, started apart by pg_ctl. None where there is no /proc."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq = map(int, fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def timed(command, folder):
    """(wall seconds, CPU seconds, the finished process) of a command."""
    cpu = children_cpu_seconds()
    started = time.perf_counter()
    result = subprocess.run(command, cwd=folder, capture_output=True, text=True)
    return time.perf_counter() - started, children_cpu_seconds() - cpu, result


def checked(exercise, folder):
    """What the checker said last, in a few words: its verdict and steps."""
    wall, cpu, result = timed([sys.executable, "-m", "tools.check", exercise], folder)
    verdicts = re.findall(r"^((?:PASS|FAIL|ERROR|TIMEOUT): .*)$", result.stdout, re.M)
    return wall, cpu, verdicts[-1] if verdicts else f"exit status {result.returncode}"


def summary(result):
    """pytest's count of passed and failed tests, without its timing."""
    counts = re.findall(r"^=*\s*(\d+ \w+.*?) in [\d.]+s", result.stdout, re.M)
    said = counts[-1] if counts else f"exit status {result.returncode}"
    return said if result.returncode == 0 else f"{said}: NOT ALL PASSED"


def main(folder_workers=FOLDER_WORKERS):
    print("checking code/ with check.py, one exercise at a time (wall s, CPU s of every"
          " process; goal; check.py's estimate):", flush=True)
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp) / "learner"
        shutil.copytree(CODE, folder, ignore=shutil.ignore_patterns("__pycache__"))
        for exercise in EXERCISES:
            wall, cpu, said = checked(exercise.file, folder)
            print(f"  {exercise.file:26} {wall:6.1f} s wall {cpu:6.1f} s CPU   (goal: at most "
                  f"{goal(exercise.file)} s; about {check.ABOUT.get(exercise.file, '?')} s)"
                  f"   {said}", flush=True)
        # Most learners skip the optional PostgreSQL lab: their folder too.
        for name in LAB:
            (folder / name).unlink()
        for label, work in [("the whole folder", CODE), ("without the lab", folder)]:
            whole_folder(f"{label}, -n {folder_workers}", work, folder_workers)


def whole_folder(label, work, workers):
    """One line: a folder graded as make check WORK= grades it."""
    before = machine_busy_seconds()
    wall, cpu, result = timed([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               f"--numprocesses={workers}", f"--work={work}"], ROOT)
    machine = ("" if before is None else
               f" ({machine_busy_seconds() - before:.1f} s CPU the whole machine)")
    print(f"  {label:26} {wall:6.1f} s wall {cpu:6.1f} s CPU   (goal: at most "
          f"{FOLDER_GOAL_SECONDS} s)   {summary(result)}{machine}", flush=True)
