"""sandbox.py: commands run as a reader runs them, under the time warp, with
a clock the processes of a session share, a person's pause, and a limit."""

import struct
import subprocess
import sys
import time

import pytest

from tools.harness import catalogue, postgres, sandbox
from tests.helpers import as_in_a_terminal


# ---------------------------------------------------------------- time warp

def run_python(tmp_path, script, timewarp=sandbox.TIMEWARP_FACTOR):
    (tmp_path / "script.py").write_text(script)
    status, output = sandbox.run("python3 script.py", tmp_path, timewarp=timewarp)
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
    assert real == 2 / sandbox.TIMEWARP_FACTOR
    # each clock sees the 2 s, once (a busy machine may add real time to it)
    assert all(2 <= advance < 3 for advance in advances), advances


def test_threads_sleeping_together_share_the_time(tmp_path):
    # Together: both wait at a barrier, then sleep 1 s, which at a time warp
    # of 2 is half a second of real time. (At 20 it is 50 ms, and a busy
    # machine once started the second thread after the first had woken.)
    output = run_python(tmp_path, """
import threading, time
together = threading.Barrier(2)
def sleeper():
    together.wait()
    time.sleep(1)
start = time.perf_counter()
sleepers = [threading.Thread(target=sleeper) for _ in range(2)]
for t in sleepers: t.start()
for t in sleepers: t.join()
print(time.perf_counter() - start)
""", timewarp=2)
    assert 1 <= float(output) < 1.5


CLOCK_SCRIPT = """
import os, sys, time
from pathlib import Path
import sitecustomize
name, *sleeps = sys.argv[1:]
# Both start sleeping together, however long each took to start Python.
Path(f"{name}.ready").touch()
while not (Path("a.ready").exists() and Path("b.ready").exists()):
    sitecustomize.real_sleep(0.002)
start = time.time()
for seconds in sleeps:
    time.sleep(float(seconds))
say = sys.stdout.write                # one write a line: the two share one pipe
say(f"{name} slept {time.time() - start}\\n")
if name == "a":                       # a sleeps 3 s more, then writes the time down
    time.sleep(3)
    Path("a.tmp").write_text(repr(time.time()))
    os.rename("a.tmp", "a.txt")
else:                                 # b waits for it without sleeping on the clock
    while not Path("a.txt").exists():
        sitecustomize.real_sleep(0.002)
    say(f"{name} gap {time.time() - float(Path('a.txt').read_text())}\\n")
"""


@pytest.mark.parametrize("shared", [True, False])
def test_processes_of_a_session_share_one_clock(tmp_path, shared):
    (tmp_path / "clock.py").write_text(CLOCK_SCRIPT)
    clock = sandbox.new_clock(tmp_path / "clock") if shared else None
    # At a warp of 4, a sleeps 1.25 s of real time: a busy machine may keep b
    # waiting for a core that long, and b still sees its sleeps overlap a's.
    status, output = sandbox.run("python3 clock.py a 5 & python3 clock.py b 1 1 1 1 1; wait",
                                 tmp_path, timewarp=4, clock=clock)
    assert status == 0, output
    seen = {tuple(line.split()[:2]): float(line.split()[2]) for line in output.splitlines()}
    # Sleeping side by side, each sees the 5 s pass, once: a clock that added
    # the sleeps up would show 10. (Real time counts on every warped clock, so
    # b, kept waiting, sees up to 6.25; the bound is halfway to 10.)
    assert 5 <= seen["a", "slept"] < 7.5 and 5 <= seen["b", "slept"] < 7.5, output
    if shared:    # b reads a's time soon after a wrote it, on the same clock
        assert 0 <= seen["b", "gap"] < 1, output
    else:         # a's last 3 s of sleep moved only a's clock: 2.25 s past b's, as
        assert seen["b", "gap"] < -1, output  # the 0.75 s a really slept counts on both


def test_a_wait_for_a_postgresql_notification_is_warped_too(tmp_path, postgresql,
                                                            tmp_path_factory):
    """tinyq_pg's idle worker waits in psycopg's notifies(timeout=...), not
    in time.sleep: a wait that ends with no notification is as quick as a
    sleep, and the clocks see it all; one a NOTIFY ends comes back at once."""
    packages = postgres.reader_packages(tmp_path_factory.mktemp("psycopg") / "packages")
    (tmp_path / "script.py").write_text(f"""
import sitecustomize, time, psycopg
db = psycopg.connect({str(postgresql)!r}, autocommit=True)
db.execute("LISTEN ping")
start, real = time.monotonic(), sitecustomize.real_monotonic()
got = list(db.notifies(timeout=2, stop_after=1))
print(len(got), time.monotonic() - start, sitecustomize.real_monotonic() - real)
db.execute("NOTIFY ping")
start = time.monotonic()
got = list(db.notifies(timeout=2, stop_after=1))
print(len(got), time.monotonic() - start)
""")
    status, output = sandbox.run(f'PYTHONPATH="$PYTHONPATH:{packages}" python3 script.py',
                                 tmp_path)
    assert status == 0, output
    (timed_out, seen, real), (notified, quick) = [line.split() for line in output.splitlines()]
    assert timed_out == "0" and 2 <= float(seen) < 3, output
    assert float(real) < 1, output        # 0.1 s at a warp of 20, on a quiet machine
    assert notified == "1" and float(quick) < 1, output


def test_no_warp_without_timewarp(tmp_path):
    (tmp_path / "script.py").write_text("import time; print(time.sleep.__module__)\n")
    _, warped = sandbox.run("python3 script.py", tmp_path)
    _, plain = sandbox.run("TIMEWARP= python3 script.py", tmp_path)
    assert (warped.strip(), plain.strip()) == ("sitecustomize", "time")


def test_a_command_that_hangs_is_stopped(tmp_path):
    with pytest.raises(sandbox.TranscriptError, match="still running after 1 s"):
        sandbox.run("echo started; sleep 30", tmp_path, timeout=1)


# Ctrl-C while Python forks a command: SIGINT raised inside one of Python's
# at-fork callbacks in the parent (logging registers one), where an exception
# is printed and dropped. The callback here sends it, and sleeps for it to land.
CTRL_C_AT_FORK = """
import os, signal, time
from tools.harness import sandbox

os.register_at_fork(after_in_parent=lambda: (os.kill(os.getpid(), signal.SIGINT), time.sleep(0.2)))
try:
    sandbox.Process("sleep 30", ".", dict(os.environ))
    time.sleep(1)
    print("Ctrl-C lost")
except KeyboardInterrupt:
    print("interrupted")
"""


def test_ctrl_c_while_a_command_starts_is_not_lost(tmp_path):
    """A Ctrl-C that lands while the harness forks a command still stops the
    run: held back until the fork is done, not dropped inside it."""
    run = subprocess.run([sys.executable, "-c", CTRL_C_AT_FORK], cwd=catalogue.ROOT,
                         capture_output=True, text=True, timeout=30,
                         preexec_fn=as_in_a_terminal)
    assert (run.returncode, run.stdout) == (0, "interrupted\n"), run


# ---------------------------------------------------------------- a person's pause

def test_a_persons_pause_is_quick_but_the_clock_sees_it(tmp_path):
    clock = sandbox.new_clock(tmp_path / "clock")
    start = time.monotonic()
    sandbox.pause(clock, 2, 20)
    real = time.monotonic() - start
    skip = struct.unpack("d", clock.read_bytes())[0]
    assert 0.1 <= real < 0.5, real               # 2 s at 20 times faster, plus a little
    assert 2 <= real + skip < 2.1, (real, skip)  # the virtual clock moved on 2 s
