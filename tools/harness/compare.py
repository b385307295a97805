"""Whether a command printed what the guide shows.

Transcripts show values exactly as a real run printed them. Before
comparing, the command's actual output is changed in two ways, and no
others, since neither value can be the same from run to run (normalise):

- Timings. A timing (TIMING) is a number followed by an optional space and
  `s` or `ms` as a whole word: `2.00 s`, `6.01s`, `0.029 ms`. If the
  expected and the actual output of a command hold as many timings, they
  are paired in order; if not (a `...` line hiding some, say), none is.
  Where a pair's units match and the actual value is within max(10% of the
  expected value, 0.05 s) of the expected one (0.05 s is 50 ms for values
  in ms), the actual number is replaced by the expected one; with
  timings="late", also when it is later by up to LATE_SECONDS more; with
  timings="vary", whatever the value (close_timing). Only the number
  changes: a different unit or spacing still shows in the diff, and so
  does a value out of tolerance.
- Process ids. A number after `pid`, `PID` or `worker`, then a space or `=`,
  is a process id (PID). They are paired by identity, not position: the
  first distinct pid in the actual output stands for the first distinct pid
  in the expected output, the second for the second, and every occurrence
  is replaced. So one process keeps one number throughout a command's
  output, a `...` may hide some of its lines, and a process the guide does
  not show keeps its own number and fails the comparison.

Then the lines, without trailing spaces or blank lines at the end (tidy),
are compared with doctest.OutputChecker and the ELLIPSIS option only (no
whitespace normalisation): a line that is exactly `...` stands for any
number of lines, none included. CONTRIBUTING.md sums these rules up for a
transcript's writer (§Markup, §Normalisation); keep the two in step.

For the update mode, `brought_up_to_date` writes a command's new output in
the guide's terms: the lines that still match kept as the guide has them.
"""

import difflib
import doctest
import re

TIMING = re.compile(r"(?<![\w.])(?P<number>\d+(?:\.\d+)?)(?P<space> ?)(?P<unit>ms|s)\b")
PID = re.compile(r"\b(?:pid|PID|worker)[ =](?P<number>\d+)")

CHECKER = doctest.OutputChecker()
# ELLIPSIS only; the two DONT_ACCEPT flags switch off doctest's other leniencies.
FLAGS = doctest.ELLIPSIS | doctest.DONT_ACCEPT_TRUE_FOR_1 | doctest.DONT_ACCEPT_BLANKLINE


def in_seconds(match):
    value = float(match["number"])
    return value / 1000 if match["unit"] == "ms" else value


# With timings="late", how much later than the guide shows a timing may be:
# a program that stamps its lines with the time since it started moves all
# of them when a busy machine starts it late (0.24 s, beside four CPU hogs).
LATE_SECONDS = 0.5


def close_timing(want, got, timings=None):
    """timings: None (close: within 10% or 0.05 s), "vary" (any) or "late"
    (close, or later by up to LATE_SECONDS)."""
    if want["unit"] != got["unit"]:
        return False
    if timings == "vary":
        return True
    tolerance = max(0.1 * in_seconds(want), 0.05)
    late = LATE_SECONDS if timings == "late" else 0
    return -tolerance - 1e-9 <= in_seconds(got) - in_seconds(want) <= tolerance + late + 1e-9


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


def close_timings(expected, actual, timings=None):
    """Pair timings in order, when both texts hold as many; keep the close
    ones (see close_timing)."""
    wanted, got = list(TIMING.finditer(expected)), list(TIMING.finditer(actual))
    if len(wanted) != len(got):
        return []
    return [(g.start("number"), g.end("number"), w["number"])
            for w, g in zip(wanted, got) if close_timing(w, g, timings)]


def normalise(expected, actual, timings=None):
    """Give the actual output the expected's pids, and its timings where close
    (see close_timing for what timings="vary" and "late" allow).

    Only the numbers change, so a different unit or spacing still shows.
    """
    changes = close_timings(expected, actual, timings) + same_processes(expected, actual)
    return replaced(actual, changes)


def replaced(text, changes):
    """text with each (start, end, number) change made."""
    for start, end, number in sorted(changes, reverse=True):
        text = text[:start] + number + text[end:]
    return text


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


def compared(expected_lines, printed, timings=None):
    """(want, got, matches): an output as the guide shows it, and as printed."""
    expected = "\n".join(expected_lines)
    want, got = tidy(expected), tidy(normalise(expected, "".join(printed), timings))
    return want, got, output_matches(want, got)


def shows_so_far(expected_lines, printed, timings=None):
    """Whether the first lines printed are the expected ones; "..." takes as few as it can."""
    return lines_shown(expected_lines, printed, timings) is not None


def lines_shown(expected_lines, printed, timings=None):
    """How many of the first lines printed show the expected ones ("..."
    taking as few as it can), or None if no number of them does."""
    # Every expected line but a bare "..." stands for one printed line at least.
    fewest = sum(line != "..." for line in tidy("\n".join(expected_lines)))
    return next((count for count in range(fewest, len(printed) + 1)
                 if compared(expected_lines, printed[:count], timings)[2]), None)


def may_still_show(expected_lines, printed, timings=None):
    """Whether more output could still make the printed lines begin with the expected ones."""
    return any(compared(expected_lines[:count], printed, timings)[2]
               for count in range(len(expected_lines) + 1))


def printed_not_shown(expected_lines, actual_lines):
    """The actual lines that the diff of the two adds (short_diff's `+`
    lines, all of them): those printed that the guide does not show, in order."""
    matcher = difflib.SequenceMatcher(None, expected_lines, actual_lines)
    return [line for tag, _, _, start, end in matcher.get_opcodes()
            if tag in ("replace", "insert") for line in actual_lines[start:end]]


def short_diff(expected_lines, actual_lines, limit=30):
    diff = list(difflib.unified_diff(
        expected_lines, actual_lines, "expected (guide)", "actual", lineterm="", n=2))
    if len(diff) > limit:
        diff = diff[:limit] + [f"[{len(diff) - limit} more lines of diff]"]
    return "\n".join(diff)



# ---------------------------------------------------------------- the update mode

KEEP, SKIP, CHANGE, DROP, ABSORB, ADD = range(6)   # on a tie, the first one wins


def brought_up_to_date(expected_lines, actual_lines, timings=None):
    """The expected lines changed as little as they can to show the actual
    ones (already normalised): a line that still matches stays as the guide
    has it, a `...` line stays where it still stands for lines, and a
    changed line keeps the guide's close timings. Fewest changed lines
    first, then fewest lines behind a `...`."""
    moves = best_moves(expected_lines, actual_lines, timings)
    lines, i, j = [], 0, 0
    while (i, j) in moves:
        move = moves[i, j]
        if move in (KEEP, SKIP):
            lines.append(expected_lines[i])
        elif move == CHANGE:
            lines.append(retimed(expected_lines[i], actual_lines[j], timings))
        elif move == ADD:
            lines.append(actual_lines[j])
        i += move in (KEEP, SKIP, CHANGE, DROP)
        j += move in (KEEP, CHANGE, ABSORB, ADD)
    return lines


def best_moves(expected, actual, timings):
    """{(i, j): the move that brings expected[i:] to actual[j:] at least cost}."""
    cost, moves = {(len(expected), len(actual)): (0, 0)}, {}
    for i in range(len(expected), -1, -1):
        for j in range(len(actual), -1, -1):
            options = [(cost[i + di, j + dj][0] + changes, cost[i + di, j + dj][1] + hidden,
                        move) for move, di, dj, changes, hidden
                       in possible_moves(expected, actual, i, j, timings)]
            if options:
                *cost[i, j], moves[i, j] = min(options)
    return moves


def possible_moves(expected, actual, i, j, timings):
    """(move, lines of expected it takes, lines of actual, changes, hidden lines)"""
    ellipsis = i < len(expected) and expected[i] == "..."
    both = i < len(expected) and j < len(actual)
    if ellipsis:
        yield SKIP, 1, 0, 0, 0
        if j < len(actual):
            yield ABSORB, 0, 1, 0, 1
    elif both:
        if line_matches(expected[i], actual[j], timings):
            yield KEEP, 1, 1, 0, 0
        yield CHANGE, 1, 1, 1, 0
    if i < len(expected) and not ellipsis:
        yield DROP, 1, 0, 1, 0
    if j < len(actual):
        yield ADD, 0, 1, 1, 0


def retimed(expected_line, actual_line, timings=None):
    """The actual line with the expected line's close timings."""
    return replaced(actual_line, close_timings(expected_line, actual_line, timings))


def line_matches(expected_line, actual_line, timings=None):
    return output_matches([expected_line.rstrip()],
                          [retimed(expected_line, actual_line, timings)])
