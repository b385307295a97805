# Exercise 9: Limits: Bounding the Work.
# A payment worker that stays up and keeps the money right under pressure:
# each tenant gets a fixed number of running and waiting slots, retries
# spend from a service-wide budget, queued work can be cancelled, and an
# operation is charged at most once, across crashes, redeliveries, changed
# inputs and a provider that forgets its keys after 24 hours.
#
# Run it:   python3 ex09_charge_worker.py o7          (the O7 timeline)
#           python3 ex09_charge_worker.py admission   (tenant North's limits)
#           python3 ex09_charge_worker.py cancel      (before and after the charge)
#           python3 ex09_charge_worker.py budget      (an outage, with and without a budget)

import argparse
import collections
import hashlib
import json
import random
import sqlite3
import time

KEY_WINDOW_SECONDS = 24 * 3600   # the provider keeps a key this long (Stripe: 24 h)
KEY_TRUSTED_SECONDS = 23 * 3600  # how long we rely on it: a margin for clocks
MAX_RUNNING = 2                  # per tenant: operations being worked on...
MAX_WAITING = 5                  # ...and operations waiting for a slot
RETRY_RATIO = 0.1                # retries may be at most 10% of requests...
BUDGET_WINDOW_SECONDS = 60       # ...over the last minute


class Conflict(Exception):
    """The operation id was already used with other inputs."""


class Retryable(Exception):
    """A failure that may succeed later: a timeout, a 503."""


class Refused(Exception):
    """Admission control said no. The caller gets an answer, not a wait."""


SCHEMA = """
CREATE TABLE IF NOT EXISTS operations (
    id            TEXT PRIMARY KEY,     -- also the provider's idempotency key
    input_digest  TEXT NOT NULL,        -- SHA-256 of the inputs that matter
    state         TEXT NOT NULL CHECK (state IN ('started', 'charged')),
    charge_id     TEXT,                 -- the provider's id for the charge
    started_at    REAL                  -- when we first asked the provider
);
CREATE TABLE IF NOT EXISTS work (
    id      TEXT PRIMARY KEY,
    tenant  TEXT NOT NULL,
    inputs  TEXT NOT NULL,              -- JSON
    state   TEXT NOT NULL
            CHECK (state IN ('waiting', 'running', 'done', 'dead', 'cancelled'))
);
"""


def open_db(path):
    db = sqlite3.connect(path, isolation_level=None)     # autocommit
    db.executescript(SCHEMA)
    return db


def dollars(cents):
    return f"${cents / 100:.2f}"


def digest(inputs):
    """The same inputs, in any order, always give the same digest."""
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


# ---- the charge: at most once, whatever happens

def process(db, provider, op_id, inputs, clock=time.time):
    """Charge for operation op_id once. Safe to call again after a crash at
    any point; returns the provider's charge id."""
    # 1. Write down what we are about to do, before doing it.
    db.execute("INSERT INTO operations (id, input_digest, state, started_at)"
               " VALUES (?, ?, 'started', ?) ON CONFLICT (id) DO NOTHING",
               (op_id, digest(inputs), clock()))
    stored, state, charge_id, started_at = db.execute(
        "SELECT input_digest, state, charge_id, started_at FROM operations WHERE id = ?",
        (op_id,)).fetchone()
    # 2. The same id must mean the same payment.
    if stored != digest(inputs):
        raise Conflict(f"operation {op_id} was first made with other inputs")
    if state == "charged":
        return charge_id
    # 3. If the provider may have forgotten our key, a retry could charge a
    #    second time: ask it what it did instead (reconcile). Otherwise, or if
    #    it did nothing, charge, with the operation's id as the key.
    if clock() - started_at > KEY_TRUSTED_SECONDS:
        charge_id = provider.find_charge(op_id)
    if charge_id is None:
        charge_id = provider.charge(idempotency_key=op_id, **inputs)
    # 4. Record the charge. Only then may the message be acknowledged.
    db.execute("UPDATE operations SET charge_id = ?, state = 'charged'"
               " WHERE id = ? AND state = 'started'", (charge_id, op_id))
    return charge_id


def deliver(db, provider, message, dead_letters,
            attempts=5,                 # tries in all, the first one included
            base=0.2, cap=10.0,         # the ceiling of each wait, in seconds
            sleep=time.sleep, budget=None, rng=random, clock=time.time):
    """Process one message, retrying what may succeed later. Returns the
    charge id, or None after parking the message in dead_letters."""
    if budget is not None:
        budget.request()
    for attempt in range(attempts):
        try:
            return process(db, provider, message["id"], message["inputs"], clock)
        except Conflict:
            break                       # trying again cannot help
        except Retryable:
            last_try = attempt == attempts - 1
            if last_try or (budget is not None and not budget.allow_retry()):
                break
            sleep(rng.uniform(0, min(cap, base * 2 ** attempt)))   # full jitter
    dead_letters.append(message)
    return None


class RetryBudget:
    """Service-wide: retries may be at most RETRY_RATIO of the requests seen
    over the last BUDGET_WINDOW_SECONDS. In an outage, the service sends a
    tenth more calls, not five times as many."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.events = collections.deque()   # (when, "request" or "retry")

    def request(self):
        self.events.append((self.clock(), "request"))

    def allow_retry(self):
        while self.events and self.events[0][0] < self.clock() - BUDGET_WINDOW_SECONDS:
            self.events.popleft()
        kinds = collections.Counter(kind for _, kind in self.events)
        if kinds["retry"] + 1 > RETRY_RATIO * kinds["request"]:
            return False
        self.events.append((self.clock(), "retry"))
        return True


# ---- admission: a bounded queue per tenant

def admit(db, op_id, tenant, inputs):
    """Queue an operation if its tenant has a free waiting slot; otherwise
    refuse at once. The count and the insert are one statement, so two
    requests cannot both take the last slot."""
    added = db.execute("""
        INSERT INTO work (id, tenant, inputs, state)
        SELECT ?, ?, ?, 'waiting'
        WHERE (SELECT count(*) FROM work WHERE tenant = ? AND state = 'waiting') < ?
    """, (op_id, tenant, json.dumps(inputs), tenant, MAX_WAITING)).rowcount
    if not added:
        raise Refused(f"tenant {tenant} already has {MAX_WAITING} operations waiting;"
                      " try again later")


def start_next(db, tenant):
    """Move the tenant's oldest waiting operation to running, if the tenant
    has a free running slot. Returns its message, or None."""
    row = db.execute("""
        UPDATE work SET state = 'running'
        WHERE id = (SELECT id FROM work WHERE tenant = ? AND state = 'waiting'
                    ORDER BY rowid LIMIT 1)
          AND (SELECT count(*) FROM work WHERE tenant = ? AND state = 'running') < ?
        RETURNING id, inputs
    """, (tenant, tenant, MAX_RUNNING)).fetchone()
    return None if row is None else {"id": row[0], "inputs": json.loads(row[1])}


def finish(db, op_id, state):
    db.execute("UPDATE work SET state = ? WHERE id = ? AND state = 'running'", (state, op_id))


def cancel(db, op_id):
    """Cancel an operation that has not started. A charge that happened
    cannot be cancelled; say so, and what would undo it."""
    if db.execute("UPDATE work SET state = 'cancelled' WHERE id = ? AND state = 'waiting'",
                  (op_id,)).rowcount:
        return f"{op_id} cancelled: it had not started, so nothing was charged"
    charged = db.execute("SELECT charge_id FROM operations WHERE id = ? AND state = 'charged'",
                         (op_id,)).fetchone()
    if charged:
        return (f"{op_id} cannot be cancelled: it was charged as {charged[0]}."
                " Undoing it takes a refund: a new operation, with its own id and approval")
    return f"{op_id} cannot be cancelled now: it is running; ask again when it ends"


# ---- a provider to practise on

class Provider:
    """A payment provider with Stripe-like keys: the same key and inputs give
    the same charge for KEY_WINDOW_SECONDS; other inputs under a key are
    refused. It remembers every charge's key as its reference, for ever."""

    def __init__(self, clock, first_charge=1):
        self.clock = clock
        self.keys = {}                  # key -> (input digest, charge id, when)
        self.charges = {}               # charge id -> reference (the key)
        self.next_charge = first_charge
        self.calls = 0

    def charge(self, idempotency_key, **inputs):
        self.calls += 1
        known = self.keys.get(idempotency_key)
        if known and self.clock() - known[2] < KEY_WINDOW_SECONDS:
            if known[0] != digest(inputs):
                raise Conflict(f"provider: key {idempotency_key} was used with other inputs")
            print(f"{'':13}provider: key {idempotency_key} again, same inputs: {known[1]} again")
            return known[1]
        charge_id = f"C{self.next_charge}"
        self.next_charge += 1
        self.keys[idempotency_key] = (digest(inputs), charge_id, self.clock())
        self.charges[charge_id] = idempotency_key
        print(f"{'':13}provider: new charge {charge_id}, key {idempotency_key}")
        return charge_id

    def find_charge(self, reference):
        charge_id = next((c for c, ref in self.charges.items() if ref == reference), None)
        print(f"{'':13}provider: charges with reference {reference}: {charge_id or 'none'}")
        return charge_id


class WorkerCrashed(Exception):
    pass


class CrashAfterCall:
    """The provider, seen by a worker that dies as soon as the provider has
    charged: before it can record the charge or acknowledge the message."""

    def __init__(self, provider):
        self.provider = provider

    def charge(self, **request):
        self.provider.charge(**request)
        raise WorkerCrashed()


class Outage:
    """A provider that is down: every call fails, as a 503 would."""

    def __init__(self):
        self.calls = 0

    def charge(self, **request):
        self.calls += 1
        raise Retryable("503 Service Unavailable")


# ---- the command line: replays on a simulated clock

class Clock:
    """Simulated time, in seconds from midnight of day 1. It moves only when
    told to, so a replay of days takes no time at all."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def set(self, day, hours, minutes):
        self.now = (day - 1) * 86400 + hours * 3600 + minutes * 60

    def advance(self, seconds):
        self.now += seconds

    def stamp(self):
        day, seconds = divmod(int(self.now), 86400)
        return f"day {day + 1} {seconds // 3600:02}:{seconds // 60 % 60:02}"


def replay_o7():
    clock = Clock()
    db = open_db(":memory:")
    provider = Provider(clock, first_charge=9)
    o7 = {"id": "O7", "inputs": {"tenant": "North", "invoice": 7, "amount_cents": 5000}}
    dead = []

    def say(text):
        print(f"{clock.stamp()}  {text}")

    def charge_then_crash(message, hours, minutes):
        """W1 calls the provider, which charges; W1 dies a minute later."""
        op_id, inputs = message["id"], message["inputs"]
        clock.set(1, hours, minutes)
        say(f"W1 takes {op_id} ({inputs['tenant']}, invoice {inputs['invoice']},"
            f" {dollars(inputs['amount_cents'])}) and calls the provider, key {op_id}")
        try:
            process(db, CrashAfterCall(provider), op_id, inputs, clock)
        except WorkerCrashed:
            clock.set(1, hours, minutes + 1)
            say(f"W1 crashes before it records the charge or acknowledges {op_id}")

    charge_then_crash(o7, 12, 0)
    clock.set(1, 12, 2)
    say("the queue delivers O7 again (at least once, as promised); W2 takes it")
    charge = deliver(db, provider, o7, dead, clock=clock)
    say(f"W2 records {charge} and acknowledges O7")
    print(f"{'':13}the provider saw {provider.calls} calls and made {len(provider.charges)} charge")

    clock.set(1, 12, 5)
    changed = {"id": "O7", "inputs": dict(o7["inputs"], amount_cents=6000)}
    say(f"a message for O7 arrives again, now for {dollars(changed['inputs']['amount_cents'])}")
    deliver(db, provider, changed, dead, clock=clock)
    say(f"W2 refuses it (Conflict) and parks it: {len(dead)} dead letter")

    o8 = {"id": "O8", "inputs": {"tenant": "North", "invoice": 8, "amount_cents": 2000}}
    charge_then_crash(o8, 12, 10)
    clock.set(2, 14, 0)
    say("O8 is delivered again, 26 hours later: the provider has forgotten key O8")
    charge = deliver(db, provider, o8, dead, clock=clock)
    say(f"W2 records {charge} and acknowledges O8")
    print(f"{'':13}the provider made {len(provider.charges)} charges for 2 operations")


def show_admission():
    db = open_db(":memory:")
    print(f"each tenant may have {MAX_RUNNING} operations running and {MAX_WAITING} waiting")
    for number in range(1, 8):
        op_id = f"N{number}"
        try:
            admit(db, op_id, "North", {"invoice": number})
            print(f"North submits {op_id}: admitted, waiting")
        except Refused as refusal:
            print(f"North submits {op_id}: refused: {refusal}")
    for _ in range(3):
        message = start_next(db, "North")
        started = message["id"] if message else f"none: North has {MAX_RUNNING} running"
        print(f"the worker starts North's next: {started}")
    admit(db, "S1", "South", {"invoice": 1})
    print(f"South submits S1: admitted; the worker starts {start_next(db, 'South')['id']} at once")
    admit(db, "N6", "North", {"invoice": 6})
    print("North submits N6 again: admitted, now that 2 of its 5 waiting have started")


def show_cancel():
    db = open_db(":memory:")
    provider = Provider(Clock())
    for op_id in ("P1", "P2"):
        admit(db, op_id, "North", {"tenant": "North", "invoice": op_id, "amount_cents": 1000})
    message = start_next(db, "North")
    print(f"the worker starts {message['id']}")
    finish(db, message["id"], "done" if deliver(db, provider, message, []) else "dead")
    for op_id in ("P2", "P1"):
        print(f"cancel {op_id}: {cancel(db, op_id)}")


def show_budget():
    print("the provider is down; 100 charges arrive, one every 0.5 s, each allowed 5 tries")
    for budget_on in (False, True):
        clock, outage, dead = Clock(), Outage(), []
        budget = RetryBudget(clock) if budget_on else None
        rng = random.Random(1)
        for number in range(100):
            clock.now = max(clock.now, number * 0.5)
            message = {"id": f"M{number}", "inputs": {"amount_cents": 100}}
            deliver(open_db(":memory:"), outage, message, dead, sleep=clock.advance,
                    budget=budget, rng=rng, clock=clock)
        name = "with a 10% retry budget" if budget_on else "without a retry budget"
        print(f"{name}: {outage.calls} calls to the provider,"
              f" {outage.calls - 100} of them retries; {len(dead)} dead letters")


def main():
    commands = {"o7": replay_o7, "admission": show_admission, "cancel": show_cancel,
                "budget": show_budget}
    parser = argparse.ArgumentParser(description="Replays of Chapter 10's worked cases.")
    parser.add_argument("command", choices=commands)
    commands[parser.parse_args().command]()


if __name__ == "__main__":
    main()
