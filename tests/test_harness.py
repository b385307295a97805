"""The harness itself: normalisation, comparison, the time warp, and proof
that it can fail (a harness that always passes would keep no promise)."""

import re
import shutil
import subprocess
import sys

import pytest

import console
import fences

CODE = console.ROOT / "code"
normalise = console.normalise


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


def test_what_is_not_a_timing():
    text = "3 signups (50 bytes) Python 3.11.7 42 seconds 0.5 sec v1.2s"
    assert console.TIMING.findall(text) == []


def test_pids_take_the_expected_value():
    expected = "worker pid 4242 started\nPID 17 and pid=9"
    assert normalise(expected, "worker pid 31337 started\nPID 5 and pid=123456") == expected
    assert normalise("rapid 5", "rapid 6") == "rapid 6"


# ---------------------------------------------------------------- comparison

def matches(expected, actual):
    return console.output_matches(console.tidy(expected), console.tidy(actual))


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


# ---------------------------------------------------------------- time warp

def run_python(tmp_path, script):
    (tmp_path / "script.py").write_text(script)
    status, output = console.run("python3 script.py", tmp_path)
    assert status == 0, output
    return output


def test_a_warped_sleep_is_quick_but_the_clocks_see_it_all(tmp_path):
    output = run_python(tmp_path, """
import sitecustomize, time
asked = []                                  # what the warp really sleeps
sitecustomize.real_sleep = asked.append
start = [time.time(), time.monotonic(), time.perf_counter(),
         time.time_ns(), time.monotonic_ns(), time.perf_counter_ns()]
time.sleep(2)
end = [time.time(), time.monotonic(), time.perf_counter(),
       time.time_ns() / 1e9, time.monotonic_ns() / 1e9, time.perf_counter_ns() / 1e9]
print(*asked)
for before, after in zip(start[:3] + [n / 1e9 for n in start[3:]], end):
    print(after - before)
""")
    real, *advances = map(float, output.split())
    assert real == 2 / console.TIMEWARP_FACTOR
    assert all(2 <= advance < 2.5 for advance in advances), advances


def test_threads_sleeping_together_share_the_time(tmp_path):
    output = run_python(tmp_path, """
import threading, time
start = time.perf_counter()
sleepers = [threading.Thread(target=time.sleep, args=(1,)) for _ in range(2)]
for t in sleepers: t.start()
for t in sleepers: t.join()
print(time.perf_counter() - start)
""")
    assert 1 <= float(output) < 1.5


def test_no_warp_without_timewarp(tmp_path):
    (tmp_path / "script.py").write_text("import time; print(time.sleep.__module__)\n")
    _, warped = console.run("python3 script.py", tmp_path)
    _, plain = console.run("TIMEWARP= python3 script.py", tmp_path)
    assert (warped.strip(), plain.strip()) == ("sitecustomize", "time")


# ---------------------------------------------------------------- the harness can fail

def what_you_should_see(exercise):
    """The first console block that runs the exercise as written (no edit)."""
    return next(b for b in fences.read_guide(console.ROOT / "guide.md")
                if "console" in b.classes and not b.attributes
                and console.exercise_of(b) == exercise)


def test_a_changed_word_is_caught(tmp_path):
    folder = tmp_path / "changed"
    shutil.copytree(CODE, folder)
    console.apply_edit(folder, "ex01_slow_signup.py", "account created", "account made")
    block = what_you_should_see("ex01_slow_signup.py")
    assert console.check_block(block, CODE) is None
    message = console.check_block(block, folder)
    assert message.startswith(f"guide.md:{block.line + 1}: `$ python3 ex01_slow_signup.py`")
    assert "-ann@example.com: account created" in message
    assert "+ann@example.com: account made" in message


def test_a_command_that_hangs_is_stopped(tmp_path):
    with pytest.raises(console.TranscriptError, match="still running after 1 s"):
        console.run("echo started; sleep 30", tmp_path, timeout=1)


# ---------------------------------------------------------------- grading a WORK folder

def grade(work):
    """make check WORK=... as a subprocess (its own tests, not this file: no recursion)."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "guide.md",
         "tests/test_exercises.py", f"--work={work}"],
        cwd=console.ROOT, capture_output=True, text=True)
    verdicts = re.findall(r"^(ex\d\d_\w+\.py)  (\w+)$", result.stdout, re.MULTILINE)
    return result.returncode, verdicts, result.stdout


EXERCISES = console.exercises_in(fences.read_guide(console.ROOT / "guide.md"))


def test_an_empty_work_folder_fails_as_missing(tmp_path):
    status, verdicts, output = grade(tmp_path)
    assert status != 0
    assert verdicts == [(name, "MISSING") for name in EXERCISES], output


def test_a_copy_of_the_reference_passes(tmp_path):
    shutil.copytree(CODE, tmp_path / "mine")
    status, verdicts, output = grade(tmp_path / "mine")
    assert status == 0, output
    assert verdicts == [(name, "PASS") for name in EXERCISES], output


def test_a_changed_exercise_fails_with_a_diff(tmp_path):
    shutil.copytree(CODE, tmp_path / "mine")
    console.apply_edit(tmp_path / "mine", "ex01_slow_signup.py", "account created", "account made")
    (tmp_path / "mine" / "ex03_memory_queue.py").unlink()
    status, verdicts, output = grade(tmp_path / "mine")
    assert status != 0
    assert verdicts[:3] == [("ex01_slow_signup.py", "FAIL"), ("ex02_jobs.py", "PASS"),
                            ("ex03_memory_queue.py", "MISSING")], output
    assert re.search(r"^    guide.md:\d+: `\$ python3 ex01_slow_signup.py` printed", output, re.M)
    assert "    +ann@example.com: account made" in output
