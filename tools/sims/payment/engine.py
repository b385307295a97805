"""Payment simulator (Chapters 6-8): Alice's $10 charges go through
a flaky bank, and a worker on the capstone's own library
(code/capstone/tinyq.py) retries them with backoff until each job is done
or dead.

The reader sets how often a request is lost on its way to the bank (nothing
happens: ConnectionError) and how often the bank charges and its reply is
lost on the way back (TimeoutError); the retry policy (attempts, base, cap,
full jitter or none); the key each request carries (none, a fresh one per
attempt, or a stable one made from the order); and how many charges Alice
has. The bank is Exercise 7's, with Exercise 8's memory of keys: one roll
per request. The chances come from two sets of dice, as in those
exercises: the network's are seeded afresh for each attempt of each job
from the seed, the job's id and the attempt number, so an attempt meets
the same luck whatever the retry policy; the waits draw from
random.Random(seed), one fraction of the ceiling per retry, in turn. So a
seed loses the same requests and replies, and waits as long, as
`ex07_retries.py work --seed N` with the same policy, whatever the keys.

lost_request and lost_reply split that one roll, so together they are at
most 1.

Alice starts with $100, or $20 a charge where that is more (the bank never
refuses a charge: not this lesson). She owes $10 for each job that ended
done (expected); the bank's ledger says what she paid (actual). With no key
or a fresh key per attempt every request that reaches the bank charges, so
she pays $10 more than she owes for each lost reply, whatever became of the
job. With a stable key the bank charges an order at most once, and she
pays more only for a dead job the bank did charge. overcharge_cents counts
charges beyond an order's first.

Beside the run, the state sets what the worker can know (its own log of
attempts) against what happened (the bank's ledger): a dead job whose
attempts include a timeout may have been charged, and only the bank knows.

Time is virtual: nothing sleeps and nothing reads the wall clock, so a seed
always gives the same run, and it runs in the browser (Pyodide).

Run it in a terminal:
    python3 -m tools.sims payment [--seed N] [--keys none|fresh|stable]
Or drive it from Python:
    sim = Payment(seed=1, keys="stable"); sim.run(); sim.state()
"""
import argparse
import random
import sqlite3

from .. import course

tinyq = course.module("capstone/tinyq.py")

PRICE_CENTS = 1000
BANK_SECONDS = 0.2              # each call to the bank takes this long, as in ex07
LEASE_SECONDS = 30.0            # one worker, so no lease ever runs out
KEY_MODES = ("none", "fresh", "stable")
TASKS = {
    "overcharge": "overcharge Alice",
    "impossible": "make the overcharge impossible without changing the bank",
    "dead": "get a job to the dead-letter list",
}
# Each setting: its kind and its range (or its choices).
SETTINGS = {
    "seed": (int, 0, 2**63),
    "charges": (int, 1, 20),
    "lost_request": (float, 0.0, 1.0),
    "lost_reply": (float, 0.0, 1.0),
    "attempts": (int, 1, 10),
    "base": (float, 0.01, 60.0),
    "cap": (float, 0.01, 3600.0),
    "jitter": (bool,),
    "keys": (str, *KEY_MODES),
}


def checked(settings):
    """The settings, if every one is of its kind and in its range."""
    for name, value in settings.items():
        kind, *allowed = SETTINGS[name]
        if kind is bool:
            ok = isinstance(value, bool)
        elif kind is str:
            ok = value in allowed
        else:
            kinds = int if kind is int else (int, float)
            ok = (isinstance(value, kinds) and not isinstance(value, bool)
                  and allowed[0] <= value <= allowed[1])
        if not ok:
            wanted = ("true or false" if kind is bool else " or ".join(allowed) if kind is str
                      else f"a {'whole ' if kind is int else ''}number from {allowed[0]} "
                           f"to {allowed[1]}")
            raise ValueError(f"{name} must be {wanted}, not {value!r}")
    if settings["lost_request"] + settings["lost_reply"] > 1:
        raise ValueError("lost_request and lost_reply share one roll per request: "
                         "together they can be at most 1")
    return settings


def dollars(cents):
    return f"${cents / 100:.2f}"


def ceiling(attempts, base, cap):
    """The longest wait after failed attempt number `attempts` (1, 2, ...,
    as tinyq and ex07 count): min(cap, base * 2**attempt) with attempt
    counted from 0."""
    return min(cap, base * 2 ** (attempts - 1))


def attempts_listed(numbers):
    """attempt 1; attempts 1 and 3; attempts 1, 3 and 4."""
    words = [str(n) for n in numbers]
    if len(words) == 1:
        return f"attempt {words[0]}"
    return "attempts " + ", ".join(words[:-1]) + " and " + words[-1]


def times(count):
    return {1: "once", 2: "twice"}.get(count, f"{count} times")


# ---- the queue and the bank

class Queue(tinyq.Queue):
    """tinyq's queue with Exercise 7's waits: full jitter, a fraction of the
    ceiling drawn from the worker's own dice, so a seed repeats ex07's run;
    or without jitter each wait its ceiling in full (and those dice stay
    still). The last wait is kept for the timeline."""

    def __init__(self, path, dice, jitter, **options):
        super().__init__(path, **options)
        self.dice = dice
        self.jitter = jitter
        self.last_wait = None

    def backoff(self, attempts):
        top = ceiling(attempts, self.backoff_base, self.backoff_cap)
        self.last_wait = self.dice.random() * top if self.jitter else top
        return self.last_wait


BANK_SCHEMA = """
CREATE TABLE accounts (
    name           TEXT PRIMARY KEY,
    balance_cents  INTEGER NOT NULL
);
CREATE TABLE charges (                    -- the bank's ledger: what really happened
    id        INTEGER PRIMARY KEY,
    order_id  INTEGER NOT NULL,
    cents     INTEGER NOT NULL,
    at        REAL NOT NULL
);
CREATE TABLE bank_requests (              -- every key the bank has answered
    idempotency_key  TEXT PRIMARY KEY,
    charge           INTEGER NOT NULL
);
"""


class Bank:
    """A service we do not control, in a database of its own. One roll of
    the network's dice per request: below lost_request it never arrives;
    below lost_request + lost_reply it charges (unless it knows the key) and
    the reply is lost; otherwise it charges (unless it knows the key) and
    says so."""

    def __init__(self, network, lost_request, lost_reply, start_cents, clock):
        self.network = network
        self.lost_request = lost_request
        self.lost_reply = lost_reply
        self.clock = clock
        self.did = None                  # what the last request did, for the timeline
        self.db = sqlite3.connect(":memory:", isolation_level=None)
        self.db.executescript(BANK_SCHEMA)
        self.db.execute("INSERT INTO accounts VALUES ('alice', ?)", (start_cents,))

    def charge(self, order_id, cents, key=None):
        roll = self.network.random()
        if roll < self.lost_request:
            self.did = "the request never reached the bank"
            raise ConnectionError("could not reach the bank")
        # The key's lookup, the charge and the key's record: one transaction.
        self.db.execute("BEGIN IMMEDIATE")
        try:
            seen = key is not None and self.db.execute(
                "SELECT charge FROM bank_requests WHERE idempotency_key = ?", (key,)).fetchone()
            if seen:
                self.did = f"the bank had seen key {key}: no new charge"
            else:
                self.db.execute("UPDATE accounts SET balance_cents = balance_cents - ? "
                                "WHERE name = 'alice'", (cents,))
                charge = self.db.execute(
                    "INSERT INTO charges (order_id, cents, at) VALUES (?, ?, ?) RETURNING id",
                    (order_id, cents, self.clock())).fetchone()[0]
                if key is not None:
                    self.db.execute("INSERT INTO bank_requests VALUES (?, ?)", (key, charge))
                self.did = f"the bank charged {dollars(cents)}"
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        if roll < self.lost_request + self.lost_reply:
            self.did += ", and its reply was lost"
            raise TimeoutError("no reply from the bank")
        return "approved"

    def charged_times(self, order_id):
        return self.db.execute("SELECT count(*) FROM charges WHERE order_id = ?",
                               (order_id,)).fetchone()[0]

    def balance(self):
        return self.db.execute("SELECT balance_cents FROM accounts").fetchone()[0]


# ---- what the worker can know about a job, from its own log

def worker_knows(status, history, keys):
    """history: [(attempt, event)], the worker's own log of this job."""
    if not history:
        return "not tried yet"
    timeouts = [attempt for attempt, event in history if event == "lost reply"]
    tried = f"{len(history)} attempt" + ("" if len(history) == 1 else "s")
    if status == "done":
        if keys == "stable":
            return ("charged once: the bank approved it, and every attempt carried the "
                    "order's key")
        if not timeouts:
            return ("charged once: the bank approved it"
                    + (", and every earlier request was lost on the way" if len(history) > 1
                       else ""))
        return (f"charged at least once: the bank approved it, but {attempts_listed(timeouts)} "
                f"timed out, and each may have charged too: up to {len(timeouts) + 1} "
                f"charges, unknown")
    if status != "dead":
        return f"not finished: {tried} so far" + (
            f", {attempts_listed(timeouts)} timed out" if timeouts else "")
    last = history[-1][1]
    said = (f"dead after {tried}; its last error was a "
            + ("timeout (TimeoutError)" if last == "lost reply"
               else "lost request (ConnectionError)"))
    if not timeouts:
        return said + ": every request was lost on the way, so the bank never charged it"
    if last != "lost reply":
        said += f", but {attempts_listed(timeouts)} timed out"
    if keys == "stable":
        return said + (": the bank may have charged it, at most once (the key): unknown. "
                       "A replay with the same key is safe while the bank keeps keys")
    most = "once" if len(timeouts) == 1 else f"up to {len(timeouts)} times"
    return said + f": the bank may have charged it {most}: unknown. A replay may charge again"


def truth(charged):
    return "the bank never charged it" if charged == 0 else f"the bank charged it {times(charged)}"


# ---- the simulator

class Payment:
    def __init__(self, seed=1, charges=5, lost_request=0.3, lost_reply=0.3, attempts=5,
                 base=0.5, cap=8.0, jitter=True, keys="none"):
        self.settings = checked({"seed": seed, "charges": charges, "lost_request": lost_request,
                                 "lost_reply": lost_reply, "attempts": attempts, "base": base,
                                 "cap": cap, "jitter": jitter, "keys": keys})
        self.earned = set()
        self.queue = self.bank = None
        self._start()

    def configure(self, **changes):
        """Change any settings (the constructor's keywords) and start again
        from the beginning, nothing tried yet: run() or step() then. What the
        reader earned stays."""
        unknown = sorted(set(changes) - set(SETTINGS))
        if unknown:
            raise ValueError(f"unknown setting {unknown[0]!r}; known: {', '.join(SETTINGS)}")
        self.settings = checked({**self.settings, **changes})
        self._start()

    def close(self):
        for service in (self.queue, self.bank):
            if service is not None:
                service.db.close()

    def _start(self):
        self.close()
        s = self.settings
        self.now = 0.0
        self.start_cents = max(10_000, 2 * PRICE_CENTS * s["charges"])
        worker_dice = random.Random(s["seed"])     # the waits, as ex07's jitter dice
        self.network = random.Random()             # seeded for each attempt, as in ex07
        self.queue = Queue(":memory:", worker_dice, s["jitter"], lease=LEASE_SECONDS,
                           max_attempts=s["attempts"], backoff_base=s["base"],
                           backoff_cap=s["cap"], clock=self.clock)
        self.bank = Bank(self.network, s["lost_request"], s["lost_reply"], self.start_cents,
                         self.clock)
        for order in range(1, s["charges"] + 1):
            self.queue.enqueue("charge", {"order": order, "account": "alice",
                                          "amount_cents": PRICE_CENTS})
        self.timeline = []
        self.history = {}                # job id -> [(attempt, event)]: the worker's log
        self.finished = False

    def clock(self):
        return self.now

    # ---- running

    def run(self):
        """Every job to done or dead."""
        while self.step() is None:
            pass

    def step(self):
        """One attempt: the next job due, waiting for it if none is due yet.
        Says why not, once every job is done or dead."""
        if self.finished:
            return "every job is done or dead: configure to run again"
        job = self.queue.claim()
        if job is None:
            due = min((job["run_at"] for job in self.queue.jobs() if job["status"] == "queued"),
                      default=None)
            if due is None:
                self._finish()
                return self.step()
            self.now = max(self.now, due)      # nothing due: the worker sleeps until then
            job = self.queue.claim()
        self._attempt(job)
        if not self.queue.counts()["queued"]:
            self._finish()
        return None

    def _key(self, job):
        mode = self.settings["keys"]
        if mode == "stable":
            return f"charge-for-order-{job.args['order']}"
        return f"charge-{job.id}-{job.token}" if mode == "fresh" else None

    def _attempt(self, job):
        started, key, order = self.now, self._key(job), job.args["order"]
        what = f"job {job.id}, attempt {job.attempts}: charge {dollars(PRICE_CENTS)}"
        self.now += BANK_SECONDS
        wait = None
        # ex07's rule: this attempt's luck comes from the seed, the job and the attempt
        self.network.seed(f"{self.settings['seed']} {job.id} {job.attempts}")
        try:
            self.bank.charge(order, PRICE_CENTS, key)
        except (ConnectionError, TimeoutError) as error:
            event = "lost request" if isinstance(error, ConnectionError) else "lost reply"
            self.queue.fail(job, error)
            dead = job.attempts >= self.queue.max_attempts
            outcome, wait = ("dead", None) if dead else ("retry", self.queue.last_wait)
            then = "dead, giving up" if dead else f"retry in {wait:.2f} s"
            text = f"{what}: {type(error).__name__}: {error}; {then}"
        else:
            self.queue.finish(job, "done")
            event, outcome, text = "approved", "done", f"{what}: done"
        self.history.setdefault(job.id, []).append((job.attempts, event))
        self.timeline.append({"t": started, "job": job.id, "attempt": job.attempts,
                              "event": event, "outcome": outcome, "wait": wait, "key": key,
                              "bank": self.bank.did, "text": text})
        if outcome == "dead":
            self.earned.add("dead")
        if self.bank.charged_times(order) > 1:
            self.earned.add("overcharge")

    def _finish(self):
        self.finished = True
        s = self.settings
        if (s["keys"] == "stable" and s["lost_reply"] > 0 and self._count("lost reply")
                and self.actual_cents() == self.expected_cents()):
            self.earned.add("impossible")

    def _count(self, event):
        return sum(entry["event"] == event for entry in self.timeline)

    # ---- what the page shows

    def expected_cents(self):
        """What Alice owes: the orders whose jobs are done."""
        return PRICE_CENTS * self.queue.counts()["done"]

    def actual_cents(self):
        """What the bank took from her."""
        return self.start_cents - self.bank.balance()

    def jobs(self):
        jobs = []
        for job in self.queue.jobs():
            order = job["args"]["order"]
            charged = self.bank.charged_times(order)
            jobs.append({
                "id": job["id"], "order": order, "status": job["status"],
                "attempts": job["attempts"], "last_error": job["last_error"],
                "charged_times": charged,
                "worker_knows": worker_knows(job["status"], self.history.get(job["id"], []),
                                             self.settings["keys"]),
                "truth": truth(charged),
            })
        return jobs

    def difference(self, jobs):
        expected, actual = self.expected_cents(), self.actual_cents()
        said = f"Alice paid {dollars(actual)} for orders worth {dollars(expected)}"
        if actual == expected:
            return said + ": right"
        why = []
        for job in jobs:
            charged = job["charged_times"]
            if job["status"] == "done" and charged > 1:
                why.append(f"order {job['order']} was charged {times(charged)}")
            elif job["status"] != "done" and charged:
                state = "is dead" if job["status"] == "dead" else "is not done yet"
                why.append(f"order {job['order']} {state}, yet the bank charged it "
                           f"{times(charged)}")
        return f"{said}: {dollars(actual - expected)} more ({'; '.join(why)})"

    def state(self):
        jobs = self.jobs()
        return {
            "settings": dict(self.settings),
            "seed": self.settings["seed"],
            "time": self.now,
            "finished": self.finished,
            "start_cents": self.start_cents,
            "balance_cents": self.bank.balance(),
            "timeline": [dict(entry) for entry in self.timeline],
            "jobs": jobs,
            "lost_requests": self._count("lost request"),
            "lost_replies": self._count("lost reply"),
            "expected_cents": self.expected_cents(),
            "actual_cents": self.actual_cents(),
            "overcharge_cents": PRICE_CENTS * sum(max(0, job["charged_times"] - 1)
                                                  for job in jobs),
            "difference": self.difference(jobs),
            "tasks": [{"id": key, "text": text, "done": key in self.earned}
                      for key, text in TASKS.items()],
        }


# What the page may call, through sims.api: "new" makes a Payment.
API = {"make": Payment, "methods": {"configure", "run", "step", "state"},
       "functions": {}}


# ---- the text program

def print_run(sim):
    s = sim.settings
    jitter = "full jitter" if s["jitter"] else "no jitter"
    print(f"seed {s['seed']}; {s['charges']} charges of {dollars(PRICE_CENTS)} for alice; "
          f"lost requests {s['lost_request']:.0%}, lost replies {s['lost_reply']:.0%}; "
          f"{s['attempts']} attempts, waits from {s['base']:g} s up to {s['cap']:g} s, "
          f"{jitter}; keys: {s['keys']}")
    sim.run()
    state = sim.state()
    for entry in state["timeline"]:
        print(f"{entry['t']:7.2f} s  {entry['text']}")
        print(f"{'':11}({entry['bank']})")
    done = sum(job["status"] == "done" for job in state["jobs"])
    print(f"\njobs: {done} done, {len(state['jobs']) - done} dead")
    for job in state["jobs"]:
        if job["status"] == "dead":
            print(f"  job {job['id']}: the worker knows: {job['worker_knows']}")
            print(f"  {'':{len(str(job['id'])) + 5}}the truth: {job['truth']}")
    print(state["difference"])


def main(argv=None):
    parser = argparse.ArgumentParser(description="Charging Alice through a flaky bank.")
    parser.add_argument("--seed", type=int, default=1, help="repeat the same run of chances")
    parser.add_argument("--keys", choices=KEY_MODES, default="none",
                        help="the key each request carries")
    parser.add_argument("--charges", type=int, default=5)
    parser.add_argument("--attempts", type=int, default=5)
    parser.add_argument("--no-jitter", action="store_true", help="wait each ceiling in full")
    options = parser.parse_args(argv)
    sim = Payment(seed=options.seed, keys=options.keys, charges=options.charges,
                  attempts=options.attempts, jitter=not options.no_jitter)
    try:
        print_run(sim)
    finally:
        sim.close()


if __name__ == "__main__":
    main()
