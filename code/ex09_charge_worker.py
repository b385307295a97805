# Exercise 9: Limits: Bounding the Work.
# A payment worker that stays up and keeps the money right under pressure:
# each tenant gets a fixed number of running and waiting slots, every
# operation has a deadline, retries spend from each worker's budget (spent,
# it puts work back for later), all workers together spend from one budget
# of money an hour, clients ask for status and may cancel what has not yet
# called the provider, every parked operation keeps its reason, and an
# operation is charged at most once, across crashes, redeliveries, changed
# inputs and a provider that forgets its keys after 24 hours.
#
# Run it:   python3 ex09_charge_worker.py o7          (the O7 timeline)
#           python3 ex09_charge_worker.py admission   (tenant North's limits)
#           python3 ex09_charge_worker.py cancel      (status and cancel, in every state)
#           python3 ex09_charge_worker.py deadline    (a provider that stalls)
#           python3 ex09_charge_worker.py budget      (an outage, with and without a budget)
#           python3 ex09_charge_worker.py spend       (the service's budget of money an hour)
#           python3 ex09_charge_worker.py crash after-commit
#                     (W1 dies at one point: before-call, after-commit or after-record)

import argparse
import collections
import hashlib
import json
import os
import random
import sqlite3
import time

KEY_WINDOW_SECONDS = 24 * 3600   # the provider keeps a key this long (Stripe's API v1:
                                 # at least 24 h)
KEY_TRUSTED_SECONDS = 23 * 3600  # how long we rely on it: a margin for clocks
MAX_RUNNING = 2                  # per tenant: operations being worked on...
MAX_WAITING = 5                  # ...and operations waiting for a slot
DEADLINE_SECONDS = 30            # an operation must be over this long after it starts
LEASE_SECONDS = 60               # a running slot is held this long, unless given back:
                                 # longer than the deadline, so a live worker gives up first
MAX_LOST = 3                     # an operation whose worker died this often is dead
RETRY_RATIO = 0.1                # retries may be at most 10% of requests...
BUDGET_WINDOW_SECONDS = 60       # ...over the last minute
PUT_BACK_SECONDS = 60            # an operation put back waits this long to start again
MAX_CENTS_PER_HOUR = 50000       # the whole service may charge $500.00 an hour


class Conflict(Exception):
    """The operation id was already used with other inputs."""


class Retryable(Exception):
    """A failure that trying again may cure: a timeout, a 503. What the
    provider did is not known, so a retry must carry the same key."""


class Parked(Exception):
    """Delivery gave up: the operation is dead, for a person, for this reason."""


class RetryLater(Exception):
    """This worker's retry budget is spent. The operation is not at fault:
    it goes back to wait, to be tried again later."""


class Refused(Exception):
    """Admission control said no. The caller gets an answer, not a wait."""


class OverBudget(Exception):
    """The service's spend budget for this hour is taken. Nothing was sent."""


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
            CHECK (state IN ('waiting', 'running', 'done', 'dead', 'cancelled')),
    starts  INTEGER NOT NULL DEFAULT 0, -- how often it was started: the fencing token
    lost    INTEGER NOT NULL DEFAULT 0, -- how often its worker died holding it
    not_before    REAL NOT NULL DEFAULT 0,  -- while waiting: not to start before this
    locked_until  REAL,                 -- while running: when its lease runs out
    cancel_asked  INTEGER NOT NULL DEFAULT 0, -- its client asked to cancel it
    last_error    TEXT                  -- why it is dead, or was put back
);
CREATE TABLE IF NOT EXISTS spend (
    hour   INTEGER PRIMARY KEY,         -- hours since the clock's zero
    cents  INTEGER NOT NULL             -- taken from the budget in that hour
);
"""

# An operation for which no call to the provider was ever begun: process()
# writes its record before the first call.
NEVER_CALLED = "id NOT IN (SELECT id FROM operations)"


def open_db(path):
    db = sqlite3.connect(path, isolation_level=None)     # autocommit
    db.executescript(SCHEMA)
    return db


def dollars(cents):
    return f"${cents / 100:.2f}"


def digest(inputs):
    """The same inputs, in any order, always give the same digest. Only the
    order is made the same: 5000 and 5000.0 differ, so callers must send
    each input in one form (whole cents, as here)."""
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


# ---- the charge: at most once, whatever happens

def process(db, provider, op_id, inputs, clock=time.time, timeout=None):
    """Charge for operation op_id once. Safe to call again after a crash at
    any point; returns the provider's charge id. Each call to the provider
    gets `timeout`, the seconds the operation has left (None: no limit)."""
    # 1. Write down what we are about to do, before doing it, and take its
    #    amount from the service's spend budget: both or neither, and only
    #    the first time, so that a redelivery spends nothing more.
    db.execute("BEGIN IMMEDIATE")
    try:
        if db.execute("INSERT INTO operations (id, input_digest, state, started_at)"
                      " VALUES (?, ?, 'started', ?) ON CONFLICT (id) DO NOTHING",
                      (op_id, digest(inputs), clock())).rowcount:
            spend(db, inputs["amount_cents"], clock)      # check first
    except BaseException:
        db.execute("ROLLBACK")          # over budget: nothing written, nothing taken
        raise
    db.execute("COMMIT")
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
        charge_id = provider.find_charge(op_id, timeout=timeout)
    if charge_id is None:
        charge_id = provider.charge(idempotency_key=op_id, timeout=timeout, **inputs)
    # 4. Record the charge. Only then may the message be acknowledged.
    db.execute("UPDATE operations SET charge_id = ?, state = 'charged'"
               " WHERE id = ? AND state = 'started'", (charge_id, op_id))
    return charge_id


def deliver(db, provider, message,
            attempts=5,                 # tries in all, the first one included
            base=0.2, cap=10.0,         # the ceiling of each wait, in seconds
            sleep=time.sleep, budget=None, rng=random, clock=time.time,
            deadline=None):             # when it must be over, on `clock`
    """Process one message, retrying what may succeed later, and passing
    each try the time left before the deadline. Returns the charge id.
    Raises Parked, with the reason, when the message needs a person: a
    conflict, or no tries or no time left. Raises RetryLater when this
    worker's retry budget is spent: that is no fault of the message's."""
    if budget is not None:
        budget.request()
    for attempt in range(attempts):
        time_left = None if deadline is None else deadline - clock()
        try:
            return process(db, provider, message["id"], message["inputs"], clock, time_left)
        except Conflict as conflict:
            raise Parked(f"Conflict: {conflict}")     # trying again cannot help
        except Retryable as failure:
            wait = rng.uniform(0, min(cap, base * 2 ** attempt))   # full jitter
            if attempt == attempts - 1:
                raise Parked(f"{failure}; no tries left")
            if deadline is not None and clock() + wait >= deadline:
                raise Parked(f"{failure}; no time left before the deadline")
            if budget is not None and not budget.allow_retry():
                raise RetryLater(f"{failure}; this worker's retry budget is spent")
            sleep(wait)


class RetryBudget:
    """One worker's budget: retries may be at most RETRY_RATIO of the
    requests it saw over the last BUDGET_WINDOW_SECONDS. Each worker is a
    client of the provider, and this is the SRE book's budget, kept by each
    client on its own. It lives in this process's memory: nothing shared to
    keep, but it counts only this worker's calls, and starts from nothing
    when the worker does. A budget for the whole service would need counts
    that every worker shares, in the database, as spend() keeps them. In an
    outage, the worker sends a tenth more calls, not five times as many."""

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


# ---- the spend budget: one for the whole service, shared by every worker

def spend(db, cents, clock=time.time):
    """Take `cents` from this hour's budget, or raise OverBudget. The count
    lives in the database every worker uses, so all of them spend from one
    budget; and the check and the take are one UPDATE, so two workers cannot
    both take the last of it. Returns what is taken this hour, now."""
    hour = int(clock() // 3600)
    db.execute("INSERT INTO spend (hour, cents) VALUES (?, 0) ON CONFLICT (hour) DO NOTHING",
               (hour,))
    taken = db.execute("UPDATE spend SET cents = cents + ? WHERE hour = ? AND cents + ? <= ?"
                       " RETURNING cents", (cents, hour, cents, MAX_CENTS_PER_HOUR)).fetchone()
    if taken is None:
        (used,) = db.execute("SELECT cents FROM spend WHERE hour = ?", (hour,)).fetchone()
        raise OverBudget(f"the service may charge {dollars(MAX_CENTS_PER_HOUR)} an hour, and"
                         f" {dollars(MAX_CENTS_PER_HOUR - used)} of it is left this hour."
                         " Nothing was sent")
    return taken[0]


# ---- admission: a bounded queue per tenant

def operation_id(tenant, client_id):
    """The service's id for a client's operation: North's O7 is North/O7, so
    two tenants may both send O7 and never meet. It is also the provider's
    idempotency key. (Tenant names never contain a slash.)"""
    return f"{tenant}/{client_id}"


def admit(db, tenant, client_id, inputs):
    """Queue an operation if its tenant has a free waiting slot, and answer
    with its status; refuse at once when full. The count and the insert are
    one statement, so two requests cannot both take the last slot. An id
    the tenant already used is not queued again: the answer is its status."""
    op_id = operation_id(tenant, client_id)
    db.execute("""
        INSERT INTO work (id, tenant, inputs, state)
        SELECT ?, ?, ?, 'waiting'
        WHERE (SELECT count(*) FROM work WHERE tenant = ? AND state = 'waiting') < ?
        ON CONFLICT (id) DO NOTHING
    """, (op_id, tenant, json.dumps(inputs), tenant, MAX_WAITING))
    known = db.execute("SELECT inputs FROM work WHERE id = ?", (op_id,)).fetchone()
    if known is None:
        raise Refused(f"tenant {tenant} already has {MAX_WAITING} operations waiting;"
                      " try again later")
    if digest(json.loads(known[0])) != digest(inputs):
        raise Conflict(f"{op_id} was first submitted with other inputs")
    return status(db, tenant, client_id)


def status(db, tenant, client_id):
    """What a client polls instead of submitting again: (state, charge). The
    charge is the provider's charge id, 'none', or 'unknown' while a call
    may have been made and no answer is recorded. None for an id the tenant
    never used: a tenant can only ask about its own operations."""
    return db.execute("""
        SELECT work.state, CASE operations.state WHEN 'charged' THEN charge_id
                                                 WHEN 'started' THEN 'unknown'
                                                 ELSE 'none' END
        FROM work LEFT JOIN operations USING (id) WHERE work.id = ?
    """, (operation_id(tenant, client_id),)).fetchone()


def start_next(db, tenant, clock=time.time):
    """Start the tenant's oldest waiting operation, if the tenant has a free
    running slot. Only a live lease holds a slot. Returns its message, or None."""
    now = clock()
    # A running operation whose lease ran out has lost its worker, and no
    # code of that worker's gave its slot back: the lease does. It waits
    # again, unless it has lost MAX_LOST workers: one that kills every worker
    # that takes it must not come back for ever. It is dead, for a person.
    db.execute("""
        UPDATE work SET lost = lost + 1,
                        state = CASE WHEN lost + 1 >= :max_lost THEN 'dead' ELSE 'waiting' END,
                        last_error = 'worker lost: the lease of start ' || starts || ' ran out'
        WHERE tenant = :tenant AND state = 'running' AND locked_until < :now
    """, {"tenant": tenant, "now": now, "max_lost": MAX_LOST})
    row = db.execute("""
        UPDATE work SET state = 'running', starts = starts + 1, locked_until = :now + :lease
        WHERE id = (SELECT id FROM work
                    WHERE tenant = :tenant AND state = 'waiting' AND not_before <= :now
                    ORDER BY rowid LIMIT 1)
          AND (SELECT count(*) FROM work WHERE tenant = :tenant
               AND state = 'running' AND locked_until >= :now) < :max_running
        RETURNING id, inputs, starts
    """, {"tenant": tenant, "now": now, "lease": LEASE_SECONDS,
          "max_running": MAX_RUNNING}).fetchone()
    if row is None:
        return None
    return {"id": row[0], "inputs": json.loads(row[1]), "start": row[2]}


def finish(db, message, state, why=None, not_before=0):
    """End the start that start_next() gave as `message`: done, dead or
    cancelled, or back to waiting until `not_before`; `why` is kept for a
    person. A worker that stalled past its lease, while another worker
    started the operation again, holds an older start: it changes nothing."""
    db.execute("UPDATE work SET state = ?, last_error = ?, not_before = ?"
               " WHERE id = ? AND state = 'running' AND starts = ?",
               (state, why, not_before, message["id"], message["start"]))


def cancel(db, tenant, client_id):
    """Cancel an operation that has not called the provider: at once if it
    waits, and at its safe point, before the call, if it runs. For any
    other, say why not, and whether money may have moved."""
    op_id = operation_id(tenant, client_id)
    if db.execute("UPDATE work SET state = 'cancelled', last_error = 'cancelled by its client'"
                  f" WHERE id = ? AND state = 'waiting' AND {NEVER_CALLED}",
                  (op_id,)).rowcount:
        return f"{op_id} cancelled: it had not started, so nothing was charged"
    if db.execute("UPDATE work SET cancel_asked = 1 WHERE id = ? AND state = 'running'"
                  f" AND {NEVER_CALLED}", (op_id,)).rowcount:
        return (f"{op_id} is running: asked to stop before it calls the provider;"
                " ask its status to see how it ended")
    known = status(db, tenant, client_id)
    if known is None:
        return f"{tenant} has no operation {client_id}"
    state, charge = known
    if state in ("waiting", "running"):
        return (f"{op_id} cannot be cancelled now: it has called the provider, or is about to;"
                " ask again when it ends")
    if charge == "unknown":
        return (f"{op_id} is dead, and may have been charged: a call was made and no clear"
                " answer came back. A person must ask the provider before anything else")
    if charge != "none":
        return (f"{op_id} cannot be cancelled: it was charged as {charge}."
                " Undoing it takes a refund: a new operation, with its own id and approval")
    return f"{op_id} is already {state}, and nothing was charged"


# ---- a worker: one operation, from its slot to its end

def work_one(db, provider, tenant, clock=time.time, **retries):
    """Start the tenant's next operation and see it through. Returns its id,
    or None if there was nothing to start."""
    message = start_next(db, tenant, clock)
    if message is None:
        return None
    see_through(db, provider, message, clock, **retries)
    return message["id"]


def see_through(db, provider, message, clock=time.time, **retries):
    """Deliver a started operation within its deadline, and end it. Its slot
    is given back on every way out: done; cancelled; dead, with the reason,
    for a person; put back to wait, with the reason, when a budget is spent
    (that reason goes on up too); or dead after an exception nobody expected,
    which goes on up. A worker that dies here gives nothing back: its lease
    runs out instead."""
    # The safe point: if the client asked to cancel and nothing has been
    # sent for this operation, stop here.
    if db.execute("UPDATE work SET state = 'cancelled', last_error = 'cancelled by its client'"
                  " WHERE id = ? AND state = 'running' AND starts = ? AND cancel_asked = 1"
                  f" AND {NEVER_CALLED}",
                  (message["id"], message["start"])).rowcount:
        return
    try:
        deliver(db, provider, message, clock=clock, deadline=clock() + DEADLINE_SECONDS,
                **retries)
    except Parked as reason:
        finish(db, message, "dead", str(reason))
    except (RetryLater, OverBudget) as reason:          # not the operation's fault
        finish(db, message, "waiting", str(reason), clock() + PUT_BACK_SECONDS)
        raise
    except BaseException as error:
        finish(db, message, "dead", f"{type(error).__name__}: {error}")
        raise
    else:
        finish(db, message, "done")


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

    def charge(self, idempotency_key, timeout=None, **inputs):
        # It answers at once, so it never needs its timeout: the digest is
        # of the payment's inputs, not of how long the caller can wait.
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

    def find_charge(self, reference, timeout=None):
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


class CrashBeforeCall:
    """The provider, seen by a worker that dies just before it sends the call."""

    def charge(self, **request):
        raise WorkerCrashed()


class CrashAfterRecord:
    """The database, seen by a worker that dies as soon as it has recorded the
    charge: before it can acknowledge the message."""

    def __init__(self, db):
        self.db = db

    def execute(self, sql, params=()):
        cursor = self.db.execute(sql, params)
        if sql.startswith("UPDATE operations"):
            raise WorkerCrashed()
        return cursor


class Stalled:
    """The provider on a bad day: it charges, but its answer takes `seconds`.
    A caller that passes a timeout stops waiting when it runs out, not
    knowing whether the charge happened; a caller without one waits it out."""

    def __init__(self, provider, seconds):
        self.provider, self.seconds = provider, seconds

    def charge(self, timeout=None, **request):
        charge_id = self.provider.charge(**request)
        waited = self.seconds if timeout is None else min(timeout, self.seconds)
        self.provider.clock.advance(waited)
        if waited < self.seconds:
            print(f"{'':13}no answer within {timeout:g} s: the worker stops waiting")
            raise Retryable(f"no answer within {timeout:g} s")  # yet it may have charged
        return charge_id


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


def replay_o7(clock, db, provider, dead):
    """The O7 timeline, one line at a time: yields (time, text) for each line
    before doing what it says; time is "" for a line that goes on from the
    one before. The provider prints what it does as it does it."""
    o7 = {"id": operation_id("North", "O7"),
          "inputs": {"tenant": "North", "invoice": 7, "amount_cents": 5000}}

    def charge_then_crash(message, hours, minutes):
        """W1 calls the provider, which charges; W1 dies a minute later."""
        op_id, inputs = message["id"], message["inputs"]
        clock.set(1, hours, minutes)
        yield clock.stamp(), (f"W1 takes {op_id} (invoice {inputs['invoice']},"
                              f" {dollars(inputs['amount_cents'])}) and calls the provider,"
                              f" key {op_id}")
        try:
            process(db, CrashAfterCall(provider), op_id, inputs, clock)
        except WorkerCrashed:
            clock.set(1, hours, minutes + 1)
            yield clock.stamp(), (f"W1 crashes before it records the charge or"
                                  f" acknowledges {op_id}")

    yield from charge_then_crash(o7, 12, 0)
    clock.set(1, 12, 2)
    yield clock.stamp(), (f"the queue delivers {o7['id']} again (at least once, as promised);"
                          " W2 takes it")
    charge = deliver(db, provider, o7, clock=clock)
    yield clock.stamp(), f"W2 records {charge} and acknowledges {o7['id']}"
    yield "", f"the provider saw {provider.calls} calls and made {len(provider.charges)} charge"

    clock.set(1, 12, 5)
    changed = {"id": o7["id"], "inputs": dict(o7["inputs"], amount_cents=6000)}
    yield clock.stamp(), (f"a message for {changed['id']} arrives again, now for"
                          f" {dollars(changed['inputs']['amount_cents'])}")
    try:
        deliver(db, provider, changed, clock=clock)
    except Parked:
        dead.append(changed)
    yield clock.stamp(), f"W2 refuses it (Conflict) and parks it: {len(dead)} dead letter"

    o8 = {"id": operation_id("North", "O8"),
          "inputs": {"tenant": "North", "invoice": 8, "amount_cents": 2000}}
    yield from charge_then_crash(o8, 12, 10)
    clock.set(2, 14, 0)
    yield clock.stamp(), (f"{o8['id']} is delivered again, 26 hours later: the provider has"
                          " forgotten its key")
    charge = deliver(db, provider, o8, clock=clock)
    yield clock.stamp(), f"W2 records {charge} and acknowledges {o8['id']}"
    yield "", f"the provider made {len(provider.charges)} charges for 2 operations"


def print_o7():
    clock = Clock()
    for stamp, text in replay_o7(clock, open_db(":memory:"), Provider(clock, first_charge=9), []):
        print(f"{stamp:13}{text}")


CRASH_POINTS = {"before-call": "before the call",
                "after-commit": "after the provider's commit",
                "after-record": "after it recorded the charge, before it acknowledged"}


def replay_crash(point):
    """W1 dies at one of the three points; W2 gets the operation again."""
    clock = Clock()
    db, provider = open_db(":memory:"), Provider(clock)
    o7 = {"id": operation_id("North", "O7"),
          "inputs": {"tenant": "North", "invoice": 7, "amount_cents": 5000}}
    w1_db, w1_provider = db, provider
    if point == "before-call":
        w1_provider = CrashBeforeCall()
    elif point == "after-commit":
        w1_provider = CrashAfterCall(provider)
    else:
        w1_db = CrashAfterRecord(db)
    print(f"W1 takes {o7['id']} ({dollars(o7['inputs']['amount_cents'])}), stores it as"
          " started, and goes to call the provider")
    try:
        process(w1_db, w1_provider, o7["id"], o7["inputs"], clock)
    except WorkerCrashed:
        state, charge = db.execute("SELECT state, charge_id FROM operations WHERE id = ?",
                                   (o7["id"],)).fetchone()
        print(f"W1 crashes {CRASH_POINTS[point]}; our record: {state}, charge {charge or 'none'}")
    print(f"the queue delivers {o7['id']} again; W2 takes it")
    charge = deliver(db, provider, o7, clock=clock)
    print(f"W2 acknowledges {o7['id']} with charge {charge}")
    calls = f"{provider.calls} call{'s' * (provider.calls > 1)}"
    print(f"the provider saw {calls} and made {len(provider.charges)} charge"
          f"{'s' * (len(provider.charges) > 1)}")


def show_admission():
    clock = Clock()
    db = open_db(":memory:")

    def submit(tenant, client_id, again=""):
        try:
            state, _ = admit(db, tenant, client_id, {"invoice": client_id})
            print(f"{tenant} submits {client_id}{again}: {state}")
        except Refused as refusal:
            print(f"{tenant} submits {client_id}{again}: refused: {refusal}")

    def start(tenant, when=""):
        message = start_next(db, tenant, clock)
        started = message["id"] if message else f"none: {tenant} has {MAX_RUNNING} running"
        print(f"{when}the worker starts {tenant}'s next: {started}")
        return message

    print(f"each tenant may have {MAX_RUNNING} operations running and {MAX_WAITING} waiting")
    for number in range(1, MAX_WAITING + 3):              # two more than may wait
        submit("North", f"N{number}")
    submit("North", "N1", " again")                       # answered, not queued twice
    running = [start("North") for _ in range(MAX_RUNNING)]
    start("North")
    submit("South", "N1")
    start("South")
    submit("North", f"N{MAX_WAITING + 1}", " again")
    print(f"the workers running {' and '.join(m['id'] for m in running)} die;"
          " nothing gives their slots back")
    clock.advance(LEASE_SECONDS)
    start("North", f"after {clock.now:.0f} s, their leases still hold: ")
    clock.advance(1)
    start("North", f"after {clock.now:.0f} s, their leases have run out: ")


def why(db, tenant, client_id):
    """The reason an operation's record keeps: why it is dead, or was put back."""
    (reason,) = db.execute("SELECT last_error FROM work WHERE id = ?",
                           (operation_id(tenant, client_id),)).fetchone()
    return f"; why: {reason}" if reason else ""


def show_cancel():
    clock = Clock()
    db, provider = open_db(":memory:"), Provider(clock)
    for client_id in ("P1", "P2", "P3", "P4"):
        admit(db, "North", client_id, {"tenant": "North", "invoice": client_id,
                                       "amount_cents": 1000})
    print("the worker runs P1, then P2 while the provider is down; P3 starts; P4 waits")
    work_one(db, provider, "North", clock=clock)
    work_one(db, Outage(), "North", clock=clock, attempts=1)
    p3 = start_next(db, "North", clock)
    for client_id in ("P1", "P2", "P3", "P4"):
        state, charge = status(db, "North", client_id)
        print(f"status of {client_id}: {state}, charge {charge}{why(db, 'North', client_id)}")
    for tenant, client_id in (("North", "P4"), ("North", "P4"), ("North", "P3"),
                              ("North", "P2"), ("North", "P1"), ("North", "P9"),
                              ("South", "P1")):
        print(f"{tenant} cancels {client_id}: {cancel(db, tenant, client_id)}")
    see_through(db, provider, p3, clock)
    state, charge = status(db, "North", "P3")
    print(f"the worker reaches P3's safe point, before the call: {state}, charge {charge}")


def show_deadline():
    clock = Clock()
    db, provider = open_db(":memory:"), Provider(clock)
    stalled = Stalled(provider, 600)
    admit(db, "North", "O9", {"tenant": "North", "invoice": 9, "amount_cents": 3000})
    print(f"an operation must be over within {DEADLINE_SECONDS} s;"
          f" today the provider answers after {stalled.seconds} s")
    print(f"W1 starts {operation_id('North', 'O9')} and calls the provider")
    work_one(db, stalled, "North", clock=clock)
    print(f"W1 gives its slot back after {clock():g} s")
    state, charge = status(db, "North", "O9")
    print(f"status of O9: {state}, charge {charge}{why(db, 'North', 'O9')}")


def show_budget():
    print("the provider is down; 100 charges arrive, one every 0.5 s, each allowed 5 tries")
    for budget_on in (False, True):
        clock, outage, parked, put_back = Clock(), Outage(), 0, 0
        budget = RetryBudget(clock) if budget_on else None
        rng = random.Random(1)
        for number in range(100):
            clock.now = max(clock.now, number * 0.5)
            message = {"id": f"M{number}", "inputs": {"amount_cents": 100}}
            try:
                deliver(open_db(":memory:"), outage, message, sleep=clock.advance,
                        budget=budget, rng=rng, clock=clock)
            except Parked:
                parked += 1
            except RetryLater:
                put_back += 1
        name = (f"with a {RETRY_RATIO:.0%} retry budget" if budget_on
                else "without a retry budget")
        print(f"{name}: {outage.calls} calls to the provider,"
              f" {outage.calls - 100} of them retries;"
              f" {parked} parked for a person, {put_back} put back for later")


def show_spend():
    clock = Clock()
    provider = Provider(clock)
    if os.path.exists("spend.db"):
        os.remove("spend.db")                           # each run starts afresh
    workers = {"W1": open_db("spend.db"), "W2": open_db("spend.db")}   # two connections
    print(f"the service may charge {dollars(MAX_CENTS_PER_HOUR)} an hour, across all tenants;"
          " W1 and W2 count it in spend.db")
    for number, tenant in ((1, "North"), (2, "South"), (3, "North")):
        admit(workers["W1"], tenant, f"B{number}",
              {"tenant": tenant, "invoice": number, "amount_cents": 20000})
    for hours, minutes, worker, tenant in ((12, 0, "W1", "North"), (12, 10, "W2", "South"),
                                           (12, 20, "W1", "North"), (13, 0, "W2", "North")):
        clock.set(1, hours, minutes)
        db = workers[worker]
        op_id, inputs = db.execute("SELECT id, inputs FROM work WHERE tenant = ?"
                                   " AND state = 'waiting' ORDER BY rowid LIMIT 1",
                                   (tenant,)).fetchone()
        print(f"{clock.stamp()}  {worker} runs {op_id}"
              f" ({dollars(json.loads(inputs)['amount_cents'])})")
        try:
            work_one(db, provider, tenant, clock=clock)
        except OverBudget as refusal:
            print(f"{'':13}refused: {refusal}")
            state, charge = status(db, tenant, op_id.partition("/")[2])
            print(f"{'':13}status of {op_id}: {state}, charge {charge}")


def main():
    commands = {"o7": print_o7, "admission": show_admission, "cancel": show_cancel,
                "deadline": show_deadline, "budget": show_budget, "spend": show_spend,
                "crash": replay_crash}
    parser = argparse.ArgumentParser(description="Replays of Chapter 10's worked cases.")
    parser.add_argument("command", choices=commands)
    parser.add_argument("point", nargs="?", choices=CRASH_POINTS,
                        help="for crash: where W1 dies")
    args = parser.parse_args()
    if args.command != "crash":
        commands[args.command]()
    elif args.point:
        replay_crash(args.point)
    else:
        parser.error("crash needs a point: " + ", ".join(CRASH_POINTS))


if __name__ == "__main__":
    main()
