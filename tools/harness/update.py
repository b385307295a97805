"""The update mode: `pytest guide.md --update-transcripts` (`make transcripts`,
which runs it with -n $(TEST_WORKERS)) rewrites each console block whose
commands printed something else, for a maintainer to review as a `git diff`.
Every block runs against code/ as in `make check`; with --work the option is
refused (plugin.py): only code/ writes the guide.

A block changes only where the output really changed (compare.py's
`brought_up_to_date`): a line that still matches stays as the guide has it,
its pids, its close timings and a `...` inside it; a changed line keeps the
guide's timings where they are close; a `...` line stays where it can still
stand for lines, and the lines it no longer covers are written out. A block
whose commands all print what it shows stays byte for byte.

A command's lines in the guide come in pieces (Piece): after its `$ ` line,
after each ^C, and in each later block that goes on with its output. The
session (sessions.py) notes, at each wait, how many printed lines stand for
the guide's lines so far; so once the command has ended, each piece is
brought up to date with the lines printed in its stretch (compare.py keeps
what still matches as the guide has it). While a command's lines may still
become what the guide shows, the session waits as in `make check`; once
they cannot, it goes on (to the ^C, or to the next block) when the command
has printed as many lines as the guide shows up to there (unless a `...`
could stand for more), or has printed nothing more for about a second
(twice sessions.QUIET). So a change that adds or removes lines of a command
that runs across blocks or ^Cs may put them on the other side of a
boundary. Where the new lines cannot be split so that the block would
pass, the block fails (CannotUpdate), and so does a block the update would
leave with no lines.

A block that fails for any other reason (a command still running at the
end, a wrong attribute, a wait that times out) fails as in `make check`,
and its session rewrites nothing. That includes a command that is still
running and no longer prints the last lines the guide shows before a ^C or
a block's end: the session cannot tell it from a slow one, so it waits
SYNC_TIMEOUT (30 s) and fails.

The edits say which lines of the guide change, and how; they travel to the
process that reports (with xdist, the controller, in the reports' user
properties), which rewrites the guide once, at the end, as a new file put
in place of the old one, so it is never half written; and only if nobody
changed it during the run (else: "guide.md changed on disk during the run;
nothing rewritten", and the run fails). A run cut short (Ctrl-C) rewrites
nothing. The run ends with `rewrote guide.md:LINE` for each block rewritten
(its fence, in the new file), or `no transcript changed`.
"""

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from .compare import brought_up_to_date, compared, normalise

EDITS = "transcript edits"       # the user property that carries a block's edits
# How a run that went through its blocks ends; after Ctrl-C, or pytest's own
# internal error, the guide is left alone.
FINISHED = (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)


class CannotUpdate(Exception):
    """A command's new lines cannot be written back where the guide shows them."""


class Refused(Exception):
    """The guide is not rewritten: it is not the text the run read."""


@dataclass
class Piece:
    """A stretch of a command's lines in the guide, in one block."""
    block: object                # the guide.Block it is in
    offset: int                  # its first line, counted from the block's fence
    expected_from: int           # that line's index in the command's expected lines
    printed_from: int            # the first printed line that goes with it
    prefix: str = ""             # "^C" when it starts at a Ctrl-C


# ---------------------------------------------------------------- a command's edits

def edits(command, printed):
    """How the guide's lines of a command that has ended should read: an
    edit for each piece that changes. Raises CannotUpdate."""
    old = split(command.expected, [piece.expected_from for piece in command.pieces])
    actual = "".join(printed)
    lines = normalise("\n".join(command.expected), actual, command.timings).split("\n")
    if actual.endswith("\n"):
        lines.pop()                          # the empty text after the last line break
    starts = running_max([piece.printed_from for piece in command.pieces])
    segments = [[line.rstrip() for line in segment] for segment in split(lines, starts)]
    segments[-1] = trimmed(segments[-1])
    new = [brought_up_to_date(was, now, command.timings) for was, now in zip(old, segments)]
    for choice in (new, segments):           # as little changed as can be; else as printed
        pieces = [ctrl_c_line(piece, shown) for piece, shown in zip(command.pieces, choice)]
        if compared([line for shown in pieces for line in shown], printed, command.timings)[2]:
            return [edit_of(piece, was, now)
                    for piece, was, now in zip(command.pieces, old, pieces) if was != now]
    raise CannotUpdate("its new lines cannot be split between its blocks and ^Cs as the "
                       "guide's are; bring this transcript up to date by hand")


def split(lines, starts):
    return [lines[start:end] for start, end in zip(starts, [*starts[1:], None])]


def running_max(numbers):
    return [max(numbers[:count + 1]) for count in range(len(numbers))]


def trimmed(lines):
    """Without blank lines at the end, which the comparison ignores."""
    while lines and not lines[-1]:
        lines = lines[:-1]
    return lines


def ctrl_c_line(piece, lines):
    """A ^C line is there even when nothing is printed after it."""
    if piece.prefix and not lines:
        return [""]
    return lines


def edit_of(piece, old, new):
    block = piece.block
    if not piece.prefix and piece.offset == 1 and len(old) == len(block.body) and not new:
        raise CannotUpdate(f"{block.where()} would be left empty")
    return {"block": block.line, "line": block.line + piece.offset, "indent": block.indent,
            "old": as_written(piece, old), "new": as_written(piece, new)}


def as_written(piece, lines):
    return [piece.prefix + lines[0], *lines[1:]] if piece.prefix else list(lines)


# ---------------------------------------------------------------- the guide

def applied(text, edits):
    """(text with the edits made, the fence lines of the blocks they changed, in it)."""
    lines = text.splitlines(keepends=True)
    for edit in sorted(edits, key=lambda edit: edit["line"], reverse=True):
        first, count = edit["line"] - 1, len(edit["old"])
        if [line.rstrip() for line in lines[first:first + count]] != \
                [indented(edit["indent"], line).rstrip() for line in edit["old"]]:
            raise Refused(f"guide.md:{edit['line']}: the guide does not hold there the lines "
                          f"the run read; nothing rewritten")
        lines[first:first + count] = [indented(edit["indent"], line) + "\n"
                                      for line in edit["new"]]
    return "".join(lines), sorted({moved(edit["block"], edits) for edit in edits})


def indented(indent, line):
    return indent + line if line else ""


def moved(line, edits):
    """Where a line of the guide is once the edits above it are made."""
    return line + sum(len(edit["new"]) - len(edit["old"]) for edit in edits if edit["line"] < line)


def rewrite(path, original, edits):
    """Make the edits in the guide at path, all at once (a new file put in
    its place), and return the fence lines of the blocks rewritten. Refused
    if the guide is no longer the original text the run read."""
    path = Path(path)
    text = path.read_bytes().decode("utf-8")
    if text != original:
        raise Refused(f"{path.name} changed on disk during the run; nothing rewritten")
    new_text, blocks = applied(text, edits)
    if new_text != text:
        temporary = path.with_name(f".{path.name}.updating")
        temporary.write_bytes(new_text.encode("utf-8"))
        shutil.copymode(path, temporary)
        os.replace(temporary, path)
    return blocks


class Updater:
    """Registered in the process that reports, with --update-transcripts: it
    gathers the edits the reports carry and rewrites the guide at the end."""

    def __init__(self, path):
        self.path = Path(path)
        self.original = self.path.read_bytes().decode("utf-8")
        self.edits = []
        self.said = []

    def pytest_runtest_logreport(self, report):
        for name, value in report.user_properties:
            if name == EDITS:
                self.edits += value

    def pytest_sessionfinish(self, session, exitstatus):
        if exitstatus not in FINISHED:
            self.said = [f"the run did not finish ({pytest.ExitCode(exitstatus).name}): "
                         f"nothing rewritten"]
            return
        try:
            blocks = rewrite(self.path, self.original, self.edits)
        except Refused as error:
            self.said = [str(error)]
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
            return
        self.said = [f"rewrote {self.path.name}:{line}" for line in blocks] \
            or ["no transcript changed"]

    def pytest_terminal_summary(self, terminalreporter):
        terminalreporter.section("transcripts")
        for line in self.said:
            terminalreporter.write_line(line)
