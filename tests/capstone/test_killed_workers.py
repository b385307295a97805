"""The queue check, in the style of Jepsen's: workers killed with SIGKILL
at random and started again, on both backends, lose no job. It checks
tinyq (or tinyq_pg) alone, with a worker of its own, not the shop.
"""

import collections
import random
import subprocess
import sys
import time
from pathlib import Path

# A worker for the queue check: it writes down every job it runs, in a log
# opened for appending (one short write per line, so lines never mix), then
# acknowledges. A SIGKILL can land anywhere, between the two included. It and
# FILL run beside the library under test; {open_queue} makes the queue.
CHECKED_WORKER = """
import os, time
{open_queue}
log = os.open("deliveries.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT)

@queue.handler("noop")
def noop(job):
    os.write(log, b"%d\\n" % job.args["value"])

while True:
    if queue.work_one():
        continue
    counts = queue.counts()
    if counts["queued"] + counts["running"] == 0:
        break
    time.sleep(0.01)
"""

FILL = """
{open_queue}
with queue.transaction():
    for value in range({jobs}):
        queue.enqueue("noop", {{"value": value}})
"""


# The workers fork from one Python that has already imported the library
# (a zygote, as Android starts its apps), so a restart after a kill costs a
# fork, not a Python start with its imports: on PostgreSQL that is psycopg,
# 0.1 CPU-s, every 20 jobs. Each child runs worker.py, which opens its own
# queue. The zygote reads one command a line and answers each with a line:
#   start      the new worker's pid
#   poll PID   its exit status, or "running"
#   wait PID   its exit status, once it has exited
#   kill PID   "killed", once SIGKILL is sent (harmless to one that has exited)
ZYGOTE = """
import os, runpy, signal, sys, traceback
import {library}
exited = {{}}

def status(pid, block):
    if pid not in exited:
        done, code = os.waitpid(pid, 0 if block else os.WNOHANG)
        if not done:
            return "running"
        exited[pid] = os.waitstatus_to_exitcode(code)
    return exited[pid]

def work():
    os.dup2(2, 1)                  # the answers' pipe is the zygote's alone
    try:
        runpy.run_path("worker.py", run_name="__main__")
        return 0
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else 1
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        sys.stderr.flush()

for line in sys.stdin:
    command, *pid = line.split()
    pid = int(pid[0]) if pid else None
    if command == "start":
        answer = os.fork()
        if answer == 0:
            os._exit(work())
    elif command == "kill":
        if pid not in exited:
            os.kill(pid, signal.SIGKILL)
        answer = "killed"
    else:
        answer = status(pid, block=command == "wait")
    print(answer, flush=True)
"""


class Zygote:
    """ZYGOTE, for the library in folder; stopped on leaving, after its
    workers (kill_workers_until_drained stops them)."""
    def __init__(self, folder, library):
        (folder / "zygote.py").write_text(ZYGOTE.format(library=library))
        self.process = subprocess.Popen([sys.executable, "zygote.py"], cwd=folder, text=True,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def ask(self, command):
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline().strip()
        assert answer, f"the zygote stopped: exit status {self.process.wait()}"
        return answer

    def start(self):
        return Forked(self, int(self.ask("start")))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        with self.process:         # closes its pipes (the end of its commands), then waits
            pass


class Forked:
    """A worker the Zygote forked, with the Popen methods the check uses."""
    def __init__(self, zygote, pid):
        self.zygote, self.pid, self.returncode = zygote, pid, None

    def _status(self, command):
        if self.returncode is None:
            answer = self.zygote.ask(f"{command} {self.pid}")
            self.returncode = None if answer == "running" else int(answer)
        return self.returncode

    def poll(self):
        return self._status("poll")

    def wait(self):
        return self._status("wait")

    def kill(self):
        if self.returncode is None:
            self.zygote.ask(f"kill {self.pid}")


def kill_workers_until_drained(folder, start, workers, rng, jobs_per_kill=1, stuck_after=30,
                               time_limit=240):
    """Run the workers (each from start(): a process with Popen's poll,
    kill and wait), SIGKILL a random one every 2-20 ms and start it again,
    until every worker has found the queue drained. Returns the kills.
    A kill waits until jobs_per_kill jobs have run since the last one: on a
    machine so busy that a Python takes longer to start than the workers take
    to be killed, they would otherwise never get to work (in a soak beside
    four CPU hogs, 10,000 jobs were not done after 120 s). The queue is stuck
    once no job has run for stuck_after seconds. The whole run's time_limit
    is for a queue that runs jobs and never drains: it is generous, as a busy
    machine is slow (at a load of 17, PostgreSQL's check took 50 s, where the
    limit was once 120), and below pytest's timeout (pytest.ini), so that
    such a queue fails with its reason instead of timing out."""
    def deliveries():
        log = folder / "deliveries.log"
        return log.read_bytes().count(b"\n") if log.exists() else 0

    running = [start() for _ in range(workers)]
    kills, delivered, last_kill = 0, 0, 0
    started = progress = time.monotonic()
    try:
        while any(worker.poll() is None for worker in running):
            time.sleep(rng.uniform(0.002, 0.02))
            now_delivered = deliveries()
            if now_delivered > delivered:
                delivered, progress = now_delivered, time.monotonic()
            assert time.monotonic() - progress < stuck_after, \
                f"the workers did not drain the queue: no job ran for {stuck_after} s"
            assert time.monotonic() - started < time_limit, \
                f"the workers did not drain the queue in {time_limit} s"
            if delivered < last_kill + jobs_per_kill:
                continue
            last_kill = delivered
            victim = rng.randrange(workers)
            if running[victim].poll() is None:
                running[victim].kill()
                running[victim].wait()
                kills += 1
                running[victim] = start()
            failed = [worker.returncode for worker in running if worker.poll() not in (None, 0)]
            assert not failed, f"a worker failed: exit status {failed}"
    finally:
        for worker in running:
            worker.kill()
            worker.wait()
    return kills


# How the check runs on each backend. On PostgreSQL a kill waits for 20 jobs
# at most: a worker's start (Python, psycopg, a connection) beside four CPU
# hogs took longer than SQLite's pace allows, and 10,000 jobs were not done
# in 120 s. And there jobs run twice are counted but may be none: 219 kills
# once ran none twice.
QUEUE_CHECK = {"sqlite": {"jobs_per_kill": 1, "duplicates_seen": True},
               "postgresql": {"jobs_per_kill": 20, "duplicates_seen": False}}


def test_killed_workers_lose_no_job(backend, tinyq, database, monkeypatch, capsys):
    """In the style of Jepsen's queue checker: 10,000 no-op jobs, 4 workers
    killed with SIGKILL at random and restarted. Every job enqueued is run at
    least once (none lost), nothing runs that was not enqueued, and every job
    ends done. Jobs run twice (a kill between the work and the ack) are
    counted and reported: at-least-once delivery allows them."""
    monkeypatch.setenv("DATABASE", str(database))
    library = tinyq.__name__                     # tinyq, or tinyq_pg
    open_queue = (f"import os, {library}\n"
                  f"queue = {library}.Queue(os.environ['DATABASE'], lease=0.2,"
                  f" max_attempts=1000)\n")
    check_killed_workers(Path(tinyq.__file__).parent, library, open_queue, capsys,
                         **QUEUE_CHECK[backend])


def check_killed_workers(folder, library, open_queue, capsys, jobs=10_000,
                         duplicates_seen=True, jobs_per_kill=1):
    """The queue check, with the queue that open_queue makes of library.
    Kills must hit jobs mid-way: some are claimed again; and, unless
    duplicates_seen is False, some are even run twice, a kill landing
    between the work and the ack (a window too short on PostgreSQL to be
    sure of hitting)."""
    (folder / "fill.py").write_text(FILL.format(open_queue=open_queue, jobs=jobs))
    (folder / "worker.py").write_text(CHECKED_WORKER.format(open_queue=open_queue))
    subprocess.run([sys.executable, "fill.py"], cwd=folder, check=True)
    with Zygote(folder, library) as zygote:
        kills = kill_workers_until_drained(folder, zygote.start, 4, random.Random(1),
                                           jobs_per_kill=jobs_per_kill)

    runs = collections.Counter(int(line) for line in
                               (folder / "deliveries.log").read_text().splitlines())
    lost = set(range(jobs)) - set(runs)
    unexpected = set(runs) - set(range(jobs))
    duplicates = sum(count - 1 for count in runs.values())
    statuses, retried = subprocess.run(
        [sys.executable, "-c", open_queue + "print(repr(queue.counts()))\n"
         "print(sum(job['attempts'] > 1 for job in queue.jobs()))"],
        cwd=folder, check=True, capture_output=True, text=True).stdout.splitlines()
    with capsys.disabled():
        print(f"\nqueue check: {jobs} jobs, {kills} workers killed, {len(lost)} lost, "
              f"{len(unexpected)} unexpected, {retried} claimed again, "
              f"{duplicates} run twice or more")
    assert (len(lost), len(unexpected)) == (0, 0)
    assert statuses == repr({"queued": 0, "running": 0, "done": jobs, "dead": 0})
    assert kills >= 10 and int(retried) > 0   # the kills were real, and some hit mid-job
    assert duplicates > 0 or not duplicates_seen
