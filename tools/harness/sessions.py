"""Run the console blocks of guide.md as sessions, and check what they print.

Blocks run in sessions: the blocks sharing a `session` attribute run as one
scenario, in document order, in one folder, with one clock; a block without
one is a session of its own. A session has terminals; each runs one command
at a time (sandbox.Process), while the harness reads what every command
prints and waits, at the end of each block and before each ^C, until it has
printed what the guide shows so far (compare.py).

How a session runs. It gets a fresh temporary folder (in /dev/shm where the
machine has it) holding a copy of the folder under test, code/ or the
learner's with --work (sandbox.copy_sources: for a session whose commands
name an exercise, code/ with the learner's copy of that one file). Hidden
files, __pycache__ and the files a run leaves behind (*.db, *.db-wal,
*.db-shm, outbox.txt) are not copied, so every session starts from a clean
folder; the files its commands write stay there for its later blocks. Each
command runs in that folder with `bash -c` (sandbox.Process: a process
group of its own, no standard input, the environment and limits that
sandbox.py describes), or, after a `$ cd DIR` in the same terminal, in DIR,
as a terminal would (Chapter 9 goes into capstone/ once and stays there).
Its exit status is not checked; what it prints is. The session's clock file
(TIMEWARP_CLOCK) lies outside the copy, so that an `ls` does not show it. A
session whose first block says database="postgresql" gets a private server
(postgres.py), whose address its commands find in $DATABASE, with psycopg
on their PYTHONPATH. When a block fails, or the run is cut short, every
process the session started is stopped.

At a person's pace (pace=1, or pace=3 for a slow person), the harness also
pauses before each command and each ^C, as a person at the keyboard would,
on the session's virtual clock.

In update mode (`pytest --update-transcripts`), a command that prints other
lines than the guide shows does not fail: the session goes on, and once the
command has ended, update.py works out how its lines in the guide should
read. A session that ran to its end hands those edits over (UPDATES).

Sybil finds the blocks with `parse_console_blocks` and calls `evaluate` for
each (see plugin.py), keeping running sessions in the document's namespace;
other tests call `check_block` or `check_text` directly. CONTRIBUTING.md
describes the rules in prose; keep the two in step.
"""

import contextlib
import os
import re
import shutil
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from sybil import Document, Region

from tools import guide

from . import postgres, sandbox, update
from .catalogue import exercise_of
from .compare import (compared, lines_shown, may_still_show, printed_not_shown, short_diff,
                      shows_so_far, tidy)
from .results import TIMEOUT, kind_of_printed
from .sandbox import (SCRATCH, TIMEWARP_FACTOR, EditError, Failure, Process, TranscriptError,
                      apply_edit, child_environment, copy_sources, link_python, new_clock,
                      pause)

EXIT_GRACE = 3                # real seconds a command that went wrong gets to finish
INTERRUPT = "^C"              # how a terminal shows Ctrl-C
SESSIONS = "console sessions" # key of the running sessions in a Sybil namespace
UPDATES = "transcript updates"  # key of the edits of the sessions that ended, in update mode
# In update mode, a command whose lines differ from the guide's is taken to
# have printed what stands for them once it printed as many, or once it
# printed nothing more for about twice this long (real seconds).
QUIET = 0.5
# A person's pauses, in seconds of the programs' clock, before a command or a
# ^C: typing after reading, and first switching windows when the last thing
# they typed went to another terminal. Times pace; pace 0 is the machine's.
PAUSE_SAME_TERMINAL = 0.5
PAUSE_OTHER_TERMINAL = 1.5

# `$ cd capstone`: the terminal's later commands run in that folder.
CHANGE_FOLDER = re.compile(r"cd (?P<folder>[\w.-]+)")


@dataclass
class Command:
    line: int                    # its line in the document
    text: str                    # without the leading "$ "
    expected: list = field(default_factory=list)   # what the guide shows, ^C marks taken off
    at: str = ""                 # "guide.md:LINE"
    label: str = ""              # "`$ TEXT`", and which one it is, for messages
    terminal: str = "1"
    timings: str = None          # "vary" or "late": see compare.close_timing
    process: "Process" = None
    pieces: list = field(default_factory=list)   # where its lines are in the guide (update.Piece)
    shown_up_to: int = 0         # printed lines that stand for the guide's, at the last wait

    def new_piece(self, block, offset, prefix=""):
        self.pieces.append(update.Piece(block, offset, len(self.expected), self.shown_up_to,
                                        prefix))

    @property
    def where(self):
        return f"{self.at}: {self.label}"


@dataclass
class ConsoleBlock(guide.Block):
    """A console block that knows the blocks of its session (itself included)."""
    session_blocks: list = field(default_factory=list, repr=False, compare=False)


# ---------------------------------------------------------------- reading

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
        raise TranscriptError(block.where(), f'edit="{spec}" is not of the form FILE: OLD => NEW')
    return file_name.strip(), old, new


def read_timings(block):
    """What the block says of its timings: None, "vary" or "late"."""
    value = block.attributes.get("timings")
    if value not in (None, "vary", "late"):
        raise TranscriptError(block.where(), f'timings="{value}" should be timings="vary" '
                                             f'or timings="late"')
    return value


def read_timewarp(block):
    factor = block.attributes.get("timewarp", str(TIMEWARP_FACTOR))
    try:
        if float(factor) > 0:
            return factor
    except ValueError:
        pass
    raise TranscriptError(block.where(), f'timewarp="{factor}" is not a positive number')



# ---------------------------------------------------------------- a session

class Session:
    """Blocks run as one scenario: one folder, one clock, its terminals."""

    def __init__(self, blocks, source_folder, pace=0, updating=False):
        self.blocks = blocks             # in document order
        self.updating = updating         # rewrite the guide's lines instead of failing
        self.edits = []                  # in update mode: how the guide's lines should read
        self.name = blocks[0].attributes.get("session")
        self.source_folder = Path(source_folder)
        self.pace = pace                 # 0: the machine's; 1: a quick person's
        self.temp = None                 # made when the first block runs, with:
        self.folder = None               #   the copy of the exercise folder
        self.env = None                  #   the commands' environment
        self.clock = None                #   its clock file, and the warp's factor
        self.factor = None
        self.server = contextlib.ExitStack()   # a PostgreSQL server, if it asked for one
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
            raise TranscriptError(first.where(),
                                  f"{exercise} is missing from {self.source_folder}")
        timewarp = read_timewarp(first)
        self.factor = float(timewarp)
        self.temp = Path(tempfile.mkdtemp(prefix="transcript-", dir=SCRATCH))
        self.folder = self.temp / "work"
        copy_sources(self.source_folder, self.folder, exercise)
        (self.temp / "bin").mkdir()
        # Outside the work folder, so that `ls` in a transcript does not show them.
        self.clock = new_clock(self.temp / "clock")
        self.env = child_environment(link_python(self.temp / "bin"), timewarp, self.clock)
        if "database" in first.attributes:
            self.env["DATABASE"] = self.start_database(first)

    def start_database(self, first):
        """A private PostgreSQL server for the session; its address, which
        the commands find in $DATABASE, as a reader's shell has it."""
        if first.attributes["database"] != "postgresql":
            raise TranscriptError(first.where(), f'database="{first.attributes["database"]}"'
                                  f' is not a database the harness can start; "postgresql" is')
        try:
            address = self.server.enter_context(postgres.server(fsync="off"))
        except postgres.Unavailable as error:
            raise TranscriptError(first.where(), f"this block needs a PostgreSQL server,"
                                  f" and none could be started: {error}") from None
        packages = postgres.reader_packages(self.temp / "packages")
        self.env["PYTHONPATH"] += f"{os.pathsep}{packages}"
        return address

    def close(self):
        for command in self.started:
            command.process.stop()
        self.server.close()
        if self.temp:
            shutil.rmtree(self.temp, ignore_errors=True)

    def run(self, block):
        """Run one block: start its commands, send its ^C, wait for its output."""
        unknown = sorted(set(block.attributes) - guide.CONSOLE_ATTRS)
        if unknown:
            raise TranscriptError(block.where(),
                                  f"unknown console attribute {', '.join(unknown)}")
        for name in ("timewarp", "database"):
            if name in block.attributes and block is not self.blocks[0]:
                raise TranscriptError(block.where(), f"{name} belongs on the session's first "
                                                     f"block, {self.blocks[0].where()}")
        lines = block.source.splitlines()
        if not any(line.strip() for line in lines):
            raise TranscriptError(block.where(), "console block without a `$ ` command")
        if self.temp is None:
            self.open()
        if "edit" in block.attributes:
            try:
                apply_edit(self.folder, *read_edit(block))
            except EditError as error:
                raise TranscriptError(block.where(), str(error)) from None

        terminal = block.attributes.get("terminal", "1")
        commands_here = sum(line.startswith("$ ") for line in lines)
        number = 0
        for offset, text in enumerate(lines, start=1):
            running = self.terminals.get(terminal)
            if text.startswith("$ "):
                number += 1
                self.start(self.command(block, offset, text[2:], terminal, number, commands_here))
                self.terminals[terminal].new_piece(block, offset + 1)
            elif running is None:
                if text.strip():
                    raise TranscriptError(block.where(offset), "output before the first `$ ` "
                                          "command" + self.nothing_running(terminal))
            elif text.startswith(INTERRUPT):
                self.wait_for_output(running, block.where(offset))
                self.pause_before_typing(terminal)
                running.process.interrupt()
                running.new_piece(block, offset, prefix=INTERRUPT)
                running.expected.append(text[len(INTERRUPT):])
            else:
                if running.pieces[-1].block is not block:    # it goes on from an earlier block
                    running.new_piece(block, offset)
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
                       terminal=terminal, timings=read_timings(block))

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
        if self.updating:
            return self.wait_to_update(command, where)
        expected = list(command.expected)
        timings = command.timings

        def settled(lines, exited):      # no need to wait for more lines
            return (exited or shows_so_far(expected, lines, timings)
                    or not may_still_show(expected, lines, timings))

        command.process.wait_until(settled, sandbox.SYNC_TIMEOUT)
        printed = command.process.printed()
        if shows_so_far(expected, printed, timings):
            return
        went_wrong = not may_still_show(expected, printed, timings)
        if went_wrong:                   # let it finish, if it will, so the diff shows it all
            command.process.wait_until(lambda lines, exited: exited, EXIT_GRACE)
            printed = command.process.printed()
        want, got, _ = compared(expected, printed, timings)
        if command.process.exited:
            raise printed_something_else(command, want, got)
        said = f"{command.label} (from {command.at})"
        if went_wrong:
            raise printed_other_lines(
                where, f"{said} printed something else than the guide shows up to here",
                command, want, got)
        raise TranscriptError(where, f"{said} had not printed, after {sandbox.SYNC_TIMEOUT} s, "
                                     f"what the guide shows up to here",
                              short_diff(want, got), kind=TIMEOUT, command=command.text)

    def wait_to_update(self, command, where):
        """In update mode: wait as wait_for_output does while the command's
        lines may still become what the guide shows. Once they cannot, wait
        until it has printed as many lines as the guide shows so far (with no
        `...` that could stand for more), or nothing more for a while. What it
        printed until then goes with the guide's lines up to here."""
        expected, timings = list(command.expected), command.timings
        shown = tidy("\n".join(expected))
        as_many = None if "..." in shown else len(shown)

        def differs(lines):
            return not may_still_show(expected, lines, timings)

        def settled(lines, exited):
            return (exited or shows_so_far(expected, lines, timings)
                    or as_many is not None and len(lines) >= as_many and differs(lines))

        seen, waited = None, 0
        while not command.process.wait_until(settled, QUIET):
            printed, waited = command.process.printed(), waited + QUIET
            if len(printed) == seen and differs(printed):
                break                    # it printed nothing more
            if waited >= sandbox.SYNC_TIMEOUT:
                problem = ("kept printing other lines than the guide shows" if differs(printed)
                           else "had not printed what the guide shows up to here")
                raise TranscriptError(where, f"{command.label} (from {command.at}) {problem}, "
                                             f"after {sandbox.SYNC_TIMEOUT} s",
                                      kind=TIMEOUT, command=command.text)
            seen = len(printed)
        printed = command.process.printed()
        count = lines_shown(expected, printed, timings)
        if count is None:                # other lines: as many as the guide shows, or all
            count = len(printed) if as_many is None else min(len(printed), as_many)
        command.shown_up_to = count

    def wait_for_exit(self, command, moment):
        """Wait until the command ends, then compare all it printed with all the guide shows."""
        if not command.process.wait_until(lambda lines, exited: exited, sandbox.EXIT_TIMEOUT):
            last_lines = "".join(command.process.printed()[-10:])
            raise TranscriptError(command.at, f"{command.label} is still running {moment} "
                                  f"({sandbox.EXIT_TIMEOUT} s later); end it with ^C in the "
                                  f"transcript. Its last lines", last_lines,
                                  kind=TIMEOUT, command=command.text)
        want, got, matches = compared(command.expected, command.process.printed(),
                                      command.timings)
        if matches:
            return
        if not self.updating:
            raise printed_something_else(command, want, got)
        try:
            self.edits += update.edits(command, command.process.printed())
        except update.CannotUpdate as error:
            raise printed_other_lines(command.at, f"{command.label} printed something else, "
                                      f"and {error}", command, want, got) from None

    def finish(self):
        moment = "at the end of the session" if self.name else "at the end of the block"
        for command in list(self.terminals.values()):
            self.wait_for_exit(command, moment)


def printed_something_else(command, want, got):
    return printed_other_lines(command.at, f"{command.label} printed something else",
                               command, want, got)


def printed_other_lines(where, claim, command, want, got):
    """The failure of a command that printed got where the guide shows want,
    its kind decided here, from the lines (results.kind_of_printed)."""
    unexpected = printed_not_shown(want, got)
    return TranscriptError(where, claim, short_diff(want, got), kind=kind_of_printed(unexpected),
                           command=command.text, unexpected=unexpected)


def check_in_session(block, namespace):
    """Run a block as the next step of its session; None, or what went wrong
    (a sandbox.Failure: a message that carries its kind, where and command).

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
        session = Session(blocks, namespace["source_folder"], namespace.get("pace", 0),
                          namespace.get("update_transcripts", False))
        if name:
            sessions[name] = session
    else:
        session = sessions.get(name)
        if session and session.failed_at:
            return Failure(block.where(), f'session "{name}" already failed at '
                                          f'{session.failed_at}', failed_earlier=session.failed_at)
        if session is None or session.blocks_run != index:
            return Failure(block.where(), f'this block continues session "{name}", whose earlier '
                                          f"blocks did not all run before it; run the whole "
                                          f"session, from its first block at {blocks[0].where()}")
    last = block is blocks[-1]
    try:
        session.run(block)
        if last:
            session.finish()
            namespace.setdefault(UPDATES, []).extend(session.edits)
    except TranscriptError as error:
        session.failed_at = block.where()
        return error.failure
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
    return run_text(text, {"source_folder": Path(source_folder), "pace": pace}, only)


def updated_text(text, source_folder):
    """Run a guide's console blocks in update mode, as `pytest
    --update-transcripts` does: (the text with the blocks whose output
    changed rewritten, their fence lines in it, {fence line: None or message})."""
    namespace = {"source_folder": Path(source_folder), "update_transcripts": True}
    results = run_text(text, namespace)
    return (*update.applied(text, namespace.get(UPDATES, [])), results)


def run_text(text, namespace, only=None):
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
              for block in guide.blocks(document.text, Path(document.path).name)
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
