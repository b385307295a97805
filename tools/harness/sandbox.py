"""Run shell commands as a reader would, in a sandbox that keeps the tests safe.

Each command runs with bash in a folder (a copy of the exercise files), in a
process group of its own so that it can be interrupted or killed whole, with
limits on CPU, memory and file size, with `python3` the interpreter running
the tests, and with the time warp (timewarp/sitecustomize.py) on its
PYTHONPATH. `run` runs one command to its end; `Process` is one command
that others (the transcript sessions, the claims tests) read as it runs.
`import_fails` checks that a learner's file imports before a test imports it.

A command's environment (child_environment) is the caller's without any
PYTHON* variable, plus: `python3` first on PATH, a link to the interpreter
running the tests, which through it does not see the virtualenv's packages
(exercises use only the standard library); PYTHONUNBUFFERED=1, so that
prints and tracebacks come out in the order a terminal shows them;
PYTHONDONTWRITEBYTECODE=1 and LC_ALL=C.UTF-8; and the time warp:
PYTHONPATH=timewarp/, TIMEWARP=20 (TIMEWARP_FACTOR, or a session's
`timewarp`) and TIMEWARP_CLOCK, the shared clock file, when there is one.
SIGINT has its default action in every command, even when the tests run as
a background job of a shell (which ignores it for its jobs). Every process
a command starts has LIMITS: 120 s of CPU, 2 GiB of memory, 100 MiB in any
file it writes. A command that `run` runs may take COMMAND_TIMEOUT (60 s),
and a transcript waits at most SYNC_TIMEOUT (30 s) for output;
COMMAND_TIMEOUT=seconds in the environment sets the first, and the second
to at most that (the grader's tests use it to catch a hang quickly). Runs
of `run` get no shared clock unless they are given one,
clock=new_clock(path): each process keeps its own skip.
"""

import atexit
import contextlib
import fcntl
import hashlib
import os
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from .catalogue import CODE
from .results import ERROR, FAIL, TIMEOUT

TIMEWARP_FOLDER = Path(__file__).resolve().parent / "timewarp"
TIMEWARP_FACTOR = 20          # sleeps run 20 times faster; clocks still agree
# Real seconds: how long one command started by run() may take, and how long
# a transcript waits for output, or for an exit. The grader's own tests
# shorten both with COMMAND_TIMEOUT=seconds, to watch a hang being caught.
COMMAND_TIMEOUT = float(os.environ.get("COMMAND_TIMEOUT", 60))
SYNC_TIMEOUT = min(30, COMMAND_TIMEOUT)
# How long a session waits for a command to end, where it must have ended (at
# the session's end, or before a command starts in its terminal): the wait
# that is short in the harness's own tests of "still running", while their
# waits for output stay long.
EXIT_TIMEOUT = SYNC_TIMEOUT

# Files that running the exercises leaves behind: a transcript starts without them.
LEFTOVERS = shutil.ignore_patterns(
    ".*", "__pycache__", "*.db", "*.db-wal", "*.db-shm", "outbox.txt")


class Failure(str):
    """What went wrong in one step, as data for grading and as the message
    that says it (a str: Sybil fails an example whose evaluator returns a
    true value, and keeps a str as it is, in SybilFailure.result):
      kind          results.FAIL, ERROR or TIMEOUT: what the step did
      where         "guide.md:LINE" of the line that failed, or None
      claim         what went wrong, in words
      output        the short diff or the error, or ""
      command       the `$ ` command that failed, as typed (without "$ "), or None
      failed_earlier  for a block of a session that had already failed:
                    where it had ("guide.md:LINE"); else None
      unexpected    the lines the command printed that the guide does not show
    The message is "WHERE: CLAIM", then ":" and the output on lines of its own."""

    def __new__(cls, where, claim, output="", *, kind=FAIL, command=None,
                failed_earlier=None, unexpected=()):
        said = f"{where}: {claim}" if where else claim
        failure = super().__new__(cls, f"{said}:\n{output}" if output else said)
        failure.kind, failure.where, failure.claim, failure.output = kind, where, claim, output
        failure.command, failure.failed_earlier = command, failed_earlier
        failure.unexpected = tuple(unexpected)
        return failure


class TranscriptError(Exception):
    """A command or console block that cannot be run, or prints something
    else; its `failure` (a Failure, made of the same arguments) says how."""

    def __init__(self, *args, **data):
        self.failure = Failure(*args, **data)
        super().__init__(self.failure)


class EditError(ValueError):
    pass


def copy_sources(source_folder, folder, exercise=None):
    """The course's files in folder, ready to run. For an exercise (a path
    inside code/, like "ex08_idempotency.py"), they are the reference files
    of code/ with source_folder's copy of that one file in its place: its
    verdict depends on that file alone, so a mistake in a learner's ex07
    never fails their ex08, and a stray file in their folder never shows in
    an `ls`. Without one, source_folder's files as they are, except the
    given files (`*_given.py`, downloaded, never typed): those always come
    from code/, whatever source_folder holds under their names, into each
    of its folders that has one in code/ (no capstone/ is made for
    capstone/world_given.py in a folder that has not reached the capstone)."""
    if exercise is None:
        shutil.copytree(source_folder, folder, ignore=LEFTOVERS)
        for given in given_files():
            if (Path(folder) / given).parent.is_dir():
                shutil.copy(CODE / given, Path(folder) / given)
        return
    shutil.copytree(CODE, folder, ignore=LEFTOVERS)
    shutil.copy(Path(source_folder) / exercise, Path(folder) / exercise)


def given_files():
    """The given files, as paths inside code/: practice scaffolding that a
    learner downloads from the site and never types (ex09_practice_given.py,
    capstone/world_given.py)."""
    return sorted(path.relative_to(CODE) for path in CODE.rglob("*_given.py"))


IMPORTED = {}                 # a file's SHA-256 -> None, or why importing it failed


def import_fails(path, beside=()):
    """None if the Python file at path can be imported, in a child process
    with the usual limits, within COMMAND_TIMEOUT; otherwise a Failure: an
    ERROR (it crashed, or would not compile) or a TIMEOUT. Tests that import
    a learner's module call this first, so a file that hangs or crashes on
    import fails those tests at once, each of them, instead of hanging the
    test run (pytest.fail(failure): the plugin finds the failure's kind in
    the exception). `beside` are the files it imports by name, copied with
    it. Checked once per content of them all."""
    path = Path(path)
    key = hashlib.sha256(b"".join(Path(each).read_bytes() for each in (path, *beside))).hexdigest()
    if key not in IMPORTED:
        command = f"python3 -c 'import {path.stem}'"
        with tempfile.TemporaryDirectory(dir=SCRATCH) as folder:
            for each in (path, *beside):
                shutil.copy(each, folder)
            try:
                status, output = run(command, folder, timeout=COMMAND_TIMEOUT)
                IMPORTED[key] = None if status == 0 else Failure(
                    None, f"{path.name} crashed when imported", output.rstrip("\n"),
                    kind=ERROR, command=command)
            except TranscriptError as error:
                IMPORTED[key] = Failure(None, f"importing {path.name}: {error.failure.claim}",
                                        error.failure.output, kind=error.failure.kind,
                                        command=command)
    return IMPORTED[key]


def apply_edit(folder, file_name, old, new):
    """Replace OLD by NEW in folder/file_name; OLD must occur exactly once."""
    path = Path(folder) / file_name
    if not path.is_file():
        raise EditError(f"edit: there is no {file_name} to edit")
    text = path.read_text(encoding="utf-8")
    count = text.count(old)
    if count != 1:
        raise EditError(f"edit: {file_name} holds {old!r} {count} times, not once")
    path.write_text(text.replace(old, new), encoding="utf-8")


# Exercises commit to SQLite often, and on a disk most of a run's time is
# spent waiting for fsync. Scratch folders go in memory where there is some.
SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") else None


def link_python(bin_folder):
    # python3 is the interpreter running the tests. Called through a
    # symlink it does not see the virtualenv, just as the reader's doesn't.
    os.symlink(sys.executable, Path(bin_folder, "python3"))
    return bin_folder


def new_clock(path):
    """A file for TIMEWARP_CLOCK: the shared skip, a double, starting at 0.0."""
    Path(path).write_bytes(bytes(8))
    return path


def pause(clock, seconds, factor):
    """Let seconds pass on the clock file's virtual clock, as a warped sleep
    does (timewarp/sitecustomize.py): really sleep seconds/factor, then
    raise the shared skip so that the virtual clock has advanced by seconds."""
    fd = os.open(clock, os.O_RDWR)
    try:
        def skip():
            return struct.unpack("d", os.pread(fd, 8, 0))[0]
        wake_at = time.monotonic() + skip() + seconds
        time.sleep(seconds / factor)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.pwrite(fd, struct.pack("d", max(skip(), wake_at - time.monotonic())), 0)
    finally:
        os.close(fd)                     # and with it the lock


def child_environment(bin_folder, timewarp, clock=None):
    # Drop the caller's PYTHON* settings so every run sees the same Python.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PYTHON") and k != "TIMEWARP_CLOCK"}
    env.update(
        PATH=f"{bin_folder}{os.pathsep}{env.get('PATH', os.defpath)}",
        PYTHONUNBUFFERED="1",            # print order as in a terminal
        PYTHONDONTWRITEBYTECODE="1",
        LC_ALL="C.UTF-8",
        PYTHONPATH=str(TIMEWARP_FOLDER),
        TIMEWARP=str(timewarp),
    )
    if clock:
        env["TIMEWARP_CLOCK"] = str(clock)
    return env


# What one command (and each process it starts) may use: plenty for any
# exercise, and a stop for a learner's runaway loop, memory leak or file that
# fills the disk. The limits are inherited by the command's children.
LIMITS = {
    resource.RLIMIT_CPU: 120,                    # seconds of CPU per process
    resource.RLIMIT_AS: 2 * 1024 ** 3,           # bytes of memory per process
    resource.RLIMIT_FSIZE: 100 * 1024 ** 2,      # bytes in any one file it writes
}
# A shell ignores SIGINT for the jobs it starts in the background, and children
# inherit that; a terminal's ^C reaches programs that have the default action.
SIGINT_IGNORED = signal.getsignal(signal.SIGINT) == signal.SIG_IGN


def prepare_child():
    """Runs in each command's process before bash starts."""
    if SIGINT_IGNORED:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    for limit, value in LIMITS.items():
        resource.setrlimit(limit, (value, value))
LIVE_GROUPS = set()           # process groups to kill if the tests end early


@contextlib.contextmanager
def ctrl_c_held():
    """Hold a Ctrl-C back until the block ends. With a preexec_fn, Python runs
    its at-fork callbacks (logging has one) in the parent after the fork, and a
    KeyboardInterrupt raised in one is printed and dropped: the run would go
    on. Only the main thread runs signal handlers, so only it needs holding."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pressed = []
    handler = signal.signal(signal.SIGINT, lambda number, frame: pressed.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, handler)
    if pressed and callable(handler):
        handler(signal.SIGINT, pressed[0])


@atexit.register
def stop_live_groups():
    for group in list(LIVE_GROUPS):
        stop_group(group)


class Process:
    """A shell command in a process group of its own; a thread collects its lines."""

    def __init__(self, command, folder, env):
        with ctrl_c_held():
            self.popen = subprocess.Popen(
                ["bash", "-c", command], cwd=folder, env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                start_new_session=True,      # its own process group, to signal it whole
                preexec_fn=prepare_child)
            LIVE_GROUPS.add(self.popen.pid)
        self.lines = []                  # as printed, each with its "\n"
        self.exited = False              # and all its output read
        self.changed = threading.Condition()
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()

    def read(self):
        for raw in self.popen.stdout:
            with self.changed:
                self.lines.append(raw.decode("utf-8", errors="replace"))
                self.changed.notify_all()
        self.popen.wait()
        with self.changed:
            self.exited = True
            self.changed.notify_all()

    def wait_until(self, ready, timeout):
        """Wait until ready(lines, exited) is true; False if it is not after timeout."""
        with self.changed:
            return self.changed.wait_for(lambda: ready(self.lines, self.exited), timeout)

    def printed(self):
        with self.changed:
            return list(self.lines)

    def output(self):
        return "".join(self.printed())

    def interrupt(self):
        signal_group(self.popen.pid, signal.SIGINT)

    def stop(self):
        """Kill whatever the command left running; wait for its last output."""
        stop_group(self.popen.pid)
        self.reader.join(SYNC_TIMEOUT)
        self.popen.stdout.close()
        LIVE_GROUPS.discard(self.popen.pid)


def run(command, folder, timewarp=TIMEWARP_FACTOR, timeout=COMMAND_TIMEOUT, clock=None):
    """Run one shell command in folder as the reader would: (exit status, output).

    clock: a file made by new_clock, for a time warp shared with other runs.
    """
    with tempfile.TemporaryDirectory() as bin_folder:
        process = Process(command, folder,
                          child_environment(link_python(bin_folder), timewarp, clock))
        try:
            exited = process.wait_until(lambda lines, exited: exited, timeout)
        finally:
            process.stop()
    if not exited:
        raise TranscriptError(
            None, f"`$ {command}` was still running after {timeout} s, so it was stopped; "
            f"it had printed", process.output(), kind=TIMEOUT, command=command)
    return process.popen.returncode, process.output()


def signal_group(group, number):
    try:
        os.killpg(group, number)
    except ProcessLookupError:
        pass


def stop_group(group):
    signal_group(group, signal.SIGKILL)

