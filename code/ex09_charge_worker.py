# Exercise 9: A Charge Worker, Exactly Once and Within Limits.
# Chapter 10's part charges each operation at most once, across crashes,
# redeliveries, changed inputs and a provider that forgets its keys after 24
# hours. Chapter 11's part keeps it up under pressure: slots for each tenant,
# a deadline for each operation, a retry budget for each worker, one budget
# of money an hour for them all, and status and cancel for clients.
#
# Its replays are in ex09_practice_given.py, a given file: download it from
# the guide into this folder. Then run one of:
#   python3 ex09_charge_worker.py o7                  (the O7 timeline)
#   python3 ex09_charge_worker.py crash after-commit  (or before-call, after-record)
#   python3 ex09_charge_worker.py admission           (or cancel, deadline, budget, spend)

import collections
import contextlib
import hashlib
import json
import random
import sqlite3
import time

KEY_WINDOW_SECONDS = 24 * 3600   # the provider keeps a key this long (Stripe's API v1:
                                 # at least 24 h)
KEY_TRUSTED_SECONDS = 23 * 3600  # how long we rely on it: a margin for clocks
MAX_CENTS_PER_HOUR = 50000       # the whole service may charge $500.00 an hour


class Conflict(Exception):
    """The operation id was already used with other inputs."""


class Retryable(Exception):
    """A failure that trying again may cure: a timeout, a 503. What the
    provider did is not known, so a retry must carry the same key."""


class Parked(Exception):
    """Delivery gave up: the operation is dead, for a person, for this reason."""


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
CREATE TABLE IF NOT EXISTS spend (
    hour   INTEGER PRIMARY KEY,         -- hours since the clock's zero
    cents  INTEGER NOT NULL             -- taken from the budget in that hour
);
"""


def open_db(path):
    db = sqlite3.connect(path, isolation_level=None)     # autocommit
    db.executescript(SCHEMA)
    return db


@contextlib.contextmanager
def transaction(db):
    """BEGIN IMMEDIATE ... COMMIT; or, if anything goes wrong, the COMMIT
    included, ROLLBACK: the connection never stays inside a transaction."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
        db.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.OperationalError):   # nothing left to undo
            db.execute("ROLLBACK")
        raise


def dollars(cents):
    return f"${cents / 100:.2f}"


def digest(inputs):
    """The same inputs, in any order, give the same digest. But 5000 and
    5000.0 differ: send each input in one form (whole cents, as here)."""
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()


def operation_id(tenant, client_id):
    """North's O7 is North/O7: two tenants may both send O7 and never meet.
    It is also the provider's idempotency key. (No tenant has a / in its name.)"""
    return f"{tenant}/{client_id}"


def process(db, provider, op_id, inputs, clock=time.time, timeout=None):
    """Charge for operation op_id once. Safe to call again after a crash at
    any point; returns the provider's charge id. Each call to the provider
    gets `timeout`, the seconds the operation has left (None: no limit)."""
    # 1. Write down what we are about to do, before doing it, and take its
    #    amount from the service's spend budget: both or neither, and only
    #    the first time, so that a redelivery spends nothing more.
    with transaction(db):
        if db.execute("INSERT INTO operations (id, input_digest, state, started_at)"
                      " VALUES (?, ?, 'started', ?) ON CONFLICT (id) DO NOTHING",
                      (op_id, digest(inputs), clock())).rowcount:
            spend(db, inputs["amount_cents"], clock)   # OverBudget: neither is kept
    stored, state, recorded, started_at = db.execute(
        "SELECT input_digest, state, charge_id, started_at FROM operations WHERE id = ?",
        (op_id,)).fetchone()
    # 2. The same id must mean the same payment.
    if stored != digest(inputs):
        raise Conflict(f"operation {op_id} was first made with other inputs")
    if state == "charged":
        return recorded
    # 3. If the provider may have forgotten our key, a retry could charge a
    #    second time: ask it what it did instead (reconcile). Otherwise, or if
    #    it did nothing, charge, with the operation's id as the key.
    charge_id = None
    if clock() - started_at > KEY_TRUSTED_SECONDS:
        charge_id = provider.find_charge(op_id, timeout=timeout)
    if charge_id is None:
        charge_id = provider.charge(idempotency_key=op_id, timeout=timeout, **inputs)
    # 4. Record the charge. Only then may the message be acknowledged.
    db.execute("UPDATE operations SET charge_id = ?, state = 'charged'"
               " WHERE id = ? AND state = 'started'", (charge_id, op_id))
    return charge_id


def spend(db, cents, clock=time.time):
    """Take `cents` from this hour's budget, which every worker counts in the
    database, or raise OverBudget. The check and the take are one UPDATE."""
    hour = int(clock() // 3600)
    db.execute("INSERT INTO spend (hour, cents) VALUES (?, 0) ON CONFLICT (hour) DO NOTHING",
               (hour,))
    if not db.execute("UPDATE spend SET cents = cents + ? WHERE hour = ? AND cents + ? <= ?",
                      (cents, hour, cents, MAX_CENTS_PER_HOUR)).rowcount:
        (used,) = db.execute("SELECT cents FROM spend WHERE hour = ?", (hour,)).fetchone()
        raise OverBudget(f"the service may charge {dollars(MAX_CENTS_PER_HOUR)} an hour, and"
                         f" {dollars(MAX_CENTS_PER_HOUR - used)} of it is left this hour."
                         " Nothing was sent")


def deliver(db, provider, message, attempts=5, base=0.2, cap=10.0, sleep=time.sleep,
            budget=None, rng=random, clock=time.time, deadline=None):
    """Process one message: up to `attempts` tries, each given the time left
    before `deadline` (on `clock`); before each retry, a wait of up to
    base * 2 ** attempt seconds, never over `cap`. Returns the charge id.
    Raises Parked, for a person, or RetryLater if the retry budget is spent."""
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


# ---- Chapter 11: the limits. Slots, deadlines, budgets, status, cancel

MAX_RUNNING = 2                  # per tenant: operations being worked on...
MAX_WAITING = 5                  # ...and operations waiting for a slot
DEADLINE_SECONDS = 30            # an operation must be over this long after it starts
LEASE_SECONDS = 60               # a running slot is held this long, unless given back:
                                 # longer than the deadline, so a live worker gives up first
MAX_LOST = 3                     # an operation whose worker died this often is dead
RETRY_RATIO = 0.1                # retries may be at most 10% of requests...
BUDGET_WINDOW_SECONDS = 60       # ...over the last minute
PUT_BACK_SECONDS = 60            # an operation put back waits this long to start again


class RetryLater(Exception):
    """This worker's retry budget is spent: no fault of the operation's. It waits."""


class Refused(Exception):
    """Admission control said no. The caller gets an answer, not a wait."""


SCHEMA += """
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
"""

NEVER_CALLED = "id NOT IN (SELECT id FROM operations)"     # process() records before a call


class RetryBudget:
    """One worker's retry budget, kept in its memory: its retries may be at
    most RETRY_RATIO of the requests it made in the last BUDGET_WINDOW_SECONDS."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.requests = collections.deque()     # when each request was made, oldest first
        self.retries = collections.deque()      # when each retry was allowed

    def request(self):
        self.requests.append(self.clock())

    def allow_retry(self):
        now = self.clock()
        for times in (self.requests, self.retries):
            while times and times[0] < now - BUDGET_WINDOW_SECONDS:
                times.popleft()                 # older than the window: forgotten
        if len(self.retries) + 1 > RETRY_RATIO * len(self.requests):
            return False
        self.retries.append(now)
        return True


def admit(db, tenant, client_id, inputs):
    """Queue an operation if its tenant has a free waiting slot, or refuse at
    once. Answer with its status, which is all a known id gets."""
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
    """What a client polls instead of submitting again: (state, charge), the
    charge being the provider's id, 'none', or 'unknown' while a call may
    have been made and no answer is recorded. None for an id this tenant never used."""
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
    # A lease that ran out gives back the slot of a worker that died: the
    # operation waits again, or is dead, for a person, after MAX_LOST.
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
    cancelled, or back to waiting until `not_before`, with `why` for a
    person. A later start of the operation makes this one change nothing."""
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


def work_one(db, provider, tenant, clock=time.time, **retries):
    """Start the tenant's next operation and see it through. Returns its id,
    or None if there was nothing to start."""
    message = start_next(db, tenant, clock)
    if message is None:
        return None
    see_through(db, provider, message, clock, **retries)
    return message["id"]


def see_through(db, provider, message, clock=time.time, **retries):
    """Deliver a started operation within its deadline, and end it, with the
    reason, giving its slot back on every way out. (A worker that dies here
    gives nothing back: its lease runs out instead.)"""
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
    except Exception as error:      # a bug, for a person. Not Ctrl-C: the lease runs out
        finish(db, message, "dead", f"{type(error).__name__}: {error}")
        raise
    else:
        finish(db, message, "done")


if __name__ == "__main__":
    import ex09_practice_given          # the replays: given, downloaded, not typed
    ex09_practice_given.main()
