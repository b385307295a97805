"""What several test files share: a clock and dice that the test controls,
a fresh copy of the folder under test, a new PostgreSQL database, a learner's file imported as a
module, the simulations asked as the page asks them and the tasks their
states say are done, the guide's words, and what the exercises' tests
(tests/exercises/) share: scripts and terminals run in a copy, many seeds in one
process, an exercise made from a copy of the one before. Import it: `from
tests.helpers import Clock`."""
import ast
import contextlib
import copy
import json
import os
import random
import re
import select
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import NamedTuple

import pytest

from tools import course, guide
from tools.harness import catalogue, sandbox
from tools.sims import api


class Clock:
    """A clock that only moves when the test says so: clock.now += 120."""

    def __init__(self, now=1000.0):
        self.now = now

    def __call__(self):
        return self.now

    def advance(self, seconds):
        """What a sleep does on this clock: time passes, at once."""
        self.now += seconds


class TopOfRange(random.Random):
    """Dice that always roll the longest wait, so the ceiling shows."""

    def uniform(self, low, high):
        return high


def require(folder, name):
    """folder/name, the file a test checks; the test fails at once,
    saying so, if the folder under test lacks it."""
    path = Path(folder) / name
    if not path.is_file():
        pytest.fail(f"{name} is missing from {folder}")
    return path


@contextlib.contextmanager
def fresh_copy(folder, exercise=None):
    """A copy of folder's sources in a scratch folder of its own, as
    scratch/work, removed afterwards; scratch/ has room for more (a clock).
    With an exercise, the reference files with folder's copy of that one
    (sandbox.copy_sources)."""
    with tempfile.TemporaryDirectory(dir=sandbox.SCRATCH) as scratch:
        copy = Path(scratch) / "work"
        sandbox.copy_sources(folder, copy, exercise)
        yield copy


@contextlib.contextmanager
def new_database(server):
    """The address of a new, empty database on the PostgreSQL server at
    address `server` (tools/harness/postgres.py), dropped afterwards."""
    import psycopg                       # only the PostgreSQL lab's tests need it
    name = f"test_{uuid.uuid4().hex[:12]}"
    address = server.replace("///postgres?", f"///{name}?")
    assert address != server, f"no database name to replace in {server}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield address
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


def import_learner_file(path, name, beside=()):
    """The Python file at path (a learner's, or code/'s) as a module called
    name. The file is first imported once in a child process with limits
    (sandbox.import_fails, with the files `beside` that it imports): one
    that hangs or crashes on import fails the test with the reason instead
    of stopping the run."""
    problem = sandbox.import_fails(path, beside)
    if problem:
        pytest.fail(problem)
    return course.load(path, name)


def ask(sim, instance, method, args=None):
    """A simulation's answer to one call, made as the page makes it."""
    request = {"sim": sim, "instance": instance, "method": method}
    if args is not None:
        request["args"] = args
    return json.loads(api.call(json.dumps(request)))


def run_program(name, *args):
    """What `python3 -m tools.sims NAME ARGS` prints, run from the course's folder."""
    result = subprocess.run([sys.executable, "-m", "tools.sims", name, *args],
                            cwd=catalogue.ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


# ---------------------------------------------------------------- the exercises' tests

def run_script(folder, script, **options):
    (folder / "claim.py").write_text(script)
    return sandbox.run("python3 claim.py", folder, **options)


def numbers(pattern, text):
    return [float(n) for n in re.findall(pattern, text)]


# ---------------------------------------------------------------- Exercises 4-6
# Several processes of one exercise at once, sharing one warped clock, as the
# chapters' two- and three-terminal transcripts do.

class Terminals:
    """Commands started side by side in one folder, on one shared virtual clock."""

    def __init__(self, folder, timewarp=sandbox.TIMEWARP_FACTOR):
        self.folder = folder
        bin_folder = folder.parent / "bin"
        bin_folder.mkdir()
        self.clock = sandbox.new_clock(folder.parent / "clock")
        self.env = sandbox.child_environment(sandbox.link_python(bin_folder), timewarp,
                                             self.clock)
        self.started = []

    def now(self):
        """The time on the shared virtual clock, as the commands' time.time()
        reads it: the real time plus the skip their sleeps have added."""
        return time.time() + struct.unpack("d", Path(self.clock).read_bytes())[0]

    def start(self, command, timewarp=None):
        """Start a command; timewarp: its own warp, on the same shared clock."""
        env = self.env if timewarp is None else dict(self.env, TIMEWARP=str(timewarp))
        process = sandbox.Process(command, self.folder, env)
        self.started.append(process)
        return process

    def run(self, command):
        """Run a command to its end; return what it printed."""
        process = self.start(command)
        assert process.wait_until(lambda lines, exited: exited, sandbox.COMMAND_TIMEOUT), \
            process.output()
        return process.output()

    def wait_for(self, process, text):
        process.wait_until(lambda lines, exited: exited or text in "".join(lines),
                           sandbox.COMMAND_TIMEOUT)
        assert text in process.output(), f"never printed {text!r}:\n{process.output()}"

    def sleep(self, seconds):
        """Let `seconds` pass on the shared virtual clock."""
        self.run(f"python3 -c 'import time; time.sleep({seconds})'")

    def stop(self, process):
        """Ctrl-C, then wait for the process to finish."""
        process.interrupt()
        assert process.wait_until(lambda lines, exited: exited, sandbox.COMMAND_TIMEOUT), \
            process.output()
        return process.output()

    def close(self):
        for process in self.started:
            process.stop()


class Lands:
    """A worker's database connection on which another party's act lands
    before the worker's statement numbered `after` (from 0), as soon as
    another connection could: once the worker holds no transaction (until
    then a real client or worker would wait). The act runs on a connection
    of its own with busy_timeout 0: locked, it is tried again before the
    next statement. Whether it ran is `landed`, what it returned `answer`."""

    def __init__(self, db, after, act):
        self.db, self.after, self.act = db, after, act
        self.statements, self.landed, self.answer = 0, False, None

    def execute(self, sql, params=()):
        if not self.landed and self.statements >= self.after and not self.db.in_transaction:
            try:
                self.answer = self.act()
                self.landed = True
            except sqlite3.OperationalError:             # locked: before the next statement
                pass
        self.statements += 1
        return self.db.execute(sql, params)

    def __getattr__(self, name):                         # a cursor(), say: as it is
        return getattr(self.db, name)


def outbox(folder):
    path = folder / "outbox.txt"
    return path.read_text().splitlines() if path.exists() else []


# Where a test needs a send to last until something else has happened (a
# ^C, a `list`, a second claim), the outbox is a FIFO: a worker's open()
# waits at this mail server until the test reads it, however long the
# machine takes. A send of 2 s left a busy machine a window that closes.

def hold_the_mail(folder):
    os.mkfifo(folder / "outbox.txt")


def two_workers_on_held_mail(terminals, folder, command, addresses, emails):
    """Two workers (`python3 COMMAND`, e.g. `ex05_two_workers.py work atomic`)
    waiting, then the addresses enqueued, with the mail held until both have
    claimed a job. Returns the first `emails` sent, the two workers, and what
    each printed once it had no jobs left and was stopped."""
    hold_the_mail(folder)
    workers = [terminals.start(f"python3 {command}") for _ in range(2)]
    for worker in workers:
        terminals.wait_for(worker, "waiting for jobs")
    exercise = command.split()[0]
    terminals.run(f"python3 {exercise} enqueue {' '.join(addresses)}")
    for worker in workers:
        terminals.wait_for(worker, "claimed job")
    sent = receive(folder, emails)
    for worker in workers:
        terminals.wait_for(worker, "no jobs left")
    return sent, workers, [terminals.stop(worker) for worker in workers]


def receive(folder, emails, timeout=sandbox.COMMAND_TIMEOUT):
    """The first `emails` lines sent to the held outbox, or fewer if they do
    not come within timeout. The FIFO is opened for reading and writing,
    which on Linux never blocks (fifo(7)) and lets no worker's close end it."""
    fd = os.open(folder / "outbox.txt", os.O_RDWR)
    try:
        received = b""
        deadline = time.monotonic() + timeout
        while received.count(b"\n") < emails:
            if not select.select([fd], [], [], max(0, deadline - time.monotonic()))[0]:
                break
            received += os.read(fd, 4096)
        return received.decode().splitlines()
    finally:
        os.close(fd)


def statuses(terminals, exercise):
    """The status column of `list`, job by job."""
    lines = terminals.run(f"python3 {exercise} list").splitlines()[1:]
    return [line.split()[1] for line in lines]


# Tests whose outcome hangs on how two processes' steps fall on the shared
# clock (a lease against the work, a race's 0.3 s gap) run 2 times faster,
# not 20: while a busy machine pauses one process, the other's warped
# sleeps move the clock on twice as fast as real time, not twenty times, so
# a 0.3 s gap is 150 ms of real time (beside four CPU hogs, a guide session
# at a time warp of 5 missed its 60 ms).
SLOW_TIMEWARP = 2


SEEDS = range(1, 51)

# Runs the exercise's own command line for many seeds in one process, each
# run with fresh module globals (runpy), and prints what each printed.
MANY_SEEDS = """
import contextlib, io, runpy, sys
for seed in {seeds}:
    for command in (["setup"], ["work", "--seed", str(seed), *{extra}], ["report"]):
        sys.argv = ["{file}", *command]
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            runpy.run_path("{file}", run_name="__main__")
        print(f"=== seed {{seed}} {{command[0]}}")
        print(printed.getvalue(), end="")
"""


def runs_by_seed(folder, file, seeds=SEEDS, extra=()):
    """{seed: (what `work` printed, what `report` printed)} for every seed.

    extra: more options for `work`."""
    with fresh_copy(folder) as copy:
        status, output = run_script(copy, MANY_SEEDS.format(seeds=list(seeds), file=file,
                                                            extra=list(extra)),
                                    timewarp=1000)
    assert status == 0, output
    parts = re.split(r"^=== seed (\d+) (\w+)\n", output, flags=re.M)[1:]
    runs = {}
    for seed, command, printed in zip(parts[::3], parts[1::3], parts[2::3]):
        runs.setdefault(int(seed), {})[command] = printed
    return {seed: (run["work"], run["report"]) for seed, run in runs.items()}


def overcharge_cents(report):
    paid, owed = re.search(r"alice paid \$([\d.]+) for orders worth \$([\d.]+)",
                           report).groups()
    return round((float(paid) - float(owed)) * 100)


def attempts_by_job(work):
    """[(job, attempt, outcome)] in the order of the log, the outcome being
    done, ConnectionError or TimeoutError."""
    return [(int(job), int(attempt), outcome) for job, attempt, outcome in re.findall(
        r"^job (\d+), attempt (\d+): charge \$10\.00: (done|ConnectionError|TimeoutError)",
        work, re.M)]


def statement_name(node):
    """What a top-level statement is called: `import uuid`, DATABASE, main, ..."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return "import " + ", ".join(alias.name for alias in node.names)
    if isinstance(node, ast.Assign):
        return ", ".join(ast.unparse(target) for target in node.targets)
    return getattr(node, "name", None) or ast.unparse(node).splitlines()[0]


def top_level(path):
    """[(name, its shape)] for each top-level statement: what it does, as
    `shape` sees it."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    return [(statement_name(node), shape(node)) for node in body]


def shape(node):
    """A statement as it runs: without comments (the parser drops them) or
    docstrings, and with a function's own variables named by the order they
    appear in, so `cur` for `cursor` is the same statement."""
    node = copy.deepcopy(node)
    for each in ast.walk(node):
        body = getattr(each, "body", None)
        if isinstance(each, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and \
                isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            each.body = body[1:] or [ast.Pass()]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        own = {}
        for each in ast.walk(node):
            if isinstance(each, ast.arg) or (isinstance(each, ast.Name)
                                             and isinstance(each.ctx, ast.Store)):
                own.setdefault(getattr(each, "arg", None) or each.id, f"_{len(own)}")
        for each in ast.walk(node):
            if isinstance(each, ast.arg):
                each.arg = own[each.arg]
            elif isinstance(each, ast.Name):
                each.id = own.get(each.id, each.id)
    return ast.dump(node)


class Edit(NamedTuple):
    """An exercise the guide has the reader make from a copy of the one
    before: the top-level statements it adds or changes (each shown by the
    guide with pyobject=, except imports, which the prose names), and those
    it deletes."""
    parent: str
    child: str
    changes: frozenset
    deletes: frozenset = frozenset()

    @property
    def shown(self):
        return {name for name in self.changes if not name.startswith("import ")}

    def shown_by_the_guide(self):
        """The parts of the child that the guide includes by pyobject=."""
        return {block.attributes.get("pyobject") for block in guide.read_guide(catalogue.GUIDE)
                if block.attributes.get("include") == f"code/{self.child}"}

    def check_against(self, folder, source_folder):
        """Fail unless folder's child is the parent with exactly these changes
        and deletions, its other statements kept, in order. The parent is the
        learner's own, the one they copied, if source_folder has it; a child
        that matches the course's (in folder) passes too, so that a mistake
        in the learner's parent fails the parent, not the child."""
        own = source_folder / self.parent
        parents = {"your " + self.parent: own} if own.is_file() else {}
        parents[f"the course's code/{self.parent}"] = folder / self.parent
        problems = {name: self.differences(path, folder / self.child)
                    for name, path in parents.items()}
        if not all(problems.values()):
            return
        name, problem = next(iter(problems.items()))
        pytest.fail(f"{self.child} compared with {name}: {problem}", pytrace=False)

    def differences(self, parent, child):
        """What is wrong with child as an edit of parent; "" if nothing."""
        old, new = top_level(parent), top_level(child)
        old_names, new_names = [name for name, _ in old], [name for name, _ in new]
        if len(set(new_names)) != len(new_names):
            return f"a statement is there twice: {new_names}"
        deleted = set(old_names) - set(new_names)
        changed = {name for name in new_names if dict(old).get(name) != dict(new).get(name)}
        kept = [name for name in old_names if name in new_names]
        problems = [f"{what}: {', '.join(sorted(names))}" for what, names in (
            ("deleted, though the guide keeps", deleted - self.deletes),
            ("still there, though the guide deletes", self.deletes & set(new_names)),
            ("changed or added, though the guide leaves as it was", changed - self.changes),
            ("as it was, though the guide changes", self.changes - changed)) if names]
        if [name for name in new_names if name in old_names] != kept:
            problems.append("the statements it keeps are in another order")
        return "; ".join(problems)


# Exercise 9's running example: invoice 7 of the North tenant.
O7 = {"tenant": "North", "invoice": 7, "amount_cents": 5000, "currency": "usd"}


def set_constant(path, name, value):
    """Set a number at the top of the exercise at path, the way a Study
    Drill tells the reader to."""
    text, count = re.subn(rf"(?m)^{name}\s*=\s*[\d.]+", f"{name} = {value}", path.read_text())
    assert count == 1, f"{path.name} should set {name} once"
    path.write_text(text)


def add_new_users(path, addresses):
    """Add addresses at the end of the exercise's NEW_USERS list, as a Study
    Drill of Chapters 1 and 3 tells the reader to."""
    added = "".join(f', "{address}"' for address in addresses)
    text, count = re.subn(r"(?ms)^(NEW_USERS\s*=\s*\[.*?)\s*,?\s*\]", rf"\1{added}]",
                          path.read_text(), count=1)
    assert count == 1, f"{path.name} should set NEW_USERS to a list"
    path.write_text(text)


class FlakyProvider:
    """Fails with Retryable `failures` times, then charges."""

    def __init__(self, ex09, failures):
        self.ex09, self.failures, self.calls = ex09, failures, 0

    def charge(self, idempotency_key, **inputs):
        self.calls += 1
        if self.calls <= self.failures:
            raise self.ex09.Retryable("503 Service Unavailable")
        return f"charge-{idempotency_key}"


def tasks(state):
    """{task id: done or not}, from a simulation's state."""
    return {task["id"]: task["done"] for task in state["tasks"]}


def earned(state):
    """The ids of the tasks a simulation's state says are done."""
    return {task for task, done in tasks(state).items() if done}


GUIDE = (catalogue.ROOT / "guide.md").read_text(encoding="utf-8")
PROSE = " ".join(GUIDE.split())          # the guide's words, however its lines wrap


def as_in_a_terminal():
    """For Popen's preexec_fn, in a test that presses Ctrl-C: the program
    gets SIGINT as one started from a terminal does. (A shell script that
    starts the tests in the background, as a CI runner may, starts them
    deaf to SIGINT, and their children inherit that.)"""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
