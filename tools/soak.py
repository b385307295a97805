"""Run the whole suite several times beside CPU hogs: a test that only
passes on an idle machine shows up here, not in CI on a bad day.

    make soak                         5 runs beside 4 hogs, 4 test processes
    make soak RUNS=2 HOGS=1           fewer
    .venv/bin/python tools/soak.py --runs 1 -- tests/harness/test_sandbox.py -k clock

A hog is a Python busy loop (`while True: pass`), one per CPU it takes. The
hogs start before the first run and are stopped, by their own ids, when the
last run ends, when a run cannot start, or at Ctrl-C. Each run's output goes
to a log of its own, in a temporary folder (soak-*) that it names; a line
per run says how it ended. Exits 0 only if every run passed; 130 at Ctrl-C,
143 at SIGTERM.
"""
import argparse
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent
# Ctrl-C reaches the whole foreground process group: the hogs ignore it, and
# soak stops them by their ids, quietly.
HOG = "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass"


def soak(runs, hogs, workers, pytest_args):
    logs = Path(tempfile.mkdtemp(prefix="soak-"))
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               "-n", str(workers), *pytest_args]
    started = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(hogs)]
    print(f"soak: {runs} runs of `{' '.join(command[1:])}` beside {hogs} hogs "
          f"(ids {' '.join(str(hog.pid) for hog in started) or 'none'}); logs in {logs}",
          flush=True)
    green = 0
    try:
        for run in range(1, runs + 1):
            log = logs / f"run{run}.log"
            start = time.monotonic()
            with open(log, "w") as out:
                status = subprocess.run(command, cwd=PROJECT, stdout=out,
                                        stderr=subprocess.STDOUT).returncode
            lines = log.read_text().strip().splitlines() or ["(no output)"]
            green += status == 0
            print(f"run {run} of {runs}: {'passed' if status == 0 else 'FAILED'} in "
                  f"{time.monotonic() - start:.0f} s: {lines[-1].strip('= ')}", flush=True)
    finally:
        for hog in started:
            hog.kill()
            hog.wait()
        if started:
            print(f"hogs stopped: {' '.join(str(hog.pid) for hog in started)}")
    print(f"soak: {green} of {runs} runs passed" + ("" if green == runs else f"; logs in {logs}"))
    return 0 if green == runs else 1


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="how many times to run the suite")
    parser.add_argument("--hogs", type=int, default=4, help="busy loops beside it")
    parser.add_argument("--workers", type=int, default=4,
                        help="pytest-xdist's -n (0: the tests run in pytest's own process)")
    parser.add_argument("pytest_args", nargs="*", help="after --: what pytest runs")
    options = parser.parse_args(argv)
    if options.runs < 1 or options.hogs < 0 or options.workers < 0:
        parser.error("--runs must be 1 or more, --hogs and --workers 0 or more")
    # Stopped by kill, it still stops the hogs and the run (the finally blocks).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        return soak(options.runs, options.hogs, options.workers, options.pytest_args)
    except KeyboardInterrupt:
        print("soak: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
