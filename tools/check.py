"""The learner's checker: one exercise, step by step, stopping at the first
step that fails. check.py at the repository's root starts it, from the
folder where the learner types their exercises:

    python3 ~/jobs-course/check.py [FOLDER] [EXERCISE] [--watch]

It checks EXERCISE (ex05, 5, tinyq, capstone/tinyq.py: any name that is
clear), or else the exercise file changed last. It grades it as `make check
WORK=FOLDER` does: in a copy of the course with the learner's file put in
(their folder is never written to, but for the progress file), with
grading's limits on time, CPU and memory. It prints each step as it passes
(a transcript's commands, a test's claim) in the order results.py tells
them, and at the first that fails, what went wrong, the section to reread
and, when the failure is a classic mistake's, a hint (tools/mistakes.py).

A syntax error is found before pytest starts, with compile(). Otherwise
the check is one pytest process (with its xdist workers, WORKERS),
`--exercise FILE --steps-to TEMP`, that grade.start_grading starts with grading's limits and tag, and grade.stop
ends: at the first failing step, at CHECK_SECONDS, or on Ctrl-C. That
process writes the plan of the exercise's steps and each step as it ends
(tools/harness/steps.py); the checker prints the steps in the plan's order
as they arrive and stops at the first that failed, so its ✘ step is the
problem that grading tells first. Before a check it says how long the check
takes, "about N s": the learner's own last time for that exercise, from the
progress file, or else ABOUT's (10 s for an exercise it lacks).

The progress file, course-progress.txt in the learner's folder, remembers
each exercise that passed, with its file's digest: a file edited since then
counts as not checked. Exit status: 0 passed, 1 did not, 2 a usage
mistake, 130 interrupted.
"""
import argparse
import ast
import hashlib
import importlib.util
import json
import operator
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tools import grade, mistakes
from tools.harness import results, steps
from tools.harness.catalogue import (CODE, FILES, GUIDE, LAB, OPTIONAL, ROOT, section_ending,
                                     where_taught)

PROGRESS = "course-progress.txt"
CHECK_SECONDS = 300          # one exercise's check at the most; then TIMEOUT
POLL = 0.1                   # seconds between looks at what the run wrote
# Test processes side by side: 2, or 3 for the exercises with one long test
# that waits more than it computes (each costs about 0.7 CPU-s to start;
# measured with make bench's grading section).
WORKERS = {"ex03_memory_queue.py": 3, "ex05_two_workers.py": 3}
# About how long each exercise's check takes on a 2-core machine: make
# bench prints what it measures beside these (an exercise without one is
# "about 10 s"). Once a learner's exercise has passed, their own last time
# is used instead.
ABOUT = {"ex01_slow_signup.py": 2, "ex02_jobs.py": 2, "ex03_memory_queue.py": 5,
         "ex04_durable_queue.py": 4, "ex05_two_workers.py": 8, "ex06_leases.py": 8,
         "ex07_retries.py": 5, "ex08_idempotency.py": 5, "ex09_charge_worker.py": 7,
         "ex09_webhooks.py": 2, "herd.py": 1, "capstone/tinyq.py": 8, "capstone/shop.py": 12,
         "capstone/chaos.py": 12, "capstone/races_pg.py": 3, "capstone/tinyq_pg.py": 50,
         "capstone/chaos_pg.py": 4}
PASSED, FAILED, SKIPPED = "✔", "✘", "–"
# Where a transcript's copy of the learner's folder is (sessions.py): a
# traceback's path into it is shown as the learner's own file's name.
COPY_PATH = re.compile(r'[^\s"]*/transcript-[^/\s"]+/work/')


class Usage(Exception):
    """A mistake in what the learner asked for: said plainly, exit status 2."""


# ---------------------------------------------------------------- what to check

def learner_folder(named):
    """The folder named, or the current one (its parent, from inside the
    capstone/ folder of exercises)."""
    folder = Path(named or ".").resolve()
    if not folder.is_dir():
        raise Usage(f"{named}: no such folder")
    if not named and folder.name == "capstone" and typed(folder.parent):
        return folder.parent
    return folder


def typed(folder):
    """The exercise files the folder holds."""
    return [name for name in FILES if (folder / name).is_file()]


def exercise_named(name):
    """The exercise file a learner's name for it means: ex05, 5, tinyq,
    capstone/tinyq.py, ex05_two_workers.py."""
    wanted = name.lower().removesuffix(".py")
    if wanted.isdigit():
        wanted = f"ex{int(wanted):02}"
    matches = [file for file in FILES if wanted in (file.removesuffix(".py"), Path(file).stem)] \
        or [file for file in FILES if Path(file).stem.startswith(wanted + "_")]
    if len(matches) > 1:            # "ex09" is Exercise 9; its optional file goes by its name
        matches = [file for file in matches if file not in OPTIONAL] or matches
    if len(matches) != 1:
        raise Usage(f"no exercise is called {name!r}; the exercises are "
                    f"{', '.join(Path(file).stem for file in course_order())}")
    return matches[0]


def exercise_to_check(folder, name):
    """The exercise named, which the folder must hold, or the one changed last."""
    if name:
        exercise = exercise_named(name)
        if not (folder / exercise).is_file():
            raise Usage(f"{folder} has no {exercise}: you type it in {taught_in(exercise)}")
        return exercise
    files = typed(folder)
    if not files:
        first = course_order()[0]
        raise Usage(f"{folder} holds no exercise file yet; the first is {first}, "
                    f"in {taught_in(first)}")
    return max(files, key=lambda file: (folder / file).stat().st_mtime_ns)


def course_order():
    """The exercise files in the order the guide teaches them (Exercise 9
    comes after the capstone): where each first appears as a listing."""
    text = GUIDE.read_text(encoding="utf-8")
    return sorted(FILES, key=lambda file: text.find(f'include="code/{file}"'))


def taught_in(exercise):
    return where_taught(GUIDE.read_text(encoding="utf-8"), exercise)


def section_at(line):
    """The chapter and section of guide.md that its line is in."""
    return section_ending("".join(GUIDE.read_text(encoding="utf-8").splitlines(True)[:line]))


def syntax_error(folder, exercise):
    """FILE:LINE:COLUMN and Python's complaint, if the file will not compile."""
    path = folder / exercise
    try:
        compile(path.read_bytes(), str(path), "exec")
    except SyntaxError as error:
        where = f"{exercise}:{error.lineno}" + (f":{error.offset}" if error.offset else "")
        shown = [f"    {error.text.rstrip()}"] if error.text else []
        if error.text and error.offset:
            shown.append("    " + " " * (error.offset - 1) + "^")
        return [f"{where}: {error.msg}", *shown]
    except ValueError as error:          # a NUL byte, for one
        return [f"{exercise}: {error}"]
    return None


# ---------------------------------------------------------------- running it

class Run:
    """One exercise's grading, in a pytest process that writes its steps
    (steps.py) to a temporary folder, read as they come."""

    def __init__(self, folder, exercise):
        self.scratch = tempfile.TemporaryDirectory(prefix="check-")
        self.out = Path(self.scratch.name)
        self.log = open(self.out / "pytest.log", "w+", encoding="utf-8")
        self.folder = folder
        self.process = grade.start_grading(
            folder, [f"--exercise={exercise}", f"--steps-to={self.out}",
                     f"--results-json={self.out / 'results.json'}",
                     f"--numprocesses={WORKERS.get(exercise, 2)}"], output=self.log)
        self.ended = {}
        self.read_up_to = 0

    def plan(self):
        """The steps, in order, once the run has collected them; else None."""
        try:
            return json.loads((self.out / steps.PLAN).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None

    def poll(self):
        """{step id: its line} of the steps that have ended so far."""
        try:
            with open(self.out / steps.STEPS, encoding="utf-8") as lines:
                lines.seek(self.read_up_to)
                text = lines.read()
        except FileNotFoundError:
            return self.ended
        whole = text[:text.rfind("\n") + 1]      # a line being written waits
        self.read_up_to += len(whole.encode("utf-8"))
        for line in whole.splitlines():
            step = json.loads(line)
            self.ended[step["id"]] = step
        return self.ended

    def graded(self, exercise):
        """results.py's verdict of the exercise, once the run has ended."""
        return results.read(self.out / "results.json").get(exercise, {})

    def finished(self):
        return self.process.poll() is not None

    def what_pytest_said(self, most=15):
        self.log.seek(0)
        return self.log.read().strip().splitlines()[-most:]

    def stop(self):
        grade.stop(self.process)
        self.log.close()
        self.scratch.cleanup()


def check(folder, exercise, say=print, seconds=CHECK_SECONDS):
    """Check one exercise, saying each step: (its verdict, as results.py
    names them, and the seconds it took). After `seconds`, TIMEOUT."""
    start = time.monotonic()
    error = syntax_error(folder, exercise)
    if error:
        say(f"  {FAILED} {error[0]}")
        for line in error[1:]:
            say(line)
        say(f"\n{results.ERROR}: {exercise} is not Python yet, so nothing of it could run.")
        return results.ERROR, time.monotonic() - start
    if exercise in LAB and importlib.util.find_spec("psycopg") is None:
        install_the_labs_library(say)
    run = Run(folder, exercise)
    try:
        verdict = narrate(run, exercise, start + seconds, say)
    finally:
        run.stop()
    return verdict, time.monotonic() - start


def install_the_labs_library(say):
    """psycopg, which the PostgreSQL lab needs and no other exercise: the
    checker's first set-up leaves it out, and installs it here, once."""
    say("installing psycopg, for the PostgreSQL lab (once; it needs the network)…")
    if subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "-r",
                       str(ROOT / "requirements-lab.txt")]).returncode != 0:
        raise Usage("installing psycopg failed (its error is above); check again once it is"
                    " fixed")


def narrate(run, exercise, deadline, say):
    """Print the steps in their order as they end; stop at the first that
    failed, at the deadline (time.monotonic's), or when the run ends."""
    told, ticks, claims = 0, 0, set()
    while True:
        done = run.finished()            # before reading: nothing it wrote is missed
        plan, ended = run.plan(), run.poll()
        while plan is not None and told < len(plan) and plan[told]["id"] in ended:
            step, line = plan[told], ended[plan[told]["id"]]
            if line["outcome"] == "failed":
                tell_before(step, line["problem"], say)
                return failure(run.folder, exercise, line["problem"], say)
            claim = step["id"].partition("[")[0]        # a parametrised test is one claim
            if claim not in claims:
                claims.add(claim)
                ticks += tell(step, line["outcome"], say)
            told += 1
        if plan == [] and done:
            return nothing_ran(run, exercise, say)
        if plan and told == len(plan):
            return passed(exercise, ticks, say)
        if done:
            return broke_off(run, exercise, plan, told, say)
        if time.monotonic() > deadline:
            verdict = timed_out(exercise, plan, told, say)
            settings_changed(run.folder, exercise, say)
            return verdict
        time.sleep(POLL)


def tell(step, outcome, say):
    """Tick each line of a step's title; how many."""
    mark = PASSED if outcome == "passed" else SKIPPED
    for line in step["title"]:
        say(f"  {mark} {line}")
    return len(step["title"])


def tell_before(step, problem, say):
    """A failing transcript's commands that came before the failing one."""
    failing = f"$ {problem.get('command')}"
    if failing in step["title"]:
        tell({"title": step["title"][:step["title"].index(failing)]}, "passed", say)


def failure(folder, exercise, problem, say):
    """The failing step: what it claimed, its short diff or error, where it
    is, the section to reread and any classic mistake's hint."""
    verdict = problem["kind"]
    say(f"  {FAILED} {problem['claim']}")
    if problem["output"]:
        say("")
        for line in problem["output"].splitlines():
            say(f"      {COPY_PATH.sub('', line)}")
        if any(line.startswith(("+", "-")) for line in problem["output"].splitlines()):
            say("\n    (- lines are what the guide shows, + lines what your program printed)")
    where = problem["where"]
    line = where.removeprefix("guide.md:")
    reread = section_at(int(line)) if line.isdigit() else taught_in(exercise)
    test = f" ({problem['test'].rpartition('::')[2]})" if problem["test"] else ""
    say(f"\n{verdict}: {exercise}, at {where}{test}.")
    say(f"Reread: {reread}.")
    settings_changed(folder, exercise, say)
    found = hints(exercise, problem)
    if len(found) == 1:
        say(f"Hint: {found[0]}")
    elif found:
        say("Hints, one for each classic mistake that ends at this step:")
        for hint in found:
            say(f"  - {hint}")
    return verdict


def hints(exercise, problem):
    """The hints of the classic mistakes that stop at this step."""
    return mistakes.hints_for(exercise, mistakes.step_of(problem), problem["kind"],
                              f"{problem['claim']}\n{problem['output']}")


# What a setting's value may be worked out from: numbers, + - * / // and a sign.
ARITHMETIC = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
              ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv,
              ast.USub: operator.neg}


def settings(path):
    """{NAME: number} of the settings at the top of the Python file at path:
    a name in capitals set to a number, or to arithmetic on numbers."""
    def number(node):
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return node.value
        if isinstance(node, ast.UnaryOp) and type(node.op) in ARITHMETIC:
            return ARITHMETIC[type(node.op)](number(node.operand))
        if isinstance(node, ast.BinOp) and type(node.op) in ARITHMETIC:
            return ARITHMETIC[type(node.op)](number(node.left), number(node.right))
        raise ValueError("not a number")

    try:
        body = ast.parse(path.read_text(encoding="utf-8")).body
    except (OSError, SyntaxError, ValueError, RecursionError):
        return {}
    found = {}
    for node in body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id.isupper():
            try:
                found[node.targets[0].id] = number(node.value)
            except (ValueError, ZeroDivisionError, RecursionError):
                pass
    return found


def settings_changed(folder, exercise, say):
    """After a failure: each setting of the learner's file that is not what
    the guide's listing has, as a Study Drill or Break It may have left it."""
    mine, guides = settings(Path(folder) / exercise), settings(CODE / exercise)
    for name, value in guides.items():
        if name in mine and mine[name] != value:
            say(f"Your file's `{name}` is {mine[name]!r}, the guide's {value!r}:"
                f" a Study Drill's change left in?")


def passed(exercise, count, say):
    say(f"\n{results.PASS}: {exercise}, all {count} steps.")
    return results.PASS


def nothing_ran(run, exercise, say):
    """No step of the exercise could run here: the lab, without PostgreSQL."""
    graded = run.graded(exercise)
    say(f"{graded.get('verdict', results.NOT_RUN)}: {exercise}. "
        f"{graded.get('why', 'None of its steps could run here.')}")
    return graded.get("verdict", results.NOT_RUN)


def broke_off(run, exercise, plan, told, say):
    """The run ended with steps untold: the checker itself went wrong."""
    step = plan[told]["title"][0] if plan and told < len(plan) else "collecting the steps"
    say(f"\nThe check stopped before it could finish ({step}); pytest's last lines:")
    for line in run.what_pytest_said():
        say(f"    {line}")
    return results.ERROR


def timed_out(exercise, plan, told, say):
    step = plan[told]["title"][0] if plan and told < len(plan) else "collecting the steps"
    say(f"  {FAILED} {step}")
    say(f"\n{results.TIMEOUT}: {exercise} was still being checked at its time limit, at "
        f"the step above: something in it waits for ever, or loops.")
    say(f"Reread: {taught_in(exercise)}.")
    return results.TIMEOUT


# ---------------------------------------------------------------- progress

def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def read_progress(folder):
    """{exercise: (digest, seconds)} of the exercises that passed."""
    try:
        text = (folder / PROGRESS).read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    progress = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) == 4 and fields[0] == "passed" and fields[1] in FILES:
            progress[fields[1]] = (fields[2], float(fields[3].removesuffix("s")))
    return progress


def write_progress(folder, progress):
    lines = ["# What check.py has seen pass in this folder: the exercise, a digest of",
             "# the file that passed, how long its check took. Delete this file to",
             "# start over."]
    lines += [f"passed {exercise} {sha} {seconds:.1f}s"
              for exercise, (sha, seconds) in sorted(progress.items(),
                                                     key=lambda each: FILES.index(each[0]))]
    (folder / PROGRESS).write_text("\n".join(lines) + "\n", encoding="utf-8")


def record(folder, exercise, verdict, seconds):
    progress = read_progress(folder)
    if verdict == results.PASS:
        progress[exercise] = (digest(folder / exercise), seconds)
    else:
        progress.pop(exercise, None)
    write_progress(folder, progress)


def still_passing(folder):
    """The exercises that passed and have not changed since."""
    return [exercise for exercise, (sha, _) in read_progress(folder).items()
            if (folder / exercise).is_file() and digest(folder / exercise) == sha]


def show_progress(folder, say=print):
    done = still_passing(folder)
    required = [file for file in course_order() if file not in OPTIONAL]
    passed_ = [file for file in course_order() if file in done]
    say(f"\nPassed so far ({PROGRESS}): "
        f"{', '.join(Path(file).stem for file in passed_) or 'none yet'} "
        f"({len([f for f in passed_ if f in required])} of {len(required)}).")
    todo = [file for file in required if file not in done]
    if todo:
        say(f"Next: {todo[0]}, in {taught_in(todo[0])}.")
    else:
        say("Every exercise of the course passes.")


def about(folder, exercise):
    seconds = read_progress(folder).get(exercise, (None, ABOUT.get(exercise, 10)))[1]
    return max(1, round(seconds))


# ---------------------------------------------------------------- the command

def check_and_record(folder, exercise, json_to=None):
    """Check, say it, remember it in the progress file and, with json_to, a
    JSON file for a machine (a classroom's grader): what the check said and
    its verdict."""
    print(f"checking {exercise} (about {about(folder, exercise)} s)…", flush=True)
    said = []

    def say(line):
        said.append(line)
        print(line, flush=True)
    verdict, seconds = check(folder, exercise, say=say)
    record(folder, exercise, verdict, seconds)
    show_progress(folder)
    if json_to:
        Path(json_to).parent.mkdir(parents=True, exist_ok=True)
        Path(json_to).write_text(json.dumps({
            "exercise": exercise, "verdict": verdict, "passed": verdict == results.PASS,
            "seconds": round(seconds, 1),
            "steps_passed": sum(line.startswith(f"  {PASSED} ") for line in said),
            "said": said}, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return verdict


def watch(folder, exercise):
    """Check the exercise, then again each time its file is saved, until Ctrl-C."""
    path = folder / exercise
    while True:
        checked = saved(path)            # before the check: a save during it counts
        check_and_record(folder, exercise)
        print(f"\nwatching {exercise}: save it to check it again (Ctrl-C to stop)", flush=True)
        while saved(path) == checked:
            time.sleep(0.3)
        print()


def saved(path):
    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    return stat.st_mtime_ns, stat.st_size


def main(argv=None):
    try:
        status = check_as_asked(argv)
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        # Whatever read the output has gone (check.py | head), and the check
        # has stopped. Python's last flush at exit must not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def check_as_asked(argv):
    """What the command line asks for, done: the exit status."""
    parser = argparse.ArgumentParser(
        prog="python3 check.py",
        description="Check one exercise against the guide, step by step.",
        epilog=f"It remembers what passed in {PROGRESS}, in your folder; "
               "delete that file to start over.")
    parser.add_argument("names", nargs="*", metavar="FOLDER or EXERCISE",
                        help="your folder of exercises (default: this one) and the "
                             "exercise to check (default: the file you changed last), "
                             "e.g. ex05 or tinyq")
    parser.add_argument("--watch", action="store_true",
                        help="check it again each time you save it")
    parser.add_argument("--progress", action="store_true",
                        help="only show what has passed so far, and what comes next")
    parser.add_argument("--json", metavar="FILE",
                        help="also write the verdict and all the check said to FILE, as "
                             "JSON, for a machine (a classroom's grader)")
    args = parser.parse_args(argv)
    try:
        folders = [name for name in args.names if Path(name).is_dir()]
        names = [name for name in args.names if name not in folders]
        if len(folders) > 1 or len(names) > 1:
            raise Usage("name at most one folder and one exercise")
        folder = learner_folder(folders[0] if folders else None)
        if args.progress:
            show_progress(folder)
            return 0
        exercise = exercise_to_check(folder, names[0] if names else None)
    except Usage as problem:
        print(f"check.py: {problem}", file=sys.stderr)
        return 2
    try:
        if args.watch:
            watch(folder, exercise)
        return 0 if check_and_record(folder, exercise, args.json) == results.PASS else 1
    except Usage as problem:                 # what the check needed could not be set up
        print(f"check.py: {problem}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nstopped (Ctrl-C): the check and every program it started are stopped.",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
