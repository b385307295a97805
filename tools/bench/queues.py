"""Queue benchmarks, the last part of `make bench`: numbers, never pass or fail.

1. Drain throughput: 10,000 no-op jobs are enqueued first (not timed), then
   1 or 4 worker processes drain them, for three libraries as they ship:
   - tinyq (code/capstone/tinyq.py): a worker calls work_one() until it
     returns False and counts() shows nothing queued or running;
   - huey's SqliteHuey, with results=False (a no-op task returns None, and
     the other two store no results either): a worker makes the two calls
     that huey's own consumer worker makes in its loop, huey.dequeue() and
     huey.execute(task), until dequeue() finds nothing. Not the consumer
     itself: it never stops, and an idle worker sleeps 0.1 s and more
     between looks, which would count against huey at the end of a drain;
   - litequeue: a worker calls pop() and done() until pop() finds nothing.
   The clock (time.perf_counter) starts once every worker has started and
   opened its queue, and stops when the last one reports the queue drained.
   Jobs per second, the median of up to 3 runs (as many as fit in about
   110 s; the runs take turns); the goal is tinyq at least 3x huey.
   Like with like: as they ship, tinyq's connection commits with PRAGMA
   synchronous = NORMAL and huey's with SQLite's default, FULL (huey 3.5's
   fsync option only chooses FULL or OFF), so part of the gap is how long a
   commit waits for the disk. tinyq and huey also drain with the other one's
   setting, set by a PRAGMA on the worker's connection once it is open, and
   the ratio is printed at each setting.
2. tinyq with a long queue, 1 worker: the rate with 1,000 jobs queued (all
   of them drained) and with 100,000 queued (the first 5,000 drained);
   median of 3 runs each; the goal is the second at least 0.8x the first.
3. tinyq on SQLite beside tinyq_pg on PostgreSQL (a private server,
   tools/harness/postgres.py, with PostgreSQL's default settings, its data
   in BENCH_DIR like SQLite's): 10,000 no-op jobs drained by 1, 2, 4 and 8
   worker processes, each worker as tinyq's above; median of 3 runs each;
   the goal is tinyq_pg with 4 workers at least 2x its own rate with 1.
   Then the price of a long transaction: one tinyq_pg worker, in this
   process, drains 10,000 jobs with and without another connection holding
   a REPEATABLE READ transaction open; jobs/s in each fifth of the drain,
   and the old row versions a VACUUM afterwards could not remove.
4. code/capstone/chaos.py at its defaults, seeds 1 to 3, each in a fresh
   copy of code/capstone/ (it writes its databases to its folder): the
   median wall time of the whole command; the goal is at most 3 s.

Every run gets a fresh temporary folder inside this checkout, so on the
disk readers work on, not in memory (/tmp is in memory on some systems):
SQLite's commits wait for the disk. BENCH_TMPDIR=folder puts them elsewhere.
"""
import functools
import multiprocessing
import os
import queue
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

from huey import SqliteHuey
from litequeue import LiteQueue

from tools import course

ROOT = Path(__file__).resolve().parents[2]
CAPSTONE = ROOT / "code" / "capstone"


# code/ is the learners' folder, not a package: its files are loaded by path
# (tools/course.py), and tinyq_pg's `import tinyq` is handed the tinyq loaded here.
tinyq = course.module("capstone/tinyq.py")
tinyq_pg = course.fresh("capstone/tinyq_pg.py", tinyq=tinyq)

BENCH_DIR = Path(os.environ.get("BENCH_TMPDIR") or ROOT)
JOBS = 10_000
WORKER_COUNTS = (1, 4)
RUNS = 3
THROUGHPUT_BUDGET_SECONDS = 110  # the queue part of make bench: about 2.5 minutes
BUSY_SECONDS = 10.0       # every library waits this long for a writer's lock
STARTUP_SECONDS = 60      # a worker not ready by then has failed
DRAIN_LIMIT_SECONDS = 300
IDLE_SECONDS = 0.001      # tinyq: the last jobs are still running elsewhere
CHAOS_SEEDS = (1, 2, 3)


def do_nothing():
    """The job every library runs."""


# ---- one function each to fill a queue and to drain it in a worker process

def run_worker(run_one, ready, report, limit):
    """What every worker does once its queue is open: wait for the others,
    then call run_one() until it says the queue is drained (False) or
    `limit` jobs have run; report how many ran."""
    ready.wait(STARTUP_SECONDS)
    ran = 0
    while ran < limit and run_one():
        ran += 1
    report.put(ran)


def fill_tinyq(path, jobs):
    tiny = tinyq.Queue(path)
    with tiny.transaction():          # one commit: filling is not measured
        for _ in range(jobs):
            tiny.enqueue("noop", {})
    tiny.close()


def drain_tinyq(path, ready, report, limit, library="tinyq", synchronous=None):
    tiny = (tinyq_pg if library == "tinyq_pg" else tinyq).Queue(path)
    if synchronous:
        tiny.db.execute(f"PRAGMA synchronous = {synchronous}")
    tiny.handler("noop")(lambda job: do_nothing())

    def run_one():
        while True:
            if tiny.work_one():
                return True
            counts = tiny.counts()
            if counts["queued"] + counts["running"] == 0:
                return False
            time.sleep(IDLE_SECONDS)

    run_worker(run_one, ready, report, limit)
    tiny.close()


def open_huey(path, **options):
    """SqliteHuey and its no-op task, named so producer and workers agree."""
    huey = SqliteHuey(filename=str(path), results=False, timeout=BUSY_SECONDS,
                      **options)
    return huey, huey.task(name="noop")(do_nothing)


def fill_huey(path, jobs):
    # huey commits every enqueue by itself; fsync=False spares this
    # producer's connection, and only it, a disk wait for each one.
    huey, noop = open_huey(path, fsync=False)
    for _ in range(jobs):
        noop()
    huey.storage.close()


def drain_huey(path, ready, report, limit, synchronous=None):
    huey, _ = open_huey(path)
    huey.pending_count()              # opens the connection before the clock
    if synchronous:                   # huey keeps that one connection open
        huey.storage.conn.execute(f"PRAGMA synchronous = {synchronous}")

    def run_one():
        task = huey.dequeue()
        if task is not None:
            huey.execute(task)
        return task is not None

    run_worker(run_one, ready, report, limit)
    huey.storage.close()


def fill_litequeue(path, jobs):
    lite = LiteQueue(str(path), timeout=BUSY_SECONDS)
    with lite.transaction(mode="IMMEDIATE"):
        for _ in range(jobs):
            lite.put("noop")
    lite.close()


def drain_litequeue(path, ready, report, limit):
    lite = LiteQueue(str(path), timeout=BUSY_SECONDS)

    def run_one():
        message = lite.pop()
        if message is not None:
            do_nothing()
            mark_done(lite, message)
        return message is not None

    run_worker(run_one, ready, report, limit)
    lite.close()


def mark_done(lite, message):
    # 0.14 fences done() with the claim id pop() gave; 0.9, the last release
    # for Python before 3.12, has no claim ids.
    if hasattr(message, "claim_id"):
        lite.done(message.message_id, claim_id=message.claim_id)
    else:
        lite.done(message.message_id)


TINYQ, HUEY = "tinyq", "huey (SqliteHuey)"
LIBRARIES = {
    TINYQ: (fill_tinyq, drain_tinyq),
    HUEY: (fill_huey, drain_huey),
    f"litequeue {version('litequeue')}": (fill_litequeue, drain_litequeue),
}
# The settings at which tinyq and huey are compared like with like.
SETTINGS = ("NORMAL", "FULL")


def add_other_settings(shipped):
    """Add tinyq and huey at the setting of SETTINGS they do not ship with;
    {(library, setting): row name} for both at each setting."""
    rows = {}
    for library, drain in ((TINYQ, drain_tinyq), (HUEY, drain_huey)):
        for setting in SETTINGS:
            if setting == shipped[library]:
                rows[library, setting] = library
            else:
                rows[library, setting] = f"{library.split()[0]} at {setting}"
                LIBRARIES[rows[library, setting]] = (
                    LIBRARIES[library][0], functools.partial(drain, synchronous=setting))
    return rows


# ---- running worker processes

def timed_drain(drain, path, workers, limit=float("inf")):
    """Seconds from the moment `workers` fresh processes are ready to drain
    the queue at `path` to the moment the last of them is done; and how many
    jobs they ran in all. Each runs `drain` and stops after `limit` jobs."""
    # spawn, not fork: each worker starts clean, as a deployed one would
    context = multiprocessing.get_context("spawn")
    ready = context.Barrier(workers + 1)
    report = context.Queue()
    processes = [context.Process(target=drain, args=(str(path), ready, report, limit))
                 for _ in range(workers)]
    for process in processes:
        process.start()
    try:
        ready.wait(STARTUP_SECONDS)
        started = time.perf_counter()
        ran = sum(wait_for_reports(report, processes))
        return time.perf_counter() - started, ran
    finally:
        stop(processes)


def wait_for_reports(report, processes):
    """Each worker's count of jobs run, or an error if one dies first."""
    counts = []
    deadline = time.monotonic() + DRAIN_LIMIT_SECONDS
    while len(counts) < len(processes):
        try:
            counts.append(report.get(timeout=0.5))
        except queue.Empty:
            if any(process.exitcode for process in processes):
                raise RuntimeError("a worker failed; its traceback is above") from None
            if time.monotonic() > deadline:
                raise RuntimeError("the workers are stuck") from None
    return counts


def stop(processes):
    for process in processes:
        process.join(timeout=10)
        if process.is_alive():
            process.kill()
            process.join()


def fresh_folder():
    """A new temporary folder under BENCH_DIR, removed when done with."""
    return tempfile.TemporaryDirectory(prefix=".bench-queues-", dir=BENCH_DIR)


def filesystem(folder):
    """The type of the filesystem holding folder, from /proc (Linux only)."""
    try:
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return "an unknown filesystem"
    folder = os.path.realpath(folder)
    deepest, kind = "", "an unknown filesystem"
    for line in mounts:             # the deepest mount point that holds folder
        point, fs_type = line.split()[1:3]
        holds = folder == point or folder.startswith(point.rstrip("/") + "/")
        if holds and len(point) > len(deepest):
            deepest, kind = point, fs_type
    return kind


# ---- 1. drain throughput

def drain_rate(library, workers, jobs=JOBS):
    fill, drain = LIBRARIES[library]
    with fresh_folder() as folder:
        path = Path(folder) / "queue.db"
        fill(path, jobs)
        seconds, ran = timed_drain(drain, path, workers)
    if ran != jobs:
        print(f"  warning: {library} ran {ran:,} of {jobs:,} jobs")
    return ran / seconds


def throughput():
    """Median jobs/s for each library and worker count, and over how many
    runs: up to RUNS, while one more fits in THROUGHPUT_BUDGET_SECONDS. The
    libraries take turns in each run, so a slow moment hits all alike."""
    rates = {(library, workers): [] for library in LIBRARIES for workers in WORKER_COUNTS}
    started = time.monotonic()
    for runs in range(1, RUNS + 1):
        for library, workers in rates:
            rates[library, workers].append(drain_rate(library, workers))
        seconds_per_run = (time.monotonic() - started) / runs
        if seconds_per_run * (runs + 1) > THROUGHPUT_BUDGET_SECONDS:
            break
    return {key: statistics.median(values) for key, values in rates.items()}, runs


def print_throughput():
    print(f"queues: {JOBS:,} no-op jobs enqueued, then drained by worker processes")
    print(f"  (databases in fresh folders under {BENCH_DIR}, on {filesystem(BENCH_DIR)};"
          " BENCH_TMPDIR=folder moves them)", flush=True)
    shipped = synchronous_settings()
    rows = add_other_settings(shipped)
    rates, runs = throughput()
    runs_said = f"median of {runs} runs" if runs > 1 else "one run"
    columns = [f"{workers} worker" + "s" * (workers > 1) for workers in WORKER_COUNTS]
    print(f"  {'jobs/s, ' + runs_said:32}" + "".join(f"{column:>12}" for column in columns))
    # each library at both settings, side by side, then the others
    for library in dict.fromkeys([*rows.values(), *LIBRARIES]):
        print(f"  {library:32}" + "".join(f"{rates[library, workers]:>12,.0f}"
                                          for workers in WORKER_COUNTS))

    def ratio(label, tiny_row, huey_row, goal=""):
        print(f"  {label:32}" + "".join(
            f"{rates[tiny_row, workers] / rates[huey_row, workers]:>11.2f}x"
            for workers in WORKER_COUNTS) + goal)
    ratio("tinyq / huey, as they ship", TINYQ, HUEY, "   (goal: at least 3x)")
    for setting in SETTINGS:
        ratio(f"tinyq / huey, both at {setting}", rows[TINYQ, setting], rows[HUEY, setting])
    # facts to read the numbers by, as these pinned versions ship
    print("  commits per job: tinyq 2 (claim, finish); huey 1 (its dequeue deletes"
          " the task); litequeue 2 (pop, done)")
    print(f"  PRAGMA synchronous of a worker's connection as it ships (huey {version('huey')}): "
          + ", ".join(f"{library.split()[0]} {setting}" for library, setting in shipped.items()))
    print("  (FULL waits for the disk at every commit; NORMAL, with WAL, does not, and")
    print("  still survives the program dying; a power cut may undo the last commits)")


def synchronous_settings():
    """How each library, as it ships, commits: SQLite's own answer."""
    names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    with fresh_folder() as folder:
        tiny = tinyq.Queue(Path(folder) / "tinyq.db")
        huey, _ = open_huey(Path(folder) / "huey.db")
        lite = LiteQueue(str(Path(folder) / "litequeue.db"))
        connections = {TINYQ: tiny.db, HUEY: huey.storage.conn, "litequeue": lite.conn}
        settings = {library: names[db.execute("PRAGMA synchronous").fetchone()[0]]
                    for library, db in connections.items()}
        for db in connections.values():
            db.close()
    return settings


# ---- 2. tinyq with a long queue

def tinyq_rate(queued, drained):
    """One worker's jobs/s over the first `drained` of `queued` jobs."""
    rates = []
    for _ in range(RUNS):
        with fresh_folder() as folder:
            path = Path(folder) / "queue.db"
            fill_tinyq(path, queued)
            seconds, ran = timed_drain(drain_tinyq, path, 1, limit=drained)
            rates.append(ran / seconds)
    return statistics.median(rates)


def print_long_queue():
    short = tinyq_rate(1_000, 1_000)
    long = tinyq_rate(100_000, 5_000)
    print(f"tinyq, 1 worker, jobs/s, median of {RUNS} runs:")
    print(f"  1,000 jobs queued, all 1,000 drained          {short:7,.0f}")
    print(f"  100,000 jobs queued, the first 5,000 drained  {long:7,.0f}"
          f"   {long / short:4.2f}x (goal: at least 0.8x)")


# ---- 3. tinyq on SQLite beside tinyq_pg on PostgreSQL

def fill_tinyq_pg(address, jobs):
    tiny = tinyq_pg.Queue(address)
    with tiny.transaction():
        tiny.db.execute("TRUNCATE jobs")       # the same server serves every run
        for _ in range(jobs):
            tiny.enqueue("noop", {})
    tiny.close()


# the same worker, on tinyq_pg's Queue
drain_tinyq_pg = functools.partial(drain_tinyq, library="tinyq_pg")


def print_postgresql():
    """Drain rates of tinyq and of tinyq_pg on a private server with
    PostgreSQL's default settings (synchronous_commit on: every commit waits
    for the disk), its data on the same disk as SQLite's."""
    from tools.harness import postgres
    workers = (1, 2, 4, 8)
    print(f"tinyq on SQLite beside tinyq_pg on PostgreSQL: {JOBS:,} no-op jobs, jobs/s,"
          f" median of {RUNS} runs")
    try:
        with postgres.server(data_under=BENCH_DIR) as address:
            rates = {}
            for count in workers:
                for name, fill, drain, where in ((TINYQ, fill_tinyq, drain_tinyq, None),
                                                 ("tinyq_pg", fill_tinyq_pg, drain_tinyq_pg,
                                                  address)):
                    runs = []
                    for _ in range(RUNS):
                        with fresh_folder() as folder:
                            target = where or Path(folder) / "queue.db"
                            fill(target, JOBS)
                            seconds, ran = timed_drain(drain, target, count)
                        runs.append(ran / seconds)
                    rates[name, count] = statistics.median(runs)
            held = {hold: long_transaction(address, hold) for hold in (False, True)}
    except postgres.Unavailable as error:
        print(f"  no PostgreSQL server could be started: {error}")
        return
    print(f"  {'workers':24}" + "".join(f"{count:>10}" for count in workers))
    for name in (TINYQ, "tinyq_pg"):
        print(f"  {name:24}" + "".join(f"{rates[name, count]:>10,.0f}" for count in workers))
    print(f"  {'tinyq_pg / tinyq':24}" + "".join(
        f"{rates['tinyq_pg', count] / rates[TINYQ, count]:>9.2f}x" for count in workers))
    print(f"  tinyq_pg, 4 workers / 1 worker: "
          f"{rates['tinyq_pg', 4] / rates['tinyq_pg', 1]:.2f}x (goal: at least 2x)")
    print(f"tinyq_pg, 1 worker, {JOBS:,} jobs, jobs/s in each fifth of the drain; then how many"
          " old row versions a VACUUM could not remove:")
    for hold, (fifths, left) in held.items():
        words = "another transaction held open" if hold else "no other transaction"
        print(f"  {words:32}" + "".join(f"{rate:>7,.0f}" for rate in fifths) + f"   {left:>7,}")


def long_transaction(address, hold):
    """One worker drains JOBS jobs in this process, while another connection
    holds a transaction open (REPEATABLE READ: its snapshot lasts until it
    ends) or not. Jobs/s over each fifth of the drain, and the dead row
    versions VACUUM then had to keep because that snapshot might see them."""
    import psycopg
    fill_tinyq_pg(address, JOBS)
    tiny = tinyq_pg.Queue(address)
    tiny.handler("noop")(lambda job: do_nothing())
    tiny.db.execute("VACUUM ANALYZE jobs")     # both drains start from a clean table
    other = psycopg.connect(address)
    if hold:
        other.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        other.execute("SELECT 1")              # the snapshot is taken here
    fifths, fifth = [], JOBS // 5
    started = time.perf_counter()
    for ran in range(1, JOBS + 1):
        tiny.work_one()
        if ran % fifth == 0:
            fifths.append(fifth / (time.perf_counter() - started))
            started = time.perf_counter()
    tiny.db.execute("VACUUM jobs")
    (left,) = tiny.db.execute("SELECT n_dead_tup FROM pg_stat_user_tables"
                              " WHERE relname = 'jobs'").fetchone()
    other.close()
    tiny.close()
    return fifths, left


# ---- 4. chaos.py

def chaos_seconds(seed):
    """Wall time of `chaos.py --seed seed` in a fresh copy, and its verdict."""
    with fresh_folder() as folder:
        copy = Path(folder) / "capstone"
        shutil.copytree(CAPSTONE, copy, ignore=shutil.ignore_patterns(
            "__pycache__", "*.db", "*.db-*"))
        started = time.perf_counter()
        result = subprocess.run([sys.executable, "chaos.py", "--seed", str(seed)],
                                cwd=copy, capture_output=True, text=True)
        seconds = time.perf_counter() - started
    if "AUDIT PASSED" in result.stdout:
        return seconds, "audit passed"
    return seconds, f"no audit passed: exit status {result.returncode}"


def print_chaos():
    print("code/capstone/chaos.py at its defaults, wall time of the whole command:")
    times = []
    for seed in CHAOS_SEEDS:
        seconds, verdict = chaos_seconds(seed)
        times.append(seconds)
        print(f"  --seed {seed}  {seconds:5.2f} s  ({verdict})")
    print(f"  median     {statistics.median(times):5.2f} s  (goal: at most 3 s)")


def main():
    print_throughput()
    print_long_queue()
    print_postgresql()
    print_chaos()


if __name__ == "__main__":
    # Run under its own name: spawned workers, and huey's registry of task
    # names, must see one module bench.queues, never __main__.
    from tools.bench import queues
    queues.main()
