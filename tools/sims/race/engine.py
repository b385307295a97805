"""Race stepper (Chapter 4): two workers run ex05's claim_naive (SELECT, then
UPDATE) or claim_atomic (one UPDATE ... RETURNING) one statement at a time,
in the order the reader chooses, on a real SQLite file with one connection
per worker. The code panel is the real source of claim_naive, claim_atomic
and ack from code/ex05_two_workers.py, and the statements each step runs are
read out of that source too, so what the reader sees is what runs.

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
# each worker, one turn of work()'s loop:
job = {claim}(db)
if job is None:
    return                                # no job: this worker stops
job_id, kind, args = job
HANDLERS[kind](**json.loads(args))        # send_welcome_email: the email goes out
ack(db, job_id)"""



# ---- the code panel, and the statements it shows

class Panel:
    """The code the reader sees, and where in it each statement is."""

    def __init__(self, claim):
        self.lines = []
        self.sections = []
        claim_name = f"claim_{claim}"
        self.claim = self._add_function(getattr(ex05, claim_name))
        self.ack = self._add_function(ex05.ack)
        self.loop = self._add_text("work() loop", LOOP.format(claim=claim_name))

    def _add_text(self, name, text):
        if self.lines:
            self.lines.append("")
        first = len(self.lines) + 1
        self.lines += text.splitlines()
        self.sections.append({"name": name, "first": first, "last": len(self.lines)})
        return first

    def _add_function(self, function):
        source = textwrap.dedent(inspect.getsource(function))
        first = self._add_text(function.__name__, source)
        tree = ast.parse(source).body[0]
        return {"name": function.__name__, "first": first, "body": tree.body}

    def statement(self, function, matches):
        """(lines, sql): the panel lines of the first statement in function's
        body that matches, and the SQL it passes to db.execute, if any."""
        for node in function["body"]:
            if matches(node):
                offset = function["first"] - 1
                lines = range(node.lineno + offset, node.end_lineno + offset + 1)
                return list(lines), sql_in(node)
        raise LookupError(f"ex05_two_workers.py has changed: {function['name']} "
                          f"has no statement this step can run")

    def loop_lines(self, text, count=1):
        """The panel lines of the loop listing, starting at the line containing text."""
        for number in range(self.loop, len(self.lines) + 1):
            if text in self.lines[number - 1]:
                return list(range(number, number + count))
        raise LookupError(f"the loop listing has no line with {text!r}")


def sql_in(node):
    for inner in ast.walk(node):
        if isinstance(inner, ast.Call) and getattr(inner.func, "attr", None) == "execute":
            return inner.args[0].value
    return None


def runs_sql(word):
    """Matches a statement whose db.execute(...) SQL contains word."""
    return lambda node: word in (sql_in(node) or "")


# ---- the steps: what each one runs, and what it reports

class Step:
    def __init__(self, label, lines, run, sql=None):
        self.label = label          # short: "SELECT", "if none: stop", "send", ...
        self.lines = lines          # the panel lines it highlights
        self.run = run              # run(race, worker, step) -> what it did, in words
        self.sql = sql


@functools.lru_cache(maxsize=None)
def panel_and_program(claim):
    """Read once per claim: the source does not change while we run."""
    panel = Panel(claim)
    return panel, build_program(claim, panel)


def build_program(claim, panel):
    """The steps of one worker's turn, exactly as ex05 runs them."""
    ack_lines, ack_sql = panel.statement(panel.ack, runs_sql("UPDATE"))
    send = Step("send", panel.loop_lines("HANDLERS"), run_send)
    ack = Step("UPDATE to done", ack_lines, run_ack, ack_sql)
    if claim == "naive":
        select_lines, select_sql = panel.statement(panel.claim, runs_sql("SELECT"))
        check_lines, _ = panel.statement(panel.claim, lambda node: isinstance(node, ast.If))
        update_lines, update_sql = panel.statement(panel.claim, runs_sql("UPDATE"))
        return [Step("SELECT", select_lines, run_select, select_sql),
                Step("if none: stop", check_lines, run_check),
                Step("UPDATE to running", update_lines, run_mark, update_sql),
                send, ack]
    claim_lines, claim_sql = panel.statement(panel.claim, runs_sql("UPDATE"))
    return [Step("UPDATE ... RETURNING", claim_lines, run_claim_atomic, claim_sql),
            Step("if none: stop", panel.loop_lines("if job is None", 2), run_check),
            send, ack]


def run_select(race, worker, step):
    worker.job = worker.db.execute(step.sql).fetchone()
    worker.locals = {"oldest": shown(worker.job)}
    return f"SELECT found job {worker.job[0]}" if worker.job else "SELECT found no queued job"


def run_claim_atomic(race, worker, step):
    worker.claimed_while_other_busy = race.other(worker).busy()
    worker.job = worker.db.execute(step.sql, (worker.name,)).fetchone()
    worker.locals = {"job": shown(worker.job)}
    worker.holds = worker.job[0] if worker.job else None
    return (f"UPDATE ... RETURNING claimed job {worker.job[0]}" if worker.job
            else "UPDATE ... RETURNING matched no queued job")


def run_check(race, worker, step):
    if worker.job is None:
        worker.done = True
        return "no job, so it stops"
    return f"it has job {worker.job[0]}, so it goes on"


def run_mark(race, worker, step):
    job_id = worker.job[0]
    before = race.row(job_id)
    worker.db.execute(step.sql, (worker.name, job_id))
    worker.locals = {"job": shown(worker.job)}      # claim_naive returned oldest
    worker.holds = job_id
    said = f"UPDATE marked job {job_id} running for {worker.name}"
    if before["worker"] not in (None, worker.name):
        # The naive UPDATE has no condition on status: it overwrites the other's mark.
        said += f", over {before['worker']}'s mark (the row said {before['status']})"
    return said


def run_send(race, worker, step):
    job_id = worker.job[0]
    duplicate = any(email["job"] == job_id for email in race.outbox)
    race.outbox.append({"job": job_id, "worker": worker.name, "duplicate": duplicate})
    if duplicate and race.claim == "naive":
        race.earned.add("duplicate")
    return f"sent the email for job {job_id}" + (", a duplicate" if duplicate else "")


def run_ack(race, worker, step):
    worker.db.execute(step.sql, (worker.job[0],))
    worker.done = True
    worker.holds = None
    return f"UPDATE marked job {worker.job[0]} done"


def touches(sql):
    """What a statement does to the jobs table: "read", "wrote" or None."""
    if sql is None:
        return None
    return "wrote" if "UPDATE" in sql else "read"


def shown(job):
    """A claim's row as the worker's variable holds it, cut short."""
    return "None" if job is None else f"({job[0]}, {job[1]!r}, …)"


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
        self.locals = {}                # its variables, as the code names them
        self.holds = None               # the job it believes is its own

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
        self.panel, self.program = panel_and_program(self.claim)
        self.outbox = []
        self.log = []                   # one entry per step run: who, what, which lines

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
        runner.last = step.run(self, runner, step)
        runner.next += 1
        self.log.append({"worker": worker, "step": step.label, "said": runner.last,
                         "lines": list(step.lines), "table": touches(step.sql)})
        if self.claim == "atomic" and self.finished() and self._overlapped_safely():
            self.earned.add("atomic-safe")
        return f"{runner.name}: {runner.last}"

    def finished(self):
        return all(worker.done for worker in self.workers)

    def other(self, worker):
        return self.workers[1 - worker.index]

    def _overlapped_safely(self):
        overlapped = any(worker.claimed_while_other_busy for worker in self.workers)
        return overlapped and not any(email["duplicate"] for email in self.outbox)

    def row(self, job_id):
        return next(row for row in self.table() if row["id"] == job_id)

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
            "code": list(self.panel.lines),
            "sections": [dict(section) for section in self.panel.sections],
            "workers": [self._worker_state(worker) for worker in self.workers],
            "table": self.table(),
            "outbox": [dict(email) for email in self.outbox],
            "log": [dict(entry) for entry in self.log],
            "result": self.result(),
            "finished": self.finished(),
            "tasks": self.tasks(),
        }

    def _worker_state(self, worker):
        step = None if worker.done else self.program[worker.next]
        return {
            "name": worker.name,
            "next_line": step.lines[0] if step else None,
            "next_lines": list(step.lines) if step else [],
            "next_step": step.label if step else None,
            "done": worker.done,
            "last": worker.last,
            "locals": [[name, value] for name, value in worker.locals.items()],
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
