"""Payment simulator (Chapters 6-8): Alice's $10 charges go through
a flaky bank, and a worker on the capstone's own library
(code/capstone/tinyq.py) retries them with backoff until each job is done
or dead.

The reader sets how often a request is lost on its way to the bank (nothing
happens: ConnectionError) and how often the bank charges and its reply is
lost on the way back (TimeoutError); the retry policy (attempts, base, cap,
full jitter or none); the key each request carries (none, a fresh one per
attempt, or a stable one made from the order); and how many charges Alice
has. The bank is the exercises' own: with no key, `bank_charge` of
code/ex07_retries.py; with a key, that of code/ex08_idempotency.py, which
remembers keys. Each run loads its own copy of that exercise
(course.fresh) and sets its constants from the settings, as a reader edits
them in the Study Drills (LOST_REQUEST, LOST_REPLY, BACKOFF_BASE,
BACKOFF_CAP), and the bank keeps its accounts in a database made by the
exercise's own SCHEMA. The bank's time.sleep is the simulator's: the copy's
`time` is replaced by the virtual clock, from outside, as the tests' time
warp replaces it for the exercise itself. The chances come from the
exercise's one set of dice, `dice`, seeded afresh for each attempt of each
job from the seed, the job's id and the attempt number, as ex07's `work`
does: the bank rolls it once, and a retry's wait is the next roll's
fraction of tinyq's ceiling, whose base and cap are the exercise's, so
that ceiling is the one ex07's `backoff` takes its fraction of. So an
attempt meets the same luck whatever the retry policy, and a seed loses the same requests and
replies, and waits as long, as `ex07_retries.py work --seed N` with the
same policy, whatever the keys.

lost_request and lost_reply split that one roll, so together they are at
most 1.

Alice starts with $100, or $20 a charge where that is more (the bank never
refuses a charge: not this lesson). She owes $10 for each job that ended
done (expected); the bank's ledger says what she paid (actual). With no key
or a fresh key per attempt every request that reaches the bank charges, so
she pays $10 more than she owes for each lost reply, whatever became of the
job. With a stable key the bank charges an order at most once, and she
pays more only for a dead job the bank did charge. The bank keeps no list
of charges, so the simulator counts an order's charges itself: a request
charged if Alice's balance went down. overcharge_cents counts charges
beyond an order's first.

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
import contextlib
import io
import types

from tools import course
from ..engine import Engine, action, changed, checked, program

tinyq = course.module("capstone/tinyq.py")
dollars = course.module("ex07_retries.py").dollars

PRICE_CENTS = 1000
LEASE_SECONDS = 30.0            # one worker, so no lease ever runs out
KEY_MODES = ("none", "fresh", "stable")


def attempts_listed(numbers):
    """attempt 1; attempts 1 and 3; attempts 1, 3 and 4."""
    words = [str(n) for n in numbers]
    if len(words) == 1:
        return f"attempt {words[0]}"
    return "attempts " + ", ".join(words[:-1]) + " and " + words[-1]


def times(count):
    return {1: "once", 2: "twice"}.get(count, f"{count} times")


# ---- the queue and the bank

class ExerciseDice:
    """The dice tinyq's queue draws its waits from, rng.uniform(0, ceiling),
    made Exercise 7's: a fraction of the ceiling from the exercise's `dice`,
    after the bank's roll (full jitter), so a seed repeats ex07's run; or,
    without jitter, each wait its ceiling in full. The last wait is kept
    for the timeline."""

    def __init__(self, exercise, jitter):
        self.exercise = exercise
        self.jitter = jitter
        self.last_wait = None

    def uniform(self, low, high):
        fraction = self.exercise.dice.random() if self.jitter else 1.0
        self.last_wait = low + fraction * (high - low)
        return self.last_wait


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

class Payment(Engine):
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

    def __init__(self, seed=1, charges=5, lost_request=0.3, lost_reply=0.3, attempts=5,
                 base=0.5, cap=8.0, jitter=True, keys="none"):
        super().__init__()
        self.settings = self.allowed({"seed": seed, "charges": charges,
                                      "lost_request": lost_request, "lost_reply": lost_reply,
                                      "attempts": attempts, "base": base, "cap": cap,
                                      "jitter": jitter, "keys": keys})
        self.queue = self.bank = None
        self._start()

    @classmethod
    def allowed(cls, values):
        """The settings, if every one is of its kind and in its range, and the
        two chances of loss together at most 1."""
        checked(cls.SETTINGS, values)
        if values["lost_request"] + values["lost_reply"] > 1:
            raise ValueError("lost_request and lost_reply share one roll per request: "
                             "together they can be at most 1")
        return values

    @action
    def configure(self, **changes):
        """Change any settings (the constructor's keywords) and start again
        from the beginning, nothing tried yet: run() or step() then. What the
        reader earned stays."""
        self.settings = self.allowed(changed(self.SETTINGS, self.settings, changes))
        self._start()

    def close(self):
        if self.queue is not None:
            self.queue.db.close()
        if self.bank is not None:
            self.bank.close()

    def _start(self):
        self.close()
        s = self.settings
        self.now = 0.0
        self.start_cents = max(10_000, 2 * PRICE_CENTS * s["charges"])
        # The exercise, a copy for this run, with the reader's settings as its
        # constants: its bank, its dice and its backoff.
        ex = course.fresh("ex07_retries.py" if s["keys"] == "none" else "ex08_idempotency.py")
        ex.LOST_REQUEST, ex.LOST_REPLY = s["lost_request"], s["lost_reply"]
        ex.BACKOFF_BASE, ex.BACKOFF_CAP = s["base"], s["cap"]
        ex.DATABASE = ":memory:"
        ex.time = types.SimpleNamespace(sleep=self.sleep, time=self.clock)   # the bank's wait
        self.exercise = ex
        self.dice = ExerciseDice(ex, s["jitter"])
        self.queue = tinyq.Queue(":memory:", lease=LEASE_SECONDS, max_attempts=s["attempts"],
                                 backoff_base=ex.BACKOFF_BASE, backoff_cap=ex.BACKOFF_CAP,
                                 clock=self.clock, rng=self.dice)
        self.bank = ex.connect()          # the bank's database, made by the exercise's SCHEMA
        self.bank.execute("INSERT INTO accounts VALUES ('alice', ?)", (self.start_cents,))
        self.charged = {}                 # order -> how many times the bank charged it
        for order in range(1, s["charges"] + 1):
            self.queue.enqueue("charge", {"order": order, "account": "alice",
                                          "amount_cents": PRICE_CENTS})
        self.timeline = []
        self.history = {}                # job id -> [(attempt, event)]: the worker's log
        self.finished = False

    def clock(self):
        return self.now

    def sleep(self, seconds):
        """The bank's time.sleep: time passes on the virtual clock, and nothing waits."""
        self.now += seconds

    # ---- running

    @action
    def run(self):
        """Every job to done or dead."""
        while self.step() is None:
            pass

    @action
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

    @action
    def compare_keys(self):
        """These settings and this seed, run to the end under each key mode
        in turn, this engine's own run untouched: what Alice owed and paid,
        the money taken twice or more for one order, and the jobs that
        died."""
        rows = []
        for mode in KEY_MODES:
            other = Payment(**{**self.settings, "keys": mode})
            try:
                other.run()
                ran = other.state()
            finally:
                other.close()
            rows.append({"keys": mode, "expected_cents": ran["expected_cents"],
                         "actual_cents": ran["actual_cents"],
                         "overcharge_cents": ran["overcharge_cents"],
                         "dead": sum(job["status"] == "dead" for job in ran["jobs"])})
        return rows

    def _key(self, job):
        mode = self.settings["keys"]
        if mode == "stable":
            return f"charge-for-order-{job.args['order']}"
        return f"charge-{job.id}-{job.token}" if mode == "fresh" else None

    def _charge(self, order, key):
        """The exercise's bank_charge, once. What it did, for the timeline,
        is read from Alice's balance before and after."""
        before, error = self.balance(), None
        self.bank_took = False
        keyed = () if key is None else (key,)
        try:
            with contextlib.redirect_stdout(io.StringIO()):    # ex08's "bank: ... seen before"
                self.exercise.bank_charge(self.bank, "alice", PRICE_CENTS, *keyed)
        except (ConnectionError, TimeoutError) as lost:
            error = lost
        if isinstance(error, ConnectionError):
            self.bank_did = "the request never reached the bank"
        elif self.balance() == before:
            self.bank_did = f"the bank had seen key {key}: no new charge"
        else:
            self.charged[order] = self.charged.get(order, 0) + 1
            self.bank_took = True
            self.bank_did = f"the bank charged {dollars(before - self.balance())}"
        if isinstance(error, TimeoutError):
            self.bank_did += ", and its reply was lost"
        if error is not None:
            raise error

    def _attempt(self, job):
        started, key, order = self.now, self._key(job), job.args["order"]
        what = f"job {job.id}, attempt {job.attempts}: charge {dollars(PRICE_CENTS)}"
        wait = None
        # ex07's rule: this attempt's luck comes from the seed, the job and the attempt
        self.exercise.dice.seed(f"{self.settings['seed']} {job.id} {job.attempts}")
        try:
            self._charge(order, key)
        except (ConnectionError, TimeoutError) as error:
            event = "lost request" if isinstance(error, ConnectionError) else "lost reply"
            self.queue.fail(job, error)
            dead = job.attempts >= self.queue.max_attempts
            outcome, wait = ("dead", None) if dead else ("retry", self.dice.last_wait)
            then = "dead, giving up" if dead else f"retry in {wait:.2f} s"
            text = f"{what}: {type(error).__name__}: {error}; {then}"
        else:
            self.queue.finish(job, "done")
            event, outcome, text = "approved", "done", f"{what}: done"
        self.history.setdefault(job.id, []).append((job.attempts, event))
        # For the picture: the attempt's span on the clock, whether the bank
        # took money, and when the job is due again (after its backoff wait).
        self.timeline.append({"t": started, "end": self.now, "job": job.id,
                              "attempt": job.attempts, "event": event, "outcome": outcome,
                              "wait": wait, "retry_at": None if wait is None else self.now + wait,
                              "key": key, "charged": self.bank_took, "bank": self.bank_did,
                              "text": text})
        if outcome == "dead":
            self.earned.add("dead")
        if self.charged.get(order, 0) > 1:
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
        return self.start_cents - self.balance()

    def balance(self):
        """Alice's balance, in the bank's accounts table."""
        return self.bank.execute(
            "SELECT balance_cents FROM accounts WHERE name = 'alice'").fetchone()[0]

    def jobs(self):
        jobs = []
        for job in self.queue.jobs():
            order = job["args"]["order"]
            charged = self.charged.get(order, 0)
            jobs.append({
                "id": job["id"], "order": order, "status": job["status"],
                "attempts": job["attempts"], "last_error": job["last_error"],
                "charged_times": charged,
                "worker_knows": worker_knows(job["status"], self.history.get(job["id"], []),
                                             self.settings["keys"]),
                "truth": truth(charged),
            })
        return jobs

    def pending_cents(self, jobs):
        """One charge of each order whose job still retries: it may end done
        with no further charge, so it is neither owed nor more yet."""
        return PRICE_CENTS * sum(1 for job in jobs
                                 if job["status"] not in ("done", "dead") and job["charged_times"])

    def difference(self, jobs):
        """What Alice paid against what she owes, and why they differ. An
        order charged while its job still retries is not "more" yet: its job
        may end done with no further charge. Only its later charges are."""
        expected, actual = self.expected_cents(), self.actual_cents()
        said = f"Alice paid {dollars(actual)} for orders worth {dollars(expected)}"
        why, open_orders = [], []
        for job in jobs:
            charged, order = job["charged_times"], job["order"]
            if job["status"] == "done" and charged > 1:
                why.append(f"order {order} was charged {times(charged)}")
            elif job["status"] == "dead" and charged:
                why.append(f"order {order} is dead, yet the bank charged it {times(charged)}")
            elif job["status"] not in ("done", "dead") and charged:
                open_orders.append(str(order))
                if charged > 1:
                    why.append(f"order {order} has been charged {times(charged)} already")
        if actual == expected:
            return said + ": right"
        held = self.pending_cents(jobs)
        more = f"{dollars(actual - expected - held)} more ({'; '.join(why)})" if why else ""
        if not open_orders:
            return f"{said}: {more}"
        orders = (f"order {open_orders[0]}" if len(open_orders) == 1 else
                  f"orders {', '.join(open_orders[:-1])} and {open_orders[-1]}")
        still_open = f"{dollars(held)} for {orders}, not done yet"
        return f"{said}: {more}, and {still_open}" if more else f"{said}: {still_open}"

    def state(self):
        jobs = self.jobs()
        return {
            "settings": dict(self.settings),
            "seed": self.settings["seed"],
            "time": self.now,
            "finished": self.finished,
            "start_cents": self.start_cents,
            "balance_cents": self.balance(),
            "timeline": [dict(entry) for entry in self.timeline],
            "jobs": jobs,
            "lost_requests": self._count("lost request"),
            "lost_replies": self._count("lost reply"),
            "price_cents": PRICE_CENTS,
            "orders_cents": PRICE_CENTS * self.settings["charges"],
            "expected_cents": self.expected_cents(),
            "actual_cents": self.actual_cents(),
            "pending_cents": self.pending_cents(jobs),
            "more_cents": (self.actual_cents() - self.expected_cents()
                           - self.pending_cents(jobs)),
            "overcharge_cents": PRICE_CENTS * sum(max(0, job["charged_times"] - 1)
                                                  for job in jobs),
            "difference": self.difference(jobs),
            "tasks": self.tasks(),
        }


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


main = program(Payment, "Charging Alice through a flaky bank.", print_run,
               seed="repeat the same run of chances", keys="the key each request carries",
               jitter="with --no-jitter, wait each ceiling in full")


if __name__ == "__main__":
    main()
