"""Grade a class: every folder inside CLASS holds one learner's files.

Usage:  python3 tools/grade.py CLASS [--exercise FILE]...   (make grade CLASS=folder)

Each learner is graded as `make check WORK=folder` grades one: the guide's
transcripts and the claims tests, run against their files (with --exercise,
only those exercises' tests, and only their columns). Each learner gets a
fresh pytest process, in a process group of its own, with a time limit
(LEARNER_SECONDS, 20 minutes; --time-limit SECONDS) and limits on its CPU
time and memory (LEARNER_LIMITS), so one learner's disaster (a hang, a
crash, a syntax error) ends only their own row; the process writes the
learner's verdicts and problems to a results file (--results-json, see
tools/harness/results.py), and this reads them from there. A grading that
runs past its time is stopped as Ctrl-C would stop it, so that pytest stops
the commands it started (each in a process group of its own), then, if it
has not ended STOP_GRACE seconds later, killed with its group; the
learner's row reads TIMEOUT.
Every process of a learner's grading inherits GRADING_TAG in its
environment, set to a value of its own; when the grading ends, however it
ends, whatever still carries the tag is killed, so no learner's program
outlives their grading. tools/check.py starts and stops its one pytest
process the same way (start_grading, stop).

Learners are graded side by side, two at once for each core (--jobs N; see
JOBS: most of a grading waits for the programs it runs, so one a core left
the cores idle, and six a core loaded the machine until correct chaos runs
timed out); once all are graded, each TIMEOUT is graded again with nothing
beside it, and that verdict stands. The pytest processes share twice as
many xdist workers as there are cores (with --exercise, at most one per
exercise: see test_processes).

It writes, in CLASS:
  grades.csv          one row per learner, one column per exercise (an
                      optional file, Chapter 6's herd.py, Chapter 11's
                      ex09_webhooks.py or one of Chapter 12's lab, only if
                      some learner handed it in; "-" for those who did not)
  grades.md           the same table, each name linking to the learner's report
  reports/NAME.md     per learner: each exercise's verdict and, under each
                      that did not pass, the section to reread and the
                      steps that failed, the first one first
all at once at the end: they are written in a temporary folder first and
renamed into place, so until then the files of an earlier grading stay as
they were (an interrupted grading leaves them so). A learner folder may
not be called `reports`. It prints its progress to stderr (a line as each
learner's grading ends) and the Markdown table to stdout. Exit status: 0
when every learner passed everything, 1 otherwise, 2 for a usage mistake.
Ctrl-C stops every learner's grading in progress (as above) and writes
nothing: it exits 130 with one line, `grading interrupted: nothing
written`. SIGTERM, from a CI limit, `timeout` or a service manager, does
the same, and it exits 143 with `grading stopped by SIGTERM: nothing
written` (130 and 143 are what a shell reports for them).

`make grade` echoes nothing (@). When a learner failed, grade.py exits 1
and GNU make adds `make: *** [Makefile:NN: grade] Error 1`: make prints
that line for every failing recipe, and the one way to hide it (`-` with
-s) also turns the exit status to 0.
"""
import argparse
import concurrent.futures
import csv
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from urllib.parse import quote

from tools.harness import results
from tools.harness.catalogue import FILES, OPTIONAL, ROOT

LEARNER_SECONDS = 1200           # a whole learner's grading, at the most (--time-limit)
# What each of a learner's pytest processes may use (each command it runs
# has sandbox.LIMITS of its own): CPU time, and memory.
LEARNER_LIMITS = {
    resource.RLIMIT_CPU: LEARNER_SECONDS,
    resource.RLIMIT_AS: 4 * 1024 ** 3,
}
# Learners graded side by side, by default: most of a grading waits for the
# programs it runs, so one learner a core leaves the cores idle a quarter of
# the time. On two cores a class of 30 takes about 18.5 min at one a core
# (busy 77% of the time), 15:05 at four, 14:49 at six (busy 93%). But at six
# a core, a load of 60 to 150 on two cores pushed 11 of 28 correct chaos
# runs past their time limit: two a core is nearly as fast, and leaves room.
JOBS = 2 * (os.cpu_count() or 1)
STOP_GRACE = 10                  # seconds a stopped grading gets to stop its commands
REPORTS = "reports"              # CLASS/reports/NAME.md
RUNNING = {}                     # the learners' pytest processes still running: their tags
STOPPING = threading.Event()     # set when grading was interrupted
# Every process of a learner's grading inherits this variable, set to a value
# of its own (its tag). The commands it runs are each in a process group of
# their own, and a program may start others and leave them behind; when the
# grading ends, whatever still carries its tag is killed.
TAG = "GRADING_TAG"


def limit_learner():
    """Runs in a learner's pytest process before it starts: grading's limits,
    and SIGINT's default action, which stop() relies on even where grade.py
    was started deaf to it (in the background of a shell script)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    for limit, value in LEARNER_LIMITS.items():
        resource.setrlimit(limit, (value, value))


def grade(folder, exercises=(), workers=1, seconds=LEARNER_SECONDS):
    """{exercise: {"verdict", "reread", "decided_by", "problems"}} for one
    learner's folder, their tests run by that many pytest processes side by
    side; {} if the run wrote none, or did not end within seconds."""
    with tempfile.TemporaryDirectory() as temp:
        results_file = Path(temp) / "results.json"
        only = [f"--exercise={exercise}" for exercise in exercises]
        side_by_side = [f"--numprocesses={workers}"] if workers > 1 else []
        process = start_grading(folder, [*side_by_side, f"--results-json={results_file}",
                                         *only])
        try:
            if STOPPING.is_set():        # started just as grading was interrupted
                return {}
            process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return {}
        finally:
            stop(process)
        return results.read(results_file)


def start_grading(folder, options, output=None):
    """A pytest process grading a learner's folder (with options), in a
    process group of its own, with a tag and grading's limits; its output
    goes to output (a file), or nowhere. stop() ends it."""
    tag = uuid.uuid4().hex
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--work={folder}",
         *options],
        cwd=ROOT, env={**os.environ, TAG: tag}, stdin=subprocess.DEVNULL,
        stdout=output or subprocess.DEVNULL, stderr=subprocess.STDOUT if output else
        subprocess.DEVNULL, start_new_session=True, preexec_fn=limit_learner)
    RUNNING[process] = tag
    return process


def stop(process):
    """Stop a learner's grading, if it still runs: first as Ctrl-C would, so
    that pytest ends the commands it started, then, after STOP_GRACE seconds,
    by killing its process group; then kill whatever still carries its tag."""
    tag = RUNNING.pop(process, None)
    if tag is None:
        return                           # stopped already
    try:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
            process.wait(timeout=STOP_GRACE)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        pass                             # it ended meanwhile
    for pid in tagged(tag):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def tagged(tag):
    """The processes whose environment carries TAG=tag (Linux's /proc;
    elsewhere none are found, and only the process group is stopped)."""
    wanted = f"{TAG}={tag}".encode()
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            if wanted in (entry / "environ").read_bytes().split(b"\0"):
                yield int(entry.name)
        except OSError:
            pass                         # gone, or not ours to read


# The mark of an optional file (catalogue.OPTIONAL) that a learner did not hand in.
NOT_HANDED_IN = "-"


def marks(exercises, graded, folder):
    """The learner's verdict for each exercise; all TIMEOUT if the run wrote
    none. An optional file the learner's folder lacks is NOT_HANDED_IN."""
    return [NOT_HANDED_IN if exercise in OPTIONAL and not (folder / exercise).is_file()
            else graded[exercise]["verdict"] if exercise in graded
            else results.TIMEOUT if not graded else results.NOT_RUN
            for exercise in exercises]


def passed(row):
    """"PASS count/exercises graded": the lab counts for those who handed it
    in, where a PostgreSQL server could be started to grade it."""
    graded = [mark for mark in row if mark not in (NOT_HANDED_IN, results.NOT_GRADED)]
    return f"{graded.count(results.PASS)}/{len(graded)}"


def table(exercises, grades, folders):
    """The header and one row per learner: name, verdicts, passed."""
    rows = []
    for learner, graded in grades.items():
        row = marks(exercises, graded, folders[learner])
        rows.append([learner, *row, passed(row)])
    return ["learner", *exercises, "passed"], rows


def markdown(header, rows):
    """The table, each learner's name a link to their report."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    linked = [[f"[{row[0]}]({REPORTS}/{quote(row[0])}.md)", *row[1:]] for row in rows]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in linked]) + "\n"


def report(learner, exercises, graded, folder, seconds=LEARNER_SECONDS):
    """A learner's report, in Markdown: why each exercise got its verdict.
    The optional files they did not hand in are left out."""
    verdicts = marks(exercises, graded, folder)
    exercises = [name for name, mark in zip(exercises, verdicts) if mark != NOT_HANDED_IN]
    verdicts = [mark for mark in verdicts if mark != NOT_HANDED_IN]
    counted = [mark for mark in verdicts if mark != results.NOT_GRADED]
    lines = [f"# {learner}", "",
             f"{counted.count(results.PASS)} of {len(counted)} exercises pass.", ""]
    if not graded:
        lines += [f"Grading stopped after {seconds} s before it could say anything: "
                  f"every exercise counts as {results.TIMEOUT}.", ""]
    lines += [f"- {exercise}: {verdict}" for exercise, verdict in zip(exercises, verdicts)]
    for exercise in exercises:
        each = graded.get(exercise)
        if each and each["verdict"] in results.EXPLAINED:
            lines += [""] + explanation(exercise, each)
        elif each and each["verdict"] == results.MISSING:
            lines += ["", f"## {exercise}: {results.MISSING}", "",
                      f"The folder has no {exercise}: a file of another name is not graded."]
        elif each and each["verdict"] == results.NOT_GRADED:
            lines += ["", f"## {exercise}: {results.NOT_GRADED}", "", each['why']]
    return "\n".join(lines) + "\n"


def explanation(exercise, each):
    problems = each["problems"]
    first = problems[0]
    lines = [f"## {exercise}: {each['verdict']}", "",
             f"Reread: {each['reread']}.", "",
             f"Failed first: {step(first)}: {first['claim']}"]
    if each["decided_by"]:
        decider = problems[each["decided_by"]]
        lines += ["", f"{each['verdict']} comes from {step(decider)}: the steps before it "
                      f"printed less than the guide shows and nothing else."]
    if any(line.startswith(("+", "-")) for p in problems for line in p["output"].splitlines()):
        lines += ["", "In a diff, `-` lines are what the guide shows and `+` lines what the "
                      "program printed instead."]
    for number, problem in enumerate(problems, start=1):
        lines += ["", f"### {number}. {step(problem)} ({problem['kind']})", "", problem["claim"]]
        if problem["output"]:
            lines += ["", "````", problem["output"], "````"]
    return lines


def step(problem):
    """Where a failing step is: guide.md:LINE, or the test file's line and the test."""
    if problem["test"]:
        return f"{problem['where']}, {problem['test'].rpartition('::')[2]}"
    return problem["where"]


def write_all(class_folder, header, rows, reports):
    """Write grades.csv, grades.md and reports/ beside one another in a
    temporary folder, then put them in place with renames: an interruption
    before this point leaves the earlier files untouched."""
    temp = Path(tempfile.mkdtemp(prefix=".grading-", dir=class_folder))
    try:
        with open(temp / "grades.csv", "w", newline="", encoding="utf-8") as out:
            csv.writer(out).writerows([header, *rows])
        (temp / "grades.md").write_text(markdown(header, rows), encoding="utf-8")
        (temp / REPORTS).mkdir()
        for learner, text in reports.items():
            (temp / REPORTS / f"{learner}.md").write_text(text, encoding="utf-8")
        if (class_folder / REPORTS).exists():
            os.replace(class_folder / REPORTS, temp / "old-reports")
        os.replace(temp / REPORTS, class_folder / REPORTS)
        os.replace(temp / "grades.csv", class_folder / "grades.csv")
        os.replace(temp / "grades.md", class_folder / "grades.md")
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def grade_all(learners, only, exercises, jobs, seconds=LEARNER_SECONDS):
    """{learner's name: their grades}, in the learners' order, graded jobs at
    a time; a line on stderr as each learner's grading ends. Interrupted
    (Ctrl-C, or SIGTERM), it stops every grading still running before it
    gives up."""
    start = time.monotonic()
    side_by_side = min(jobs, len(learners))
    workers = test_processes(side_by_side, only)
    print(f"grading {len(learners)} learners, {side_by_side} side by side",
          file=sys.stderr, flush=True)
    grades = {}
    STOPPING.clear()
    pool = concurrent.futures.ThreadPoolExecutor(side_by_side)
    try:
        running = {pool.submit(grade, learner, only, workers, seconds): learner
                   for learner in learners}
        for done in concurrent.futures.as_completed(running):
            name = running[done].name
            grades[name] = done.result()
            print(f"{len(grades)} of {len(learners)} graded: {name}, "
                  f"{passed(marks(exercises, grades[name], running[done]))} "
                  f"passed ({clock(time.monotonic() - start)} so far)",
                  file=sys.stderr, flush=True)
        grade_timeouts_again(learners, exercises, grades, seconds)
    finally:
        STOPPING.set()
        pool.shutdown(wait=False, cancel_futures=True)
        for process in RUNNING.copy():
            stop(process)
    print(f"graded {len(learners)} in {clock(time.monotonic() - start)}",
          file=sys.stderr, flush=True)
    return {learner.name: grades[learner.name] for learner in learners}


def test_processes(side_by_side, exercises):
    """How many test processes each learner's grading gets. Most tests wait
    for the programs they run: as make check does, run twice as many as
    there are cores, shared by the learners graded side by side. A test
    process costs about a second of CPU to start, more than a few
    exercises' tests gain from it: at most one per exercise asked for."""
    workers = max(1, 2 * (os.cpu_count() or 1) // side_by_side)
    return min(workers, len(exercises)) if exercises else workers


def grade_timeouts_again(learners, exercises, grades, seconds):
    """Grade each TIMEOUT again, one learner at a time with nothing else
    running, and let that verdict stand: the first may have been the
    machine's, loaded by the learners graded beside them."""
    for learner in learners:
        slow = [exercise for exercise, mark in
                zip(exercises, marks(exercises, grades[learner.name], learner))
                if mark == results.TIMEOUT]
        if not slow:
            continue
        again = grade(learner, slow, test_processes(1, slow), seconds)
        grades[learner.name].update({exercise: again[exercise] for exercise in slow
                                     if exercise in again})
        print(f"graded again, alone: {learner.name}, " + ", ".join(
            f"{exercise} {again.get(exercise, {}).get('verdict', results.TIMEOUT)}"
            for exercise in slow), file=sys.stderr, flush=True)


def clock(seconds):
    return f"{int(seconds) // 60}:{int(seconds) % 60:02d}"


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python3 tools/grade.py",
        description="Grade every learner's folder inside CLASS.")
    parser.add_argument("class_folder", metavar="CLASS",
                        help="a folder holding one folder per learner")
    parser.add_argument("--exercise", metavar="FILE", action="append", default=[],
                        help="grade only this exercise (again for more), "
                             "e.g. ex04_durable_queue.py")
    parser.add_argument("--jobs", metavar="N", type=int, default=JOBS,
                        help="grade N learners side by side (default: two per core, here "
                             "%(default)s)")
    parser.add_argument("--time-limit", metavar="SECONDS", type=int, default=LEARNER_SECONDS,
                        help="stop a learner's grading after SECONDS and mark what it had "
                             "not graded TIMEOUT (default: %(default)s)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if not Path(args.class_folder).is_dir():
        print("usage: python3 tools/grade.py CLASS   (a folder holding one folder per learner)",
              file=sys.stderr)
        return 2
    unknown = [name for name in args.exercise if name not in FILES]
    if unknown:
        print(f"usage: --exercise {unknown[0]}: the guide has no such exercise "
              f"(it has {', '.join(FILES)})", file=sys.stderr)
        return 2
    class_folder = Path(args.class_folder).resolve()
    learners = sorted(p for p in class_folder.iterdir()
                      if p.is_dir() and not p.name.startswith(".") and p.name != REPORTS)
    # An optional file (Chapter 12's lab, Chapter 6's herd.py) has a column
    # only if someone handed it in.
    handed_in = [name for name in FILES if name not in OPTIONAL
                 or any((learner / name).is_file() for learner in learners)]
    exercises = [name for name in handed_in if name in args.exercise or not args.exercise]
    if not learners:
        print(f"{class_folder} holds no learner folders", file=sys.stderr)
        return 2
    if not exercises:
        print(f"no learner handed in {', '.join(args.exercise)}, which "
              f"{'is' if len(args.exercise) == 1 else 'are'} optional", file=sys.stderr)
        return 2
    if args.jobs < 1 or args.time_limit < 1:
        print("usage: --jobs and --time-limit are at least 1", file=sys.stderr)
        return 2
    grades = grade_all(learners, args.exercise, exercises, args.jobs, args.time_limit)
    folders = {learner.name: learner for learner in learners}
    header, rows = table(exercises, grades, folders)
    write_all(class_folder, header, rows,
              {name: report(name, exercises, graded, folders[name], args.time_limit)
               for name, graded in grades.items()})
    print((class_folder / "grades.md").read_text(encoding="utf-8"), end="")
    everyone_passed = all(row[-1].split("/")[0] == row[-1].split("/")[1] for row in rows)
    return 0 if everyone_passed else 1


class Terminated(BaseException):
    """SIGTERM arrived: grading ends as on Ctrl-C (a BaseException, as
    KeyboardInterrupt is, so that no `except Exception` holds it up)."""


def terminated(signum, frame):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)    # once is enough: stopping takes a while
    raise Terminated


if __name__ == "__main__":
    # Python's default for SIGTERM ends this process at once, with no
    # `finally`, and the learners' pytest processes (each in a session of
    # its own) would go on grading: raise instead, as Ctrl-C does.
    signal.signal(signal.SIGTERM, terminated)
    try:
        sys.exit(main())
    except KeyboardInterrupt:            # grade_all has stopped every grading
        print("grading interrupted: nothing written", file=sys.stderr)
        sys.exit(130)                    # as a shell reports a Ctrl-C
    except Terminated:
        print("grading stopped by SIGTERM: nothing written", file=sys.stderr)
        sys.exit(128 + signal.SIGTERM)   # 143, as a shell reports it
