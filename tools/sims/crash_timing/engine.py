"""Crash-timing explorer (Chapters 5-8): one job's life, a crash at the moment
the reader picks, and what the recovery makes of it.

The job adds 10 loyalty points to Bob's account. A worker claims it with the
capstone's own library (code/capstone/tinyq.py) on a real SQLite file, and
the reader picks how the effect is protected:

    none         the points are added with no key, then the job is acknowledged
    key          a key made from the job goes with the request; the loyalty
                 service (one more service of the capstone's world_given.py)
                 adds the points and records the key in one statement, so a
                 repeat adds nothing
    key-apart    the mistake Chapter 8's second rule forbids: the points go
                 to the queue's own database, and the worker records their
                 key afterwards, in a step of its own
    transaction  the points are a write to the queue's own database inside
                 job.complete(): they commit together with the job's `done`
    ack-first    the job is acknowledged first, then the points are added

and a moment for the worker to die. The crash is the real code stopping: at
that moment the handler raises an exception nothing catches (like kill -9,
no line after it runs in that worker) and the worker's connection is
closed. A transaction it had open is never committed: tinyq's
transaction() rolls it back as the exception passes, where for a killed
process SQLite would. The clock then moves past the lease, and a new worker
claims whatever the queue holds and runs it to the end. Counting the points
actually added gives the outcome: lost (no effect), exactly once, or
duplicate.

Each moment is a line in the handlers below (`worker.moment(...)`): a cell
is "n/a" because that protection's code never passed the moment, not
because a table says so, and the moments offered for a protection, in its
real order, are those a run of its code notes as it passes them.
Ack-first runs claim, ack, effect: a crash after its claim comes before its
ack (the job is still running, its lease runs out, the next worker does it
all, once); what follows its ack is between-ack-and-effect (lost); after
its effect is its last step; it has no after-ack moment of its own. The
transaction has no after-effect moment: its effect and its ack commit
together, and in-transaction is the crash just before that commit. Each
moment has one name, the matrix row's, and a detail: what it is in the
chosen protection's code.

One moment, "between-effect-and-key", after the effect and before its key
is recorded, exists only where the key is recorded in a step of its own:
key-apart has it, and the transaction passes the same moment inside its
transaction. The key protection does not: its service records the key in
the statement that adds the points.

Run it in a terminal (every crash point against every protection):
    python3 -m tools.sims crash-timing
Or drive it from Python:
    sim = CrashTiming("none", "after-effect"); sim.run(); sim.state()
    sim.choose("key-apart", "between-effect-and-key", run=True)   # chosen and run at once
    sim.compare("after-effect")          # that crash under every protection, each run

The page draws every protection at once, a row each, under one crash
marker: so the state holds, for each protection, its steps in order (its
stations), how many steps come before each of its crash points, and what a
crash at each leads to (its column of the matrix); and the marker's stops,
every moment in the order of a job's life, then no crash. The chosen
protection is the one whose story (its timeline) the page tells.
"""
import argparse
import functools
import shutil
import tempfile
from pathlib import Path

from tools import course
from ..engine import Engine, action, check

tinyq = course.module("capstone/tinyq.py")

LEASE_SECONDS = 10.0
STEP_SECONDS = 1.0              # each step of the job's life, on the virtual clock
POINTS = 10
KIND = "loyalty_points"

PROTECTIONS = {
    "none": "no protection: the points are added with no key, then the job is acknowledged",
    "key": "an idempotency key made from the job: the loyalty service looks it up, "
           "adds the points and records the key in one atomic step",
    "key-apart": "a key recorded apart: the points go to the queue's own database, then the "
                 "worker records their key in a step of its own",
    "transaction": "the points are written to the queue's own database inside "
                   "job.complete(), and commit together with the job's done",
    "ack-first": "acknowledge first, then add the points: at most once",
}

# What the page calls each protection, short: a row's label, a column's heading.
NAMES = {"none": "no protection", "key": "idempotency key", "key-apart": "key recorded apart",
         "transaction": "one transaction", "ack-first": "ack first"}

# The matrix's rows, in the order a job's life passes them.
CRASHES = {
    "none": "no crash",
    "after-claim": "after the claim",
    "between-ack-and-effect": "after the ack, before the effect",
    "between-effect-and-key": "after the effect, before its key is recorded",
    "after-effect": "after the effect",
    "in-transaction": "inside the open transaction",
    "after-ack": "after the ack",
}

# The loyalty service's record, beside world_given.py's emails and charges:
# a row per request that added points, its key unique.
AWARDS_SCHEMA = """
CREATE TABLE awards (
    id       INTEGER PRIMARY KEY,
    key      TEXT NOT NULL UNIQUE,
    job      INTEGER NOT NULL,
    points   INTEGER NOT NULL,
    repeats  INTEGER NOT NULL DEFAULT 0
);
"""

# Points in the queue's own database: written inside job.complete() by the
# transaction protection, or by key-apart with its own key table.
EFFECT_SCHEMA = """
CREATE TABLE IF NOT EXISTS points (
    id      INTEGER PRIMARY KEY,
    job     INTEGER NOT NULL,
    worker  TEXT NOT NULL,
    points  INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS points_keys (
    key    TEXT PRIMARY KEY,
    award  INTEGER NOT NULL          -- the points row the key stands for
);
"""


class _Crash(BaseException):
    """The worker dies here. A BaseException, so no `except Exception` in
    tinyq or in a handler mistakes it for a failure to retry."""


def outcome_of(effects):
    return {0: "lost", 1: "exactly once"}.get(effects, "duplicate")


def job_key(job):
    """The stable key: made from the job, so every attempt sends the same one."""
    return f"points-for-job-{job.id}"


# ---- the effect, three ways

def add_points(db, job, worker):
    """Write the points; the new row's id."""
    return db.execute("INSERT INTO points (job, worker, points) VALUES (?, ?, ?) RETURNING id",
                      (job.id, worker, POINTS)).fetchone()[0]


@functools.cache
def world_of(keyed):
    """A copy of code/capstone/world_given.py (the given file) of the
    explorer's own, loaded once for each kind: its network loses nothing
    here (the crash is the only fault), and without a key every request
    carries a new random one, as world's Break It (TINYQ_NO_KEYS=1) makes it.
    Its settings are all it keeps: each run gets a World of its own."""
    world = course.fresh("capstone/world_given.py")
    world.LOST_REQUEST = world.LOST_REPLY = 0
    world.NO_KEYS = not keyed
    return world


def loyalty_service(keyed):
    """The loyalty service: one more service of the capstone's outside world,
    in a database of its own. It keeps keys as world's mail provider and
    bank do, through world's own `once`: one statement adds the points with
    their key, or counts a repeat of a key it has seen."""
    service = world_of(keyed).World(":memory:")
    service.db.executescript(AWARDS_SCHEMA)
    return service


def ask_for_points(service, job, key):
    """One request to the loyalty service. True if it added the points,
    False if it had seen the key and added nothing."""
    with service.network("loyalty service"):
        award = service.once("loyalty service", key, """
            INSERT INTO awards (key, job, points) VALUES (?, ?, ?)
            ON CONFLICT (key) DO UPDATE SET repeats = repeats + 1
            WHERE job = excluded.job AND points = excluded.points
            RETURNING id
        """, (service.keep(key), job.id, POINTS))
    (repeats,) = service.db.execute("SELECT repeats FROM awards WHERE id = ?", (award,)).fetchone()
    return repeats == 0


def points_keyed_by_hand(db, job, worker, key, moment, say):
    """The mistake: points in our own database, "protected" by a key the
    worker records itself, each statement committed on its own."""
    if db.execute("SELECT 1 FROM points_keys WHERE key = ?", (key,)).fetchone():
        say(f"found key {key} recorded in our own database: no points added")
        return
    award = add_points(db, job, worker)
    say(f"added {POINTS} points in our own database (committed on its own)")
    moment("between-effect-and-key", "after the points were committed, before the worker "
                                     "records their key in a step of its own")
    db.execute("INSERT INTO points_keys VALUES (?, ?)", (key, award))
    say(f"recorded key {key}, in a step of its own")


# ---- one worker process

class Worker:
    """One worker process: its own tinyq connection, and a handler for the
    story's protection."""

    def __init__(self, story, number):
        self.story = story
        self.name = f"worker {number}"
        self.queue = story.connect_queue(lease=LEASE_SECONDS)
        handler = getattr(self, "handle_" + story.protection.replace("-", "_"))
        self.queue.handler(KIND)(handler)

    def close(self):
        """The process is gone: its connection closes, and SQLite rolls back
        whatever transaction was still open."""
        self.queue.close()

    def turn(self):
        """Claim a job and run its handler, with tinyq's own work_one. False
        if no job was due."""
        self.story.tick()
        return self.queue.work_one()

    def step(self, label):
        """One step of the job's life done: a survey notes it, in order, as a
        station of the picture; a crash point comes after the steps before it."""
        if self.story.survey:
            self.story.stations.append(label)

    def moment(self, crash, label):
        """A place where this worker can die. It dies if this is the moment the
        reader chose and nobody has died yet; a survey only notes it passed."""
        story = self.story
        story.passed.setdefault(crash, {"detail": label, "after": len(story.stations)})
        if crash != story.crash or story.crashed_at is not None or story.survey:
            return
        story.crashed_at = label
        story.crash_in_transaction = self.queue.db.in_transaction
        story.tick(STEP_SECONDS / 2)
        story.log(self.name, f"crashes {label}", "crash")
        raise _Crash(label)

    def log(self, what, kind):
        self.story.log(self.name, what, kind)

    # ---- the handlers, one per protection

    def handle_none(self, job):
        self.effect_then_ack(job, None, self.effect)

    def handle_key(self, job):
        self.effect_then_ack(job, job_key(job), self.effect)

    def handle_key_apart(self, job):
        self.effect_then_ack(job, job_key(job), self.points_apart)

    def effect_then_ack(self, job, key, effect):
        self.claimed(job)
        self.moment("after-claim", "after the claim, before the effect")
        effect(job, key)
        self.moment("after-effect", "after the effect, before the ack" if key is None else
                    "after the effect (its key recorded too), before the ack")
        self.ack(job)
        self.moment("after-ack", "after the ack")

    def handle_transaction(self, job):
        self.claimed(job)
        self.moment("after-claim", "after the claim, before the transaction")
        self.story.tick()
        with job.complete() as db:
            add_points(db, job, self.name)
            self.step("write points")
            self.log(f"BEGIN IMMEDIATE; added {POINTS} points in the queue's own database, "
                     f"not committed yet", "effect")
            self.moment("between-effect-and-key", "right after the points' write, inside the "
                                                  "job's transaction: no key, the commit with "
                                                  "the ack records them")
            self.moment("in-transaction", "inside the open transaction, before the commit")
            self.story.tick()
        self.step("commit + ack")
        self.log(f"COMMIT: the points and job {job.id}'s done, together", "ack")
        self.moment("after-ack", "after the commit of the points and the ack")

    def handle_ack_first(self, job):
        self.claimed(job)
        self.moment("after-claim", "after the claim, before the ack")
        self.ack(job)
        self.moment("between-ack-and-effect", "after the ack, before the effect")
        self.effect(job, key=None)
        self.moment("after-effect", "after the effect, its last step")

    # ---- the steps they share

    def claimed(self, job):
        self.step("claim")
        until = self.story.now + LEASE_SECONDS
        self.log(f"claimed job {job.id} (attempt {job.attempts}); "
                 f"its lease runs until {until:g} s", "claim")
        if self.story.claimed_at is None:
            self.story.claimed_at = self.story.now

    def effect(self, job, key):
        self.story.tick()
        added = ask_for_points(self.story.service, job, key)
        self.step("add points" if key is None else "add points + key")
        sent = "with no key" if key is None else f"with key {key}"
        did = (f"it added {POINTS} points" if added
               else "it had seen the key and added nothing")
        self.log(f"asked the loyalty service for {POINTS} points {sent}: {did}", "effect")

    def points_apart(self, job, key):
        self.story.tick()
        # Its two steps, around the moment between them: the points, and
        # then their key, recorded apart.
        self.step("add points")
        points_keyed_by_hand(self.queue.db, job, self.name, key, self.moment,
                             lambda what: self.log(what, "effect"))
        self.step("record key")

    def ack(self, job):
        self.story.tick()
        with job.complete():
            pass                     # nothing to write: this is only the ack
        self.step("ack")
        self.log(f"acknowledged job {job.id}: done", "ack")


# ---- one run of the story

class Story:
    """A fresh queue and loyalty service, one job, the crash, the recovery.
    The service is another system: its database is its own, on a connection
    no worker's death closes. A survey runs the job once without crashing
    and notes the moments it passes."""

    def __init__(self, protection, crash, survey=False):
        self.protection = protection
        self.crash = crash
        self.survey = survey
        self.passed = {}                       # moment -> its detail and the steps before it
        self.stations = []                     # a survey's steps, in the order done
        self.now = 0.0
        self.timeline = []
        self.claimed_at = None
        self.crashed_at = None                 # the label of the moment it died at
        self.crash_in_transaction = False
        self.folder = tempfile.mkdtemp(prefix="crash-timing-")
        self.queue_path = str(Path(self.folder) / "queue.db")
        self.service = loyalty_service(keyed=protection == "key")

    def clock(self):
        return self.now

    # No waiting for the disk at each commit: the crash here is a process
    # dying, not a power cut, and a dying process's open transaction rolls
    # back whatever this setting says.
    def connect_queue(self, **options):
        queue = tinyq.Queue(self.queue_path, clock=self.clock, **options)
        queue.db.execute("PRAGMA synchronous = OFF")
        return queue

    def tick(self, seconds=STEP_SECONDS):
        self.now += seconds

    def log(self, who, what, kind):
        self.timeline.append({"t": self.now, "who": who, "what": what, "kind": kind})

    def play(self):
        """Run it: {outcome, effects, timeline}, or a survey's {passed}."""
        try:
            producer = self.connect_queue()
            try:
                return self._play(producer)
            finally:
                producer.close()
        finally:
            self.service.close()
            shutil.rmtree(self.folder, ignore_errors=True)

    def _play(self, producer):
        producer.db.executescript(EFFECT_SCHEMA)
        job_id = producer.enqueue(KIND, {"customer": "bob"})
        self.log("producer", f"queued job {job_id}: add {POINTS} loyalty points to Bob", "queued")
        self._run_worker(1)
        if self.survey:
            return {"passed": self.passed, "stations": self.stations}
        if self.crashed_at is None and self.crash != "none":
            self.log("explorer", "the worker never passed that moment: this protection does "
                                 "not have it", "n/a")
            return self._result(None)
        if self.crashed_at is not None:
            self._recover(producer, job_id)
        return self._result(self._effects(producer, job_id))

    def _run_worker(self, number):
        worker = Worker(self, number)
        try:
            if not worker.turn():
                worker.log("finds no job to claim: the queue holds nothing for it", "idle")
        except _Crash:
            pass
        finally:
            worker.close()

    def _recover(self, producer, job_id):
        gone = "worker 1's process is gone"
        if self.crash_in_transaction:
            gone += ", and its open transaction with it: what it wrote was never committed"
        self.log("system", gone, "gone")
        (status,) = [job["status"] for job in producer.jobs() if job["id"] == job_id]
        if status == "running":
            self.now = self.claimed_at + LEASE_SECONDS
            self.log("queue", f"job {job_id}'s lease runs out: nobody acknowledged it", "expired")
        else:
            self.log("queue", f"job {job_id} is {status}: nothing is left to take over", status)
        self.now = max(self.now, self.claimed_at + LEASE_SECONDS)
        self._run_worker(2)

    def _effects(self, producer, job_id):
        effects = sum(db.execute(f"SELECT count(*) FROM {table} WHERE job = ?", (job_id,))
                      .fetchone()[0] for db, table in ((producer.db, "points"),
                                                       (self.service.db, "awards")))
        said = {0: "never added", 1: "added once", 2: "added twice"}.get(
            effects, f"added {effects} times")
        self.log("result", f"Bob has {effects * POINTS} points: the points were {said}", "result")
        return effects

    def _result(self, effects):
        return {"outcome": "n/a" if effects is None else outcome_of(effects),
                "effects": effects, "timeline": self.timeline}


def play(protection, crash):
    return Story(check("protection", protection, (str, *PROTECTIONS)),
                 check("crash", crash, (str, *CRASHES))).play()


def survey(protection):
    """Run the job once without a crash: the steps this protection's code
    takes, in order (the picture's stations), and the moments it passes, in
    the order of a job's life, each with the matrix row's name, its detail
    (what it is in that code), and how many steps came before it. No crash
    comes after every step."""
    found = Story(protection, "none", survey=True).play()
    passed, stations = found["passed"], found["stations"]
    passed["none"] = {"detail": "the job runs to the end", "after": len(stations)}
    return {"stations": [{"id": f"step-{number}", "label": label}
                         for number, label in enumerate(stations, 1)],
            "points": [{"id": crash, "label": label, **passed[crash]}
                       for crash, label in CRASHES.items() if crash in passed]}


# ---- the explorer

class CrashTiming(Engine):
    TASKS = {
        "duplicate": "make a crash send the effect twice",
        "lost": "make a crash lose the job's effect",
        "key-not-enough": "find a crash point where a key recorded apart does not save you "
                          "but the transaction does",
    }
    SETTINGS = {"protection": (str, *PROTECTIONS), "crash": (str, *CRASHES)}
    # The page opens on no crash: the default, a crash after the effect,
    # would answer the first task before the reader chose anything.
    PAGE_STARTS_WITH = {"crash": "none"}

    def __init__(self, protection="none", crash=None):
        """crash: any moment (one the protection's code never passes runs
        to n/a); by default after the effect, the danger zone, where the
        protection has that moment, and no crash where it has not."""
        super().__init__()
        self.protection = check("protection", protection, self.SETTINGS["protection"])
        self.crash = "none"
        self.surveys = {}                     # protection -> its stations and moments
        self.outcomes = {}                    # protection -> each moment's outcome
        self.seen = {}                        # (protection, crash) -> outcome, from runs
        self.last = None                      # the result of the last run of the chosen one
        if crash is None:
            offered = [point["id"] for point in self.crash_points()]
            crash = "after-effect" if "after-effect" in offered else "none"
        self.choose(crash=crash)

    def crash_points(self, protection=None):
        """The moments this protection's code passes (surveyed once, then kept)."""
        return [dict(point) for point in self.surveyed(protection)["points"]]

    def surveyed(self, protection=None):
        protection = protection or self.protection
        if protection not in self.surveys:
            self.surveys[protection] = survey(protection)
        return self.surveys[protection]

    def outcomes_of(self, protection):
        """What a crash at each of the protection's moments leads to: its
        column of the matrix, each run afresh (once, then kept)."""
        if protection not in self.outcomes:
            self.outcomes[protection] = {}
            for point in self.crash_points(protection):
                result = play(protection, point["id"])
                self.outcomes[protection][point["id"]] = {"outcome": result["outcome"],
                                                          "effects": result["effects"]}
        return self.outcomes[protection]

    @action
    def choose(self, protection=None, crash=None, run=False):
        """Pick the protection whose story is told, a crash point, or both.
        The page's one crash marker moves along every protection at once,
        so any moment goes with any protection: one its code never passes
        runs to n/a. With run, the choice is run at once: its outcome."""
        if protection is not None:
            self.protection = check("protection", protection, self.SETTINGS["protection"])
        if crash is not None:
            self.crash = check("crash", crash, self.SETTINGS["crash"])
        self.last = None
        return self.run() if run else None

    @action
    def run(self):
        """Run the chosen story once; its outcome."""
        self.last = play(self.protection, self.crash)
        return self.saw(self.protection, self.crash, self.last["outcome"])

    @action
    def compare(self, crash):
        """A crash at one moment under every protection, each run afresh:
        what the page's rows show under its one marker. Each protection's
        outcome and effects; the chosen one's story is kept, as run()
        keeps it."""
        self.crash = check("crash", crash, self.SETTINGS["crash"])
        found = {}
        for protection in PROTECTIONS:
            result = play(protection, crash)
            self.saw(protection, crash, result["outcome"])
            found[protection] = {"outcome": result["outcome"], "effects": result["effects"]}
            if protection == self.protection:
                self.last = result
        return found

    def saw(self, protection, crash, outcome):
        """A run's outcome, noted: the tasks it earns. The outcome."""
        self.seen[(protection, crash)] = outcome
        if outcome in ("duplicate", "lost"):
            self.earned.add(outcome)
        if any(self.seen.get(("key-apart", moment)) == "duplicate"
               and self.seen.get(("transaction", moment)) == "exactly once"
               for moment in CRASHES):
            self.earned.add("key-not-enough")
        return outcome

    @action
    def matrix(self):
        """Every crash point against every protection, each cell run afresh."""
        cells = {crash: {} for crash in CRASHES}
        for protection in PROTECTIONS:
            for crash in CRASHES:
                result = play(protection, crash)
                cells[crash][protection] = {"outcome": result["outcome"],
                                            "effects": result["effects"]}
        return {"rows": [{"id": key, "label": label} for key, label in CRASHES.items()],
                "columns": [{"id": key, "name": NAMES[key], "label": label}
                            for key, label in PROTECTIONS.items()],
                "cells": cells}

    def row(self, protection):
        """One protection as the page draws it, a row under the one marker:
        its names, its steps, and its crash points, each with the steps
        before it, its detail and what a crash there leads to."""
        outcomes = self.outcomes_of(protection)
        return {"id": protection, "name": NAMES[protection], "label": PROTECTIONS[protection],
                "stations": [dict(station) for station in self.surveyed(protection)["stations"]],
                "points": [{**point, **outcomes[point["id"]]}
                           for point in self.crash_points(protection)]}

    def state(self):
        last = self.last or {}
        return {
            "protection": self.protection,
            "crash": self.crash,
            "protections": [{"id": key, "label": label, "name": NAMES[key]}
                            for key, label in PROTECTIONS.items()],
            # The marker's stops: the job's life in order, then no crash.
            "moments": [{"id": key, "label": label} for key, label in CRASHES.items()
                        if key != "none"] + [{"id": "none", "label": CRASHES["none"]}],
            "rows": [self.row(protection) for protection in PROTECTIONS],
            "lease": LEASE_SECONDS,
            "timeline": [dict(step) for step in last.get("timeline", [])],
            "outcome": last.get("outcome"),
            "effects": last.get("effects"),
            "tasks": self.tasks(),
        }


# ---- the text program

def say_cell(cell):
    if cell["outcome"] == "n/a":
        return "n/a"
    return f"{cell['outcome']} ({cell['effects']})"


def print_matrix(matrix):
    """Each crash point on a line of its own and its cells, indented, on the
    next, under the protections' names: narrow enough for a terminal."""
    columns = matrix["columns"]
    table = [[column["name"] for column in columns]]
    labels = ["crash point"]
    for row in matrix["rows"]:
        cells = matrix["cells"][row["id"]]
        table.append([say_cell(cells[column["id"]]) for column in columns])
        labels.append(row["label"])
    widths = [max(len(line[i]) for line in table) for i in range(len(columns))]
    for number, (label, line) in enumerate(zip(labels, table)):
        print(label)
        print("  " + "  ".join(text.ljust(width) for text, width in zip(line, widths)).rstrip())
        if number == 0:
            print("  " + "  ".join("-" * width for width in widths))


def main(argv=None):
    parser = argparse.ArgumentParser(
        description="Where a crash lands, against how the effect is protected.")
    parser.parse_args(argv)
    print(f"One job adds {POINTS} loyalty points; a worker dies at each moment, the lease "
          f"({LEASE_SECONDS:g} s) runs out,\na new worker finishes the job; the number in "
          f"brackets is how many times the points were added.\n")
    print_matrix(CrashTiming().matrix())
    print("\nThe row \"after the effect, before its key is recorded\" exists only where the "
          "key is recorded\nin a step of its own: with \"key recorded apart\", the worker adds "
          "the points in our own\ndatabase, then records their key. The idempotency key's "
          "service records its key in the\nstatement that adds the points. The transaction "
          "writes the points inside the job's\ntransaction: they commit with the ack.")


if __name__ == "__main__":
    main()
