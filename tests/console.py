"""Run the console blocks of guide.md and compare what they print.

Blocks run in sessions: the blocks sharing a `session` attribute run as one
scenario, in document order, in one folder, with one clock; a block without
one is a session of its own. A session has terminals; each runs one command
at a time, while the harness reads what every command prints and waits, at
the end of each block and before each ^C, until it has printed what the guide
shows so far.

At a person's pace (pace=1, or pace=3 for a slow person), the harness also
pauses before each command and each ^C, as a person at the keyboard would,
on the session's virtual clock.

Sybil calls `evaluate` for each block (see guide_plugin.py), keeping running
sessions in the document's namespace; other tests call `check_block`,
`check_text` or `run` directly. CONTRIBUTING.md describes the rules in prose;
keep the two in step.
"""

import atexit
import difflib
import doctest
import fcntl
import hashlib
import os
import re
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from sybil import Document, Region

import fences

ROOT = Path(__file__).resolve().parent.parent
TIMEWARP_FOLDER = Path(__file__).resolve().parent / "timewarp"
TIMEWARP_FACTOR = 20          # sleeps run 20 times faster; clocks still agree
# Real seconds: how long one command started by run() may take, and how long
# a transcript waits for output, or for an exit. The grader's own tests
# shorten both with COMMAND_TIMEOUT=seconds, to watch a hang being caught.
COMMAND_TIMEOUT = float(os.environ.get("COMMAND_TIMEOUT", 60))
SYNC_TIMEOUT = min(30, COMMAND_TIMEOUT)
EXIT_GRACE = 3                # real seconds a command that went wrong gets to finish
# each one is documented in CONTRIBUTING.md
KNOWN_ATTRIBUTES = {"edit", "session", "terminal", "timewarp", "timings"}
INTERRUPT = "^C"              # how a terminal shows Ctrl-C
SESSIONS = "console sessions" # key of the running sessions in a Sybil namespace
# A person's pauses, in seconds of the programs' clock, before a command or a
# ^C: typing after reading, and first switching windows when the last thing
# they typed went to another terminal. Times pace; pace 0 is the machine's.
PAUSE_SAME_TERMINAL = 0.5
PAUSE_OTHER_TERMINAL = 1.5

# `$ cd capstone`: the terminal's later commands run in that folder.
CHANGE_FOLDER = re.compile(r"cd (?P<folder>[\w.-]+)")

# A command naming ex02_jobs.py, or the module ex02_jobs, belongs to that
# exercise; one that runs chaos.py, to the capstone, named by its main file.
EXERCISE = re.compile(r"\bex\d\d_\w+|\bchaos(?=\.py\b)")
CAPSTONE = "capstone/chaos.py"

# Files that running the exercises leaves behind: a transcript starts without them.
LEFTOVERS = shutil.ignore_patterns(
    ".*", "__pycache__", "*.db", "*.db-wal", "*.db-shm", "outbox.txt")

TIMING = re.compile(r"(?<![\w.])(?P<number>\d+(?:\.\d+)?)(?P<space> ?)(?P<unit>ms|s)\b")
PID = re.compile(r"\b(?:pid|PID|worker)[ =](?P<number>\d+)")

CHECKER = doctest.OutputChecker()
# ELLIPSIS only; the two DONT_ACCEPT flags switch off doctest's other leniencies.
FLAGS = doctest.ELLIPSIS | doctest.DONT_ACCEPT_TRUE_FOR_1 | doctest.DONT_ACCEPT_BLANKLINE


class TranscriptError(Exception):
    """A console block that cannot be run, or prints something else."""


class EditError(ValueError):
    pass


@dataclass
class Command:
    line: int                    # its line in the document
    text: str                    # without the leading "$ "
    expected: list = field(default_factory=list)   # what the guide shows, ^C marks taken off
    at: str = ""                 # "guide.md:LINE"
    label: str = ""              # "`$ TEXT`", and which one it is, for messages
    terminal: str = "1"
    timings_vary: bool = False   # any time it prints matches (timings="vary")
    process: "Process" = None

    @property
    def where(self):
        return f"{self.at}: {self.label}"


@dataclass
class ConsoleBlock(fences.Block):
    """A console block that knows the blocks of its session (itself included)."""
    session_blocks: list = field(default_factory=list, repr=False, compare=False)


# ---------------------------------------------------------------- reading

def exercise_of(block):
    """The exercise file that its session's commands name first, or None."""
    for each in getattr(block, "session_blocks", None) or [block]:
        for line in each.source.splitlines():
            match = EXERCISE.search(line) if line.startswith("$ ") else None
            if match:
                return CAPSTONE if match.group() == "chaos" else match.group() + ".py"
    return None


def exercises_in(blocks):
    """The exercises that blocks name, in the course's order: the capstone last."""
    names = {exercise_of(b) for b in blocks if "console" in b.classes} - {None}
    return sorted(names, key=lambda name: (name == CAPSTONE, name))


def paced(blocks):
    """Whether a session's story could change at a person's pace: whether a
    person types more than once in it (commands and ^Cs), so that a pause
    falls between two of them."""
    typed = [line for block in blocks for line in block.source.splitlines()
             if line.startswith(("$ ", INTERRUPT))]
    return len(typed) > 1


def read_edit(block):
    """edit="FILE: OLD => NEW" -> (FILE, OLD, NEW)"""
    spec = block.attributes["edit"]
    file_name, colon, change = spec.partition(": ")
    old, arrow, new = change.partition(" => ")
    if not (colon and arrow and file_name.strip() and old):
        raise TranscriptError(f'{block.where()}: edit="{spec}" is not of the form FILE: OLD => NEW')
    return file_name.strip(), old, new


def read_timings(block):
    """True when the block says its timings vary: timings="vary"."""
    value = block.attributes.get("timings")
    if value not in (None, "vary"):
        raise TranscriptError(f'{block.where()}: timings="{value}" should be timings="vary"')
    return value == "vary"


def read_timewarp(block):
    factor = block.attributes.get("timewarp", str(TIMEWARP_FACTOR))
    try:
        if float(factor) > 0:
            return factor
    except ValueError:
        pass
    raise TranscriptError(f'{block.where()}: timewarp="{factor}" is not a positive number')


# ---------------------------------------------------------------- running

def copy_sources(source_folder, folder):
    shutil.copytree(source_folder, folder, ignore=LEFTOVERS)


IMPORTED = {}                 # a file's SHA-256 -> None, or why importing it failed


def import_fails(path):
    """None if the Python file at path can be imported, in a child process
    with the usual limits, within COMMAND_TIMEOUT; otherwise what went wrong.
    Tests that import a learner's module call this first, so a file that
    hangs or crashes on import fails those tests at once, each of them,
    instead of hanging the test run. Checked once per file content."""
    path = Path(path)
    key = hashlib.sha256(path.read_bytes()).hexdigest()
    if key not in IMPORTED:
        with tempfile.TemporaryDirectory(dir=SCRATCH) as folder:
            shutil.copy(path, folder)
            try:
                status, output = run(f"python3 -c 'import {path.stem}'", folder)
                IMPORTED[key] = None if status == 0 else \
                    f"{path.name} crashed when imported:\n{output}"
            except TranscriptError as error:
                IMPORTED[key] = f"importing {path.name}: {error}"
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
    does (tests/timewarp/sitecustomize.py): really sleep seconds/factor, then
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


@atexit.register
def stop_live_groups():
    for group in list(LIVE_GROUPS):
        stop_group(group)


class Process:
    """A shell command in a process group of its own; a thread collects its lines."""

    def __init__(self, command, folder, env):
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
            f"`$ {command}` was still running after {timeout} s, so it was stopped; "
            f"it had printed:\n{process.output()}")
    return process.popen.returncode, process.output()


def signal_group(group, number):
    try:
        os.killpg(group, number)
    except ProcessLookupError:
        pass


def stop_group(group):
    signal_group(group, signal.SIGKILL)


# ---------------------------------------------------------------- comparing

def in_seconds(match):
    value = float(match["number"])
    return value / 1000 if match["unit"] == "ms" else value


def close_timing(want, got, vary=False):
    if want["unit"] != got["unit"]:
        return False
    if vary:
        return True
    tolerance = max(0.1 * in_seconds(want), 0.05)
    return abs(in_seconds(got) - in_seconds(want)) <= tolerance + 1e-9


def same_processes(expected, actual):
    """Pair process ids by identity: the first pid the actual output shows
    stands for the first one the expected output shows, and so on, wherever
    they appear. So a `...` may hide some of them, and one process keeps one
    number throughout; a process the guide does not show keeps its own."""
    wanted = list(dict.fromkeys(m["number"] for m in PID.finditer(expected)))
    got = list(dict.fromkeys(m["number"] for m in PID.finditer(actual)))
    standing_for = dict(zip(got, wanted))
    return [(m.start("number"), m.end("number"), standing_for[m["number"]])
            for m in PID.finditer(actual) if m["number"] in standing_for]


def close_timings(expected, actual, vary=False):
    """Pair timings in order, when both texts hold as many; keep the close
    ones, or with vary, all of them."""
    wanted, got = list(TIMING.finditer(expected)), list(TIMING.finditer(actual))
    if len(wanted) != len(got):
        return []
    return [(g.start("number"), g.end("number"), w["number"])
            for w, g in zip(wanted, got) if close_timing(w, g, vary)]


def normalise(expected, actual, timings_vary=False):
    """Give the actual output the expected's pids, and its timings where close
    (or all its timings, when they vary).

    Only the numbers change, so a different unit or spacing still shows.
    """
    changes = close_timings(expected, actual, timings_vary) + same_processes(expected, actual)
    for start, end, number in sorted(changes, reverse=True):
        actual = actual[:start] + number + actual[end:]
    return actual


def tidy(text):
    """Lines without trailing whitespace, and no blank lines at the end."""
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def output_matches(expected_lines, actual_lines):
    # doctest's "..." cannot match less than the line break it stands between.
    # Wrapping every line in line breaks of its own, and leaving a bare "..."
    # unwrapped, lets a "..." line stand for no lines at all.
    want = "".join("..." if line == "..." else f"\n{line}\n" for line in expected_lines)
    got = "".join(f"\n{line}\n" for line in actual_lines)
    return CHECKER.check_output(want, got, FLAGS)


def compared(expected_lines, printed, timings_vary=False):
    """(want, got, matches): an output as the guide shows it, and as printed."""
    expected = "\n".join(expected_lines)
    want, got = tidy(expected), tidy(normalise(expected, "".join(printed), timings_vary))
    return want, got, output_matches(want, got)


def shows_so_far(expected_lines, printed, timings_vary=False):
    """Whether the first lines printed are the expected ones; "..." takes as few as it can."""
    # Every expected line but a bare "..." stands for one printed line at least.
    fewest = sum(line != "..." for line in tidy("\n".join(expected_lines)))
    return any(compared(expected_lines, printed[:count], timings_vary)[2]
               for count in range(fewest, len(printed) + 1))


def may_still_show(expected_lines, printed, timings_vary=False):
    """Whether more output could still make the printed lines begin with the expected ones."""
    return any(compared(expected_lines[:count], printed, timings_vary)[2]
               for count in range(len(expected_lines) + 1))


def short_diff(expected_lines, actual_lines, limit=30):
    diff = list(difflib.unified_diff(
        expected_lines, actual_lines, "expected (guide)", "actual", lineterm="", n=2))
    if len(diff) > limit:
        diff = diff[:limit] + [f"[{len(diff) - limit} more lines of diff]"]
    return "\n".join(diff)


# ---------------------------------------------------------------- a session

class Session:
    """Blocks run as one scenario: one folder, one clock, its terminals."""

    def __init__(self, blocks, source_folder, pace=0):
        self.blocks = blocks             # in document order
        self.name = blocks[0].attributes.get("session")
        self.source_folder = Path(source_folder)
        self.pace = pace                 # 0: the machine's; 1: a quick person's
        self.temp = None                 # made when the first block runs, with:
        self.folder = None               #   the copy of the exercise folder
        self.env = None                  #   the commands' environment
        self.clock = None                #   its clock file, and the warp's factor
        self.factor = None
        self.terminals = {}              # terminal -> the command last started there
        self.folders = {}                # terminal -> its folder, after a `cd`
        self.started = []                # every command, to stop them all at the end
        self.blocks_run = 0
        self.failed_at = None            # "guide.md:LINE" of the block that failed
        self.typed_in = None             # the terminal a person last typed in

    def open(self):
        first = self.blocks[0]
        exercise = exercise_of(first)
        if exercise and not (self.source_folder / exercise).is_file():
            raise TranscriptError(
                f"{first.where()}: {exercise} is missing from {self.source_folder}")
        timewarp = read_timewarp(first)
        self.factor = float(timewarp)
        self.temp = Path(tempfile.mkdtemp(prefix="transcript-", dir=SCRATCH))
        self.folder = self.temp / "work"
        copy_sources(self.source_folder, self.folder)
        (self.temp / "bin").mkdir()
        # Outside the work folder, so that `ls` in a transcript does not show them.
        self.clock = new_clock(self.temp / "clock")
        self.env = child_environment(link_python(self.temp / "bin"), timewarp, self.clock)

    def close(self):
        for command in self.started:
            command.process.stop()
        if self.temp:
            shutil.rmtree(self.temp, ignore_errors=True)

    def run(self, block):
        """Run one block: start its commands, send its ^C, wait for its output."""
        unknown = sorted(set(block.attributes) - KNOWN_ATTRIBUTES)
        if unknown:
            raise TranscriptError(
                f"{block.where()}: unknown console attribute {', '.join(unknown)}")
        if "timewarp" in block.attributes and block is not self.blocks[0]:
            raise TranscriptError(f"{block.where()}: timewarp belongs on the session's first "
                                  f"block, {self.blocks[0].where()}")
        lines = block.source.splitlines()
        if not any(line.strip() for line in lines):
            raise TranscriptError(f"{block.where()}: console block without a `$ ` command")
        if self.temp is None:
            self.open()
        if "edit" in block.attributes:
            try:
                apply_edit(self.folder, *read_edit(block))
            except EditError as error:
                raise TranscriptError(f"{block.where()}: {error}") from None

        terminal = block.attributes.get("terminal", "1")
        commands_here = sum(line.startswith("$ ") for line in lines)
        number = 0
        for offset, text in enumerate(lines, start=1):
            running = self.terminals.get(terminal)
            if text.startswith("$ "):
                number += 1
                self.start(self.command(block, offset, text[2:], terminal, number, commands_here))
            elif running is None:
                if text.strip():
                    raise TranscriptError(f"{block.where(offset)}: output before the first `$ ` "
                                          f"command" + self.nothing_running(terminal))
            elif text.startswith(INTERRUPT):
                self.wait_for_output(running, block.where(offset))
                self.pause_before_typing(terminal)
                running.process.interrupt()
                running.expected.append(text[len(INTERRUPT):])
            else:
                running.expected.append(text)
        if terminal in self.terminals:
            self.wait_for_output(self.terminals[terminal], block.where(len(lines)))

    def command(self, block, offset, text, terminal, number, count):
        label = f"`$ {text}`"
        if self.name:
            label += f" (terminal {terminal})"
        elif count > 1:
            label += f" (command {number} of {count})"
        return Command(block.line + offset, text, at=block.where(offset), label=label,
                       terminal=terminal, timings_vary=read_timings(block))

    def nothing_running(self, terminal):
        return f", and nothing runs in terminal {terminal} of session \"{self.name}\"" \
            if self.name else ""

    def start(self, command):
        previous = self.terminals.get(command.terminal)
        if previous:                     # a terminal runs one command at a time
            self.wait_for_exit(previous, f"when {command.where} is to start")
        self.pause_before_typing(command.terminal)
        folder = self.folders.get(command.terminal, self.folder)
        command.process = Process(command.text, folder, self.env)
        change = CHANGE_FOLDER.fullmatch(command.text)
        if change:                       # as in a terminal: later commands run there
            self.folders[command.terminal] = folder / change["folder"]
        self.terminals[command.terminal] = command
        self.started.append(command)

    def pause_before_typing(self, terminal):
        """At a person's pace, the pause before a command or ^C (none before the first)."""
        if self.pace and self.typed_in is not None:
            seconds = PAUSE_SAME_TERMINAL if terminal == self.typed_in else PAUSE_OTHER_TERMINAL
            pause(self.clock, seconds * self.pace, self.factor)
        self.typed_in = terminal

    def wait_for_output(self, command, where):
        """Wait until the command has printed what the guide shows for it so far."""
        expected = list(command.expected)
        vary = command.timings_vary

        def settled(lines, exited):      # no need to wait for more lines
            return (exited or shows_so_far(expected, lines, vary)
                    or not may_still_show(expected, lines, vary))

        command.process.wait_until(settled, SYNC_TIMEOUT)
        printed = command.process.printed()
        if shows_so_far(expected, printed, vary):
            return
        went_wrong = not may_still_show(expected, printed, vary)
        if went_wrong:                   # let it finish, if it will, so the diff shows it all
            command.process.wait_until(lambda lines, exited: exited, EXIT_GRACE)
            printed = command.process.printed()
        want, got, _ = compared(expected, printed, vary)
        if command.process.exited:
            raise printed_something_else(command, want, got)
        if went_wrong:
            problem = "printed something else than the guide shows up to here"
        else:
            problem = f"had not printed, after {SYNC_TIMEOUT} s, what the guide shows up to here"
        raise TranscriptError(f"{where}: {command.label} (from {command.at}) {problem}:\n"
                              f"{short_diff(want, got)}")

    def wait_for_exit(self, command, moment):
        """Wait until the command ends, then compare all it printed with all the guide shows."""
        if not command.process.wait_until(lambda lines, exited: exited, SYNC_TIMEOUT):
            last_lines = "".join(command.process.printed()[-10:])
            raise TranscriptError(f"{command.where} is still running {moment} ({SYNC_TIMEOUT} s "
                                  f"later); end it with ^C in the transcript. Its last lines:\n"
                                  f"{last_lines}")
        want, got, matches = compared(command.expected, command.process.printed(),
                                      command.timings_vary)
        if not matches:
            raise printed_something_else(command, want, got)

    def finish(self):
        moment = "at the end of the session" if self.name else "at the end of the block"
        for command in list(self.terminals.values()):
            self.wait_for_exit(command, moment)


def printed_something_else(command, want, got):
    return TranscriptError(f"{command.where} printed something else:\n{short_diff(want, got)}")


def check_in_session(block, namespace):
    """Run a block as the next step of its session; None, or what went wrong.

    namespace holds "source_folder", the sessions still running, and
    optionally "pace" (see Session).
    """
    blocks = getattr(block, "session_blocks", None) or [block]
    name = block.attributes.get("session")
    sessions = namespace.setdefault(SESSIONS, {})
    index = next(number for number, each in enumerate(blocks) if each is block)
    if index == 0:
        if name in sessions:
            sessions.pop(name).close()
        session = Session(blocks, namespace["source_folder"], namespace.get("pace", 0))
        if name:
            sessions[name] = session
    else:
        session = sessions.get(name)
        if session and session.failed_at:
            return f"{block.where()}: session \"{name}\" already failed at {session.failed_at}"
        if session is None or session.blocks_run != index:
            return (f"{block.where()}: this block continues session \"{name}\", whose earlier "
                    f"blocks did not all run before it; run the whole session, from its first "
                    f"block at {blocks[0].where()}")
    last = block is blocks[-1]
    try:
        session.run(block)
        if last:
            session.finish()
    except TranscriptError as error:
        session.failed_at = block.where()
        return str(error)
    except BaseException:            # a bug, or Ctrl-C: leave no process behind
        session.failed_at = block.where()
        raise
    finally:
        if last or session.failed_at:
            session.close()
    session.blocks_run += 1
    return None


def close_sessions(namespace):
    """Stop the sessions whose last block did not run (deselected, or the run ended)."""
    for session in namespace.pop(SESSIONS, {}).values():
        session.close()


# ---------------------------------------------------------------- entry points

def check_block(block, source_folder):
    """None if the block prints what it shows, else a message saying where and how not.

    The block runs alone, as `pytest guide.md -k LINE` runs it.
    """
    namespace = {"source_folder": Path(source_folder)}
    try:
        return check_in_session(block, namespace)
    finally:
        close_sessions(namespace)


def check_text(text, source_folder, only=None, pace=0):
    """Run the console blocks of a guide's text as pytest does: {fence line: None or message}.

    only: the fence lines of the blocks to run (as -k selects them); all by default.
    pace: 1 to pause before each command and ^C as a person does; 0, not at all.
    """
    namespace = {"source_folder": Path(source_folder), "pace": pace}
    results = {}
    try:
        for region in parse_console_blocks(Document(text, "guide.md")):
            if only is None or region.parsed.line in only:
                results[region.parsed.line] = check_in_session(region.parsed, namespace)
    finally:
        close_sessions(namespace)
    return results


def parse_console_blocks(document):
    """Sybil parser: one Region per console block, which knows its session."""
    blocks = [ConsoleBlock(**vars(block))
              for block in fences.blocks_in(document, Path(document.path).name)
              if "console" in block.classes]
    sessions = defaultdict(list)
    for block in blocks:
        name = block.attributes.get("session")
        block.session_blocks = sessions[name] if name else [block]
        if name:
            sessions[name].append(block)
    for block in blocks:
        yield Region(block.start, block.end, parsed=block, evaluator=evaluate)


def evaluate(example):
    return check_in_session(example.parsed, example.namespace)
