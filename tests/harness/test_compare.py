"""compare.py: the guide's pids and close timings given to the output, and
line-by-line comparison with doctest's `...`."""

import pytest

from tools.harness import compare

normalise = compare.normalise


# ---------------------------------------------------------------- normalisation

@pytest.mark.parametrize("expected, actual", [
    ("took 2.00 s", "took 2.13 s"),           # within 10%
    ("took 6.00 s", "took 5.41 s"),
    ("[ 0.00 s] go", "[ 0.04 s] go"),         # within the 0.05 s floor
    ("after 0.029 ms", "after 0.311 ms"),     # 0.05 s is 50 ms
    ("6.01s", "6.02s"),
])
def test_close_timings_take_the_expected_value(expected, actual):
    assert normalise(expected, actual) == expected


@pytest.mark.parametrize("expected, actual", [
    ("took 2.00 s", "took 2.21 s"),           # beyond 10%
    ("[ 0.00 s] go", "[ 0.06 s] go"),         # beyond the floor
    ("after 0.029 ms", "after 51.000 ms"),
    ("took 2.00 s", "took 2000 ms"),          # units must match
    ("a 1.00 s, b 2.00 s", "a 1.00 s"),       # different counts: no pairing
])
def test_other_timings_are_left_alone(expected, actual):
    assert normalise(expected, actual) == actual


def test_only_the_number_is_replaced():
    assert normalise("took 6.01s", "took 6.00 s") == "took 6.01 s"


def test_timings_pair_in_order():
    assert normalise("2.00 s then 4.00 s", "2.01 s then 4.02 s") == "2.00 s then 4.00 s"
    assert normalise("2.00 s then 4.00 s", "4.01 s then 2.01 s") == "4.01 s then 2.01 s"


def test_timings_that_vary_take_the_expected_value_in_the_same_unit():
    assert normalise("in 1.0 s", "in 2.7 s", timings="vary") == "in 1.0 s"
    assert normalise("in 1.0 s", "in 950 ms", timings="vary") == "in 950 ms"


@pytest.mark.parametrize("actual, close", [
    ("[ 0.24 s] go", True),                  # started late, beside four CPU hogs
    ("[ 0.50 s] go", True),
    ("[ 0.56 s] go", False),                 # beyond the 0.5 s, and the 0.05 s floor
    ("[ 2.00 s] go", False),                 # two seconds late is a wrong program
])
def test_timings_that_may_be_late(actual, close):
    assert (normalise("[ 0.00 s] go", actual, timings="late") == "[ 0.00 s] go") == close
    assert normalise("[ 0.00 s] go", actual) == actual       # without "late", none is close


def test_late_timings_are_never_early():
    assert normalise("[ 2.00 s] go", "[ 1.79 s] go", timings="late") == "[ 1.79 s] go"
    assert normalise("[ 2.00 s] go", "[ 1.81 s] go", timings="late") == "[ 2.00 s] go"


def test_what_is_not_a_timing():
    text = "3 signups (50 bytes) Python 3.11.7 42 seconds 0.5 sec v1.2s"
    assert compare.TIMING.findall(text) == []


def test_pids_take_the_expected_value():
    expected = "worker pid 4242 started\nPID 17 and pid=9"
    assert normalise(expected, "worker pid 31337 started\nPID 5 and pid=123456") == expected
    assert normalise("rapid 5", "rapid 6") == "rapid 6"


def test_pids_pair_by_identity_not_position():
    expected = "worker 7: start\nworker 8: start\nworker 7: done\nworker 8: done"
    # the same two processes, the other way round: each keeps its own number
    assert normalise(expected, "worker 51: start\nworker 60: start\n"
                               "worker 51: done\nworker 60: done") == expected
    swapped = normalise(expected, "worker 51: start\nworker 60: start\n"
                                  "worker 60: done\nworker 51: done")
    assert swapped == "worker 7: start\nworker 8: start\nworker 8: done\nworker 7: done"
    # a `...` may hide some lines: the pids still pair
    assert normalise("worker 7: start\n...\nworker 7: done",
                     "worker 51: start\nworker 51: work\nworker 51: done") == \
        "worker 7: start\nworker 7: work\nworker 7: done"
    # a third process the guide does not show keeps its number, and so fails
    assert normalise("worker 7: a", "worker 51: a\nworker 60: b") == \
        "worker 7: a\nworker 60: b"


# ---------------------------------------------------------------- comparison

def matches(expected, actual):
    return compare.output_matches(compare.tidy(expected), compare.tidy(actual))


@pytest.mark.parametrize("actual", ["a\nz\n", "a\nb\nz\n", "a\nb\nc\nz\n"])
def test_an_ellipsis_line_stands_for_any_number_of_lines(actual):
    assert matches("a\n...\nz\n", actual)


def test_an_ellipsis_line_keeps_lines_whole():
    assert not matches("a\n...\nz\n", "a\nbz\n")
    assert not matches("a\n...\nz\n", "xa\nz\n")
    assert matches("...\nz\n", "z\n") and matches("a\n...\n", "a\n")


def test_ellipsis_inside_a_line():
    assert matches("Python 3...\n", "Python 3.11.7\n")
    assert not matches("Python 3...\n", "Python 2.7.18\n")


def test_trailing_whitespace_and_final_blank_lines_do_not_count():
    assert matches("a\nb\n\n", "a   \nb\n")


def test_columns_matter():
    assert not matches("a  b\n", "a b\n")
    assert not matches("True\n", "1\n")
