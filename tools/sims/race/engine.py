"""Race stepper (Chapter 4): two workers run ex05's claim_naive (SELECT, then
UPDATE) or claim_atomic (one UPDATE ... RETURNING) one statement at a time,
in the order the reader chooses, on a real SQLite file with one connection
per worker. Each step is one statement of ex05's own code, read out of its
source: the page shows it as one line of Python and runs that statement.

The state keeps what the page draws in time: a log with one entry per step
(what it found, and the jobs row after it), and each naive worker's gap,
from the SELECT that found a job to the UPDATE that marked it. Where both
workers' gaps overlap, both have looked and neither has marked: the race.

Beyond stepping by hand, every_interleaving() runs every order of the two
workers' steps, each on a fresh database, and counts those that send an
email twice.

Run it in a terminal (the counts, then one duplicate replayed step by step):
    python3 -m tools.sims race [--jobs N]
Or drive it from Python:
    race = Race("naive"); race.step(0); race.step(1); race.state()
"""
import argparse
import ast
import copy
import functools
import inspect
import itertools
import shutil
import sqlite3
import tempfile
import textwrap
from pathlib import Path

from tools import course
from ..engine import Engine, action, check

ex05 = course.module("ex05_two_workers.py")

CLAIMS = ("naive", "atomic")
WORKERS = ("worker 1", "worker 2")      # what ex05 writes in the worker column
ADDRESSES = ("ann", "bob", "cat", "dan", "eve", "fay")

# ex05's work() loop, cut down to one turn: the part the send and ack steps run.
LOOP = """\
job = claim(db)
if job is None:
    return
job_id, kind, args = job
HANDLERS[kind](**json.loads(args))
ack(db, job_id)"""


# ---- the statements, out of ex05's source

def body(function):
    """The statements of one of ex05's functions."""
    return ast.parse(textwrap.dedent(inspect.getsource(function))).body[0].body


def find(statements, matches, where):
    for node in statements:
        if matches(node):
            return node
    raise LookupError(f"ex05_two_workers.py has changed: {where} has no statement "
                      f"this step can run")


def sql_in(node):
    for inner in ast.walk(node):
        if isinstance(inner, ast.Call) and getattr(inner.func, "attr", None) == "execute":
            return inner.args[0].value
    return None


def runs_sql(word):
    """Matches a statement whose db.execute(...) SQL contains word."""
    return lambda node: word in (sql_in(node) or "")


def is_if(node):
    return isinstance(node, ast.If)


def one_line(node):
    """A statement as one line of Python, with its SQL on one line too."""
    node = copy.deepcopy(node)
    for inner in ast.walk(node):
        if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
            inner.value = " ".join(inner.value.split())
    return " ".join(line.strip() for line in ast.unparse(node).splitlines())


# ---- the steps: what each one runs, and what it reports

class Step:
    def __init__(self, label, node, run):
        self.label = label          # short: "SELECT", "if none: stop", "send", ...
        self.code = one_line(node)  # the statement it runs, as the page shows it
        self.sql = sql_in(node)
        self.run = run              # run(race, worker, step) -> (in words, in short)


@functools.lru_cache(maxsize=None)
def program(claim):
    """The steps of one worker's turn, exactly as ex05 runs them (read once per
    claim: the source does not change while we run)."""
    loop = ast.parse(LOOP).body
    send = Step("send", find(loop, lambda node: "HANDLERS" in ast.unparse(node), "work()"),
                run_send)
    ack = Step("UPDATE to done", find(body(ex05.ack), runs_sql("UPDATE"), "ack"), run_ack)
    if claim == "naive":
        claim_naive = body(ex05.claim_naive)
        return (Step("SELECT", find(claim_naive, runs_sql("SELECT"), "claim_naive"), run_select),
                Step("if none: stop", find(claim_naive, is_if, "claim_naive"), run_check),
                Step("UPDATE to running", find(claim_naive, runs_sql("UPDATE"), "claim_naive"),
                     run_mark),
                send, ack)
    return (Step("UPDATE ... RETURNING", find(body(ex05.claim_atomic), runs_sql("UPDATE"),
                                              "claim_atomic"), run_claim_atomic),
            Step("if none: stop", find(loop, is_if, "work()"), run_check),
            send, ack)


def run_select(race, worker, step):
    worker.job = worker.db.execute(step.sql).fetchone()
    if worker.job:
        return f"SELECT found job {worker.job[0]}", f"found job {worker.job[0]}"
    return "SELECT found no queued job", "found none"


def run_claim_atomic(race, worker, step):
    worker.claimed_while_other_busy = race.other(worker).busy()
    worker.job = worker.db.execute(step.sql, (worker.name,)).fetchone()
    worker.holds = worker.job[0] if worker.job else None
    if worker.job:
        return (f"UPDATE ... RETURNING claimed job {worker.job[0]}",
                f"claimed job {worker.job[0]}")
    return "UPDATE ... RETURNING matched no queued job", "matched none"


def run_check(race, worker, step):
    if worker.job is None:
        worker.done = True
        return "no job, so it stops", "none: stops"
    return f"it has job {worker.job[0]}, so it goes on", "has one: goes on"


def run_mark(race, worker, step):
    job_id = worker.job[0]
    before = race.row(job_id)
    worker.db.execute(step.sql, (worker.name, job_id))
    worker.holds = job_id
    said = f"UPDATE marked job {job_id} running for {worker.name}"
    if before["worker"] not in (None, worker.name):
        # The naive UPDATE has no condition on status: it overwrites the other's mark.
        said += f", over {before['worker']}'s mark (the row said {before['status']})"
    return said, f"marked job {job_id}"


def run_send(race, worker, step):
    job_id = worker.job[0]
    duplicate = any(email["job"] == job_id for email in race.outbox)
    race.outbox.append({"job": job_id, "worker": worker.name, "duplicate": duplicate})
    if duplicate and race.claim == "naive":
        race.earned.add("duplicate")
    return (f"sent the email for job {job_id}" + (", a duplicate" if duplicate else ""),
            f"job {job_id}: twice!" if duplicate else f"emailed job {job_id}")


def run_ack(race, worker, step):
    worker.db.execute(step.sql, (worker.job[0],))
    worker.done = True
    worker.holds = None
    return f"UPDATE marked job {worker.job[0]} done", f"job {worker.job[0]} done"


def touches(sql):
    """What a statement does to the jobs table: "read", "wrote" or None."""
    if sql is None:
        return None
    return "wrote" if "UPDATE" in sql else "read"


# ---- the race

class RaceWorker:
    def __init__(self, index, db):
        self.index = index
        self.name = WORKERS[index]
        self.db = db
        self.next = 0                   # index of the step it runs next
        self.job = None                 # (id, kind, args), as its claim returned it
        self.done = False
        self.last = "has not started"
        self.claimed_while_other_busy = False
        self.holds = None               # the job it believes is its own
        self.looked = None              # the log entry of its SELECT that found a job
        self.marked = None              # and of the UPDATE that marked it running

    def busy(self):
        return self.next > 0 and not self.done


class Race(Engine):
    TASKS = {
        "duplicate": "find an interleaving that sends two emails",
        "atomic-safe": "try the same with the atomic claim",
    }
    SETTINGS = {"claim": (str, *CLAIMS), "jobs": (int, 1, len(ADDRESSES))}

    def __init__(self, claim="naive", jobs=1, *, in_memory=False):
        """in_memory: each run's database in memory instead of in a temporary
        file (shared by the run's connections): no file work, for the
        hundreds of short runs of every_interleaving."""
        super().__init__()
        self.claim = check("claim", claim, self.SETTINGS["claim"])
        self.jobs = check("jobs", jobs, self.SETTINGS["jobs"])
        self.in_memory = in_memory
        self.folder = tempfile.mkdtemp(prefix="race-")
        self.runs = 0
        self.connections = []
        self.reset()

    @action
    def reset(self, claim=None):
        """A fresh database with the jobs queued, both workers at their first
        step, and (if given) the other claim. What the reader earned stays."""
        if claim is not None:
            self.claim = check("claim", claim, self.SETTINGS["claim"])
        self._close_connections()
        self.runs += 1
        # One for the table's view, then one for each worker.
        self.connections = [self._connect() for _ in range(3)]
        setup = self.connections[0]
        setup.execute(ex05.SCHEMA)
        for number in range(self.jobs):
            ex05.enqueue(setup, "welcome_email", address=f"{ADDRESSES[number]}@example.com")
        self.workers = [RaceWorker(i, db) for i, db in enumerate(self.connections[1:])]
        self.program = program(self.claim)
        self.outbox = []
        self.log = []                   # one entry per step run: who, what, the row after
        self.start = self.rows()        # the rows before any step

    def close(self):
        self._close_connections()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _connect(self):
        # Autocommit, as ex05 connects: each statement is its own transaction.
        if self.in_memory:
            name = f"file:{Path(self.folder).name}-run{self.runs}?mode=memory&cache=shared"
            return sqlite3.connect(name, isolation_level=None, uri=True)
        db = sqlite3.connect(Path(self.folder) / f"run{self.runs}.db", isolation_level=None)
        # No waiting for the disk at each commit: the order of the statements is
        # what this shows, not whether they survive a power cut.
        db.execute("PRAGMA synchronous = OFF")
        db.execute("PRAGMA journal_mode = MEMORY")
        return db

    def _close_connections(self):
        for db in self.connections:
            db.close()              # the last one to close frees an in-memory database
        for old in Path(self.folder).glob("run*.db"):
            old.unlink()

    @action
    def step(self, worker):
        """Run that worker's next statement; what it did, in words."""
        runner = self.workers[check("worker", worker, (int, 0, len(WORKERS) - 1))]
        if runner.done:
            return f"{runner.name} has finished; it has nothing left to run"
        step = self.program[runner.next]
        before = self.table()
        runner.last, short = step.run(self, runner, step)
        runner.next += 1
        if step.run is run_select and runner.job:
            runner.looked = len(self.log)
        if step.run is run_mark:
            runner.marked = len(self.log)
        after = self.table()
        # A mark over another worker's: the naive UPDATE does not look first.
        over = [old["worker"] for old, new in zip(before, after)
                if old["worker"] not in (None, new["worker"])]
        self.log.append({"worker": worker, "step": step.label, "said": runner.last,
                         "short": short, "table": touches(step.sql), "rows": self.rows(),
                         "over": over[0] if over else None})
        if self.claim == "atomic" and self.finished() and self._overlapped_safely():
            self.earned.add("atomic-safe")
        return f"{runner.name}: {runner.last}"

    @action
    def replay(self, schedule):
        """Back to the start with the same claim, then these steps, in order:
        the page's way back to an earlier moment."""
        if not isinstance(schedule, list):
            raise ValueError("schedule must be a list of workers, 0 or 1")
        self.reset()
        for worker in schedule:
            self.step(worker)

    def finished(self):
        return all(worker.done for worker in self.workers)

    def gaps(self):
        """Each naive worker's time between looking and marking, as log entries:
        from its SELECT that found a job to its UPDATE (None: not marked yet)."""
        return [{"worker": worker.index, "from": worker.looked, "to": worker.marked}
                for worker in self.workers if worker.looked is not None]

    def overlap(self):
        """Where both workers are in their gaps at once (to None: still now).
        Both have looked and neither has marked, so both claim the same job."""
        gaps = self.gaps()
        if len(gaps) < 2:
            return None
        start = max(gap["from"] for gap in gaps)
        ends = [gap["to"] for gap in gaps if gap["to"] is not None]
        end = min(ends, default=None)
        return {"from": start, "to": end} if end is None or start < end else None

    def other(self, worker):
        return self.workers[1 - worker.index]

    def _overlapped_safely(self):
        overlapped = any(worker.claimed_while_other_busy for worker in self.workers)
        return overlapped and not any(email["duplicate"] for email in self.outbox)

    def row(self, job_id):
        return next(row for row in self.table() if row["id"] == job_id)

    def rows(self):
        """The jobs rows in short: [id, status, worker] each."""
        return [[row["id"], row["status"], row["worker"]] for row in self.table()]

    def table(self):
        cursor = self.connections[0].execute("SELECT * FROM jobs ORDER BY id")
        columns = [column[0] for column in cursor.description]
        return [dict(zip(columns, values)) for values in cursor]

    def result(self):
        emails = len(self.outbox)
        said = f"{plural(emails, 'email')} for {plural(self.jobs, 'job')}"
        sent = [email["job"] for email in self.outbox]
        problems = [f"job {job} was sent {times(sent.count(job))}"
                    for job in sorted(set(sent)) if sent.count(job) > 1]
        if self.finished():
            problems += [f"job {job} was not sent"
                         for job in range(1, self.jobs + 1) if job not in sent]
        return said + (": " + ", ".join(problems) if problems else "")

    def state(self):
        return {
            "claim": self.claim,
            "jobs": self.jobs,
            "program": [{"label": step.label, "code": step.code} for step in self.program],
            "workers": [self._worker_state(worker) for worker in self.workers],
            "table": self.table(),
            "outbox": [dict(email) for email in self.outbox],
            "start": copy.deepcopy(self.start),
            "log": copy.deepcopy(self.log),
            "gaps": self.gaps(),
            "overlap": self.overlap(),
            "result": self.result(),
            "finished": self.finished(),
            "tasks": self.tasks(),
        }

    def _worker_state(self, worker):
        step = None if worker.done else self.program[worker.next]
        return {
            "name": worker.name,
            "next": None if worker.done else worker.next,
            "next_step": step.label if step else None,
            "done": worker.done,
            "last": worker.last,
            "holds": worker.holds,
        }

    # ---- every interleaving

    @action
    @staticmethod
    def every_interleaving(claim, jobs=1):
        """Run every order of the two workers' steps, each on a fresh database.
        Each run follows a chosen prefix, then always picks the lowest worker
        still running, noting every other choice it passed up as a prefix to run
        later: so each schedule runs exactly once. Besides the duplicates, it
        counts the safe orders, and those in which one worker's whole claim ran
        before the other worker's first step ("apart")."""
        race = Race(claim, jobs, in_memory=True)
        # How many steps a claim takes, up to the one that marks the row.
        claim_steps = 1 + next(index for index, step in enumerate(race.program)
                               if step.run in (run_mark, run_claim_atomic))
        schedules, duplicates, apart = 0, [], 0
        to_run = [[]]
        try:
            while to_run:
                schedule = to_run.pop()
                race.reset()
                for position in itertools.count():
                    running = [w.index for w in race.workers if not w.done]
                    if not running:
                        break
                    if position == len(schedule):
                        to_run += [schedule + [other] for other in running[1:]]
                        schedule.append(running[0])
                    race.step(schedule[position])
                schedules += 1
                # one worker's whole claim before the other's first step
                apart += len(set(schedule[:claim_steps])) == 1
                if any(email["duplicate"] for email in race.outbox):
                    duplicates.append(schedule)
        finally:
            race.close()
        return {"claim": claim, "jobs": jobs, "schedules": schedules,
                "duplicates": len(duplicates), "safe": schedules - len(duplicates),
                "apart": apart, "claim_steps": claim_steps,
                "example": min(duplicates, default=None)}


def plural(count, noun):
    return f"{count} {noun}" + ("" if count == 1 else "s")


def times(count):
    return "twice" if count == 2 else f"{count} times"


every_interleaving = Race.every_interleaving          # the text program's, and tests'


# ---- the text program

def main(argv=None):
    parser = argparse.ArgumentParser(description="The race between two workers' claims.")
    parser.add_argument("--jobs", type=int, default=1, help="how many jobs are queued (1 to 6)")
    jobs = parser.parse_args(argv).jobs
    print(f"Every interleaving of two workers' steps, with {plural(jobs, 'queued job')}:")
    counts = {claim: every_interleaving(claim, jobs) for claim in CLAIMS}
    for claim, count in counts.items():
        print(f"  claim_{claim + ':':8} {count['schedules']:5} schedules, "
              f"{count['duplicates']:5} send an email twice")
    naive = counts["naive"]
    print(f"  {naive['safe']} naive schedules are safe; in {naive['apart']} of them one "
          f"worker's whole claim runs before the other's first step")
    example = counts["naive"]["example"]
    if example is None:
        return
    print(f"\nA naive schedule that sends an email twice (which worker moves at each "
          f"step): {' '.join(str(w + 1) for w in example)}")
    race = Race("naive", jobs)
    try:
        for worker in example:
            print(f"  {race.step(worker)}")
        print(f"Result: {race.result()}")
    finally:
        race.close()


if __name__ == "__main__":
    main()
