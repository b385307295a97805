"""Run the console blocks of guide.md and compare what they print.

Sybil calls `evaluate` for each block (see guide_plugin.py); other tests call
`check_block` or `run` directly. CONTRIBUTING.md describes the rules in prose;
keep the two in step.
"""

import difflib
import doctest
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from sybil import Region

import fences

ROOT = Path(__file__).resolve().parent.parent
TIMEWARP_FOLDER = Path(__file__).resolve().parent / "timewarp"
TIMEWARP_FACTOR = 20          # sleeps run 20 times faster; clocks still agree
COMMAND_TIMEOUT = 60          # real seconds for one command
KNOWN_ATTRIBUTES = {"edit"}   # each one is documented in CONTRIBUTING.md

# A command naming ex02_jobs.py, or the module ex02_jobs, belongs to that exercise.
EXERCISE = re.compile(r"\bex\d\d_\w+")

# Files that running the exercises leaves behind: a transcript starts without them.
LEFTOVERS = shutil.ignore_patterns(
    ".*", "__pycache__", "*.db", "*.db-wal", "*.db-shm", "outbox.txt")

TIMING = re.compile(r"(?<![\w.])(?P<number>\d+(?:\.\d+)?)(?P<space> ?)(?P<unit>ms|s)\b")
PID = re.compile(r"\b(?:pid|PID)[ =](?P<number>\d+)")

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
    expected: list = field(default_factory=list)


# ---------------------------------------------------------------- reading

def commands_of(block):
    commands = []
    for offset, text in enumerate(block.source.splitlines(), start=1):
        if text.startswith("$ "):
            commands.append(Command(block.line + offset, text[2:]))
        elif commands:
            commands[-1].expected.append(text)
        elif text.strip():
            raise TranscriptError(f"{block.where(offset)}: output before the first `$ ` command")
    if not commands:
        raise TranscriptError(f"{block.where()}: console block without a `$ ` command")
    return commands


def exercise_of(block):
    """The exercise file the block's commands name first, or None."""
    for line in block.source.splitlines():
        match = EXERCISE.search(line) if line.startswith("$ ") else None
        if match:
            return match.group() + ".py"
    return None


def exercises_in(blocks):
    return sorted({exercise_of(b) for b in blocks if "console" in b.classes} - {None})


def read_edit(block):
    """edit="FILE: OLD => NEW" -> (FILE, OLD, NEW)"""
    spec = block.attributes["edit"]
    file_name, colon, change = spec.partition(": ")
    old, arrow, new = change.partition(" => ")
    if not (colon and arrow and file_name.strip() and old):
        raise TranscriptError(f'{block.where()}: edit="{spec}" is not of the form FILE: OLD => NEW')
    return file_name.strip(), old, new


# ---------------------------------------------------------------- running

def copy_sources(source_folder, folder):
    shutil.copytree(source_folder, folder, ignore=LEFTOVERS)


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


def child_environment(bin_folder, timewarp):
    # Drop the caller's PYTHON* settings so every run sees the same Python.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(
        PATH=f"{bin_folder}{os.pathsep}{env.get('PATH', os.defpath)}",
        PYTHONUNBUFFERED="1",            # print order as in a terminal
        PYTHONDONTWRITEBYTECODE="1",
        LC_ALL="C.UTF-8",
        PYTHONPATH=str(TIMEWARP_FOLDER),
        TIMEWARP=str(timewarp),
    )
    return env


def run(command, folder, timewarp=TIMEWARP_FACTOR, timeout=COMMAND_TIMEOUT):
    """Run one shell command in folder as the reader would: (exit status, output)."""
    with tempfile.TemporaryDirectory() as bin_folder:
        # python3 is the interpreter running the tests. Called through a
        # symlink it does not see the virtualenv, just as the reader's doesn't.
        os.symlink(sys.executable, Path(bin_folder, "python3"))
        process = subprocess.Popen(
            ["bash", "-c", command], cwd=folder, env=child_environment(bin_folder, timewarp),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True)      # its own process group, to stop it whole
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_group(process.pid)
            output, _ = process.communicate()
            raise TranscriptError(
                f"`$ {command}` was still running after {timeout} s, so it was stopped; "
                f"it had printed:\n{output.decode(errors='replace')}") from None
        finally:
            stop_group(process.pid)      # whatever it left running in the background
    return process.returncode, output.decode("utf-8", errors="replace")


def stop_group(group):
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        pass


# ---------------------------------------------------------------- comparing

def in_seconds(match):
    value = float(match["number"])
    return value / 1000 if match["unit"] == "ms" else value


def close_timing(want, got):
    if want["unit"] != got["unit"]:
        return False
    tolerance = max(0.1 * in_seconds(want), 0.05)
    return abs(in_seconds(got) - in_seconds(want)) <= tolerance + 1e-9


def any_pid(want, got):
    return True


def normalise(expected, actual):
    """Give the actual output the expected's pids, and its timings where close.

    Tokens are paired in order, and only when both texts have as many.
    Only the numbers change, so a different unit or spacing still shows.
    """
    changes = []
    for pattern, acceptable in ((TIMING, close_timing), (PID, any_pid)):
        wanted, got = list(pattern.finditer(expected)), list(pattern.finditer(actual))
        if len(wanted) == len(got):
            changes += [(g.start("number"), g.end("number"), w["number"])
                        for w, g in zip(wanted, got) if acceptable(w, g)]
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


def short_diff(expected_lines, actual_lines, limit=30):
    diff = list(difflib.unified_diff(
        expected_lines, actual_lines, "expected (guide)", "actual", lineterm="", n=2))
    if len(diff) > limit:
        diff = diff[:limit] + [f"[{len(diff) - limit} more lines of diff]"]
    return "\n".join(diff)


# ---------------------------------------------------------------- a whole block

def check_block(block, source_folder):
    """None if the block prints what it shows, else a message saying where and how not."""
    try:
        run_block(block, Path(source_folder))
    except TranscriptError as error:
        return str(error)
    return None


def run_block(block, source_folder):
    unknown = sorted(set(block.attributes) - KNOWN_ATTRIBUTES)
    if unknown:
        raise TranscriptError(f"{block.where()}: unknown console attribute {', '.join(unknown)}")
    commands = commands_of(block)
    exercise = exercise_of(block)
    if exercise and not (source_folder / exercise).is_file():
        raise TranscriptError(f"{block.where()}: {exercise} is missing from {source_folder}")
    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp, "work")
        copy_sources(source_folder, folder)
        if "edit" in block.attributes:
            try:
                apply_edit(folder, *read_edit(block))
            except EditError as error:
                raise TranscriptError(f"{block.where()}: {error}") from None
        for number, command in enumerate(commands, start=1):
            where = f"{block.path}:{command.line}: `$ {command.text}`"
            if len(commands) > 1:
                where += f" (command {number} of {len(commands)})"
            try:
                _, output = run(command.text, folder)
            except TranscriptError as error:
                raise TranscriptError(f"{block.path}:{command.line}: {error}") from None
            expected = "\n".join(command.expected)
            want, got = tidy(expected), tidy(normalise(expected, output))
            if not output_matches(want, got):
                raise TranscriptError(
                    f"{where} printed something else:\n{short_diff(want, got)}")


# ---------------------------------------------------------------- Sybil

def parse_console_blocks(document):
    """Sybil parser: one Region per console block."""
    for block in fences.blocks_in(document, Path(document.path).name):
        if "console" in block.classes:
            yield Region(block.start, block.end, parsed=block, evaluator=evaluate)


def evaluate(example):
    return check_block(example.parsed, example.namespace["source_folder"])
