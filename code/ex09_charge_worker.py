# Exercise 9: A Charge Worker, Exactly Once and Within Limits.
# Chapter 10: each operation charged at most once, across crashes,
# redeliveries and changed inputs, at any age. Chapter 11: limits, budgets,
# status and cancel, an end for each operation, and a reconciler.
# Its replays are in ex09_practice_given.py, a given file: download it from
# the guide into this folder. Then run one of:
#   python3 ex09_charge_worker.py o7                 (the O7 timeline)
#   python3 ex09_charge_worker.py crash after-commit
#       (or before-call, after-record)
#   python3 ex09_charge_worker.py workload
#       (or admission, cancel, deadline, budget, spend, outage)

import contextlib
import hashlib
import json
import random
import sqlite3
import time


class Conflict(Exception):
    """An operation id came back with inputs other than its first ones."""


class Retryable(Exception):
    """A failure that trying again may cure: a timeout, a 5xx, a 429. What
    the provider did may not be known, so a retry must carry the same key."""


class Declined(Exception):
    """The provider said no, and charged nothing: the card was declined, or
    the request refused. Asking again gets the same answer."""


SCHEMA = """
CREATE TABLE IF NOT EXISTS operations (
    id            TEXT PRIMARY KEY,     -- also the provider's idempotency key
    input_digest  TEXT NOT NULL,        -- SHA-256 of the inputs that matter
    state         TEXT NOT NULL
                  CHECK (state IN ('started', 'charged', 'failed')),
    charge_id     TEXT,                 -- the provider's id, stored before
                                        -- it is paid
    started_at    REAL,                 -- when it was first written down
    spent_hour    INTEGER               -- Chapter 11: the last hour its
                                        -- amount counts in
);
"""


def open_db(path):
    db = sqlite3.connect(path, isolation_level=None)     # autocommit
    db.executescript(SCHEMA)
    return db


def dollars(cents):
    return f"${cents / 100:.2f}"


def digest(inputs):
    """The same inputs, in any order, give the same digest. But 5000 and
    5000.0 differ: send each input in one form (whole cents, as here)."""
    text = json.dumps(inputs, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def operation_id(tenant, client_id):
    """North's O7 is North/O7: two tenants may both send O7 and never meet.
    It is also the provider's idempotency key. (No tenant has a / in its
    name.)"""
    return f"{tenant}/{client_id}"


def write_down(db, op_id, inputs, clock=time.time):
    """Store the operation with its inputs' digest, the first time only."""
    db.execute("INSERT INTO operations (id, input_digest, state, started_at)"
               " VALUES (?, ?, 'started', ?) ON CONFLICT (id) DO NOTHING",
               (op_id, digest(inputs), clock()))


def process(db, provider, op_id, inputs, clock=time.time, timeout=None,
            budget=None):
    """Charge for operation op_id once, however often a crash makes it run
    again; return the charge id. A call gets `timeout` (None: no limit)."""
    # 1. Write down what we are about to do, before doing it.
    write_down(db, op_id, inputs, clock)
    state, charge_id, first_digest = db.execute(
        "SELECT state, charge_id, input_digest FROM operations WHERE id = ?",
        (op_id,)).fetchone()
    # 2. The same id must mean the same payment, and an answer stays given.
    if first_digest != digest(inputs):
        raise Conflict(f"operation {op_id} was first made with other inputs")
    if state == "charged":
        return charge_id
    if state == "failed":
        raise Declined(f"operation {op_id} was refused before")
    # 3. Charge, with the operation's id as the key. A no is an answer too.
    if budget is not None:
        budget.request()                    # one more call to the provider
    try:
        charge_id = provider.charge(idempotency_key=op_id, timeout=timeout,
                                    **inputs)
    except Declined:
        db.execute("UPDATE operations SET state = 'failed' WHERE id = ?"
                   " AND state = 'started'", (op_id,))
        raise
    # 4. Record the charge. Only then may the message be acknowledged.
    db.execute("UPDATE operations SET charge_id = ?, state = 'charged'"
               " WHERE id = ? AND state = 'started'", (charge_id, op_id))
    return charge_id


class CreateThenConfirm:
    """A provider in Stripe's shape, as process() sees it: one charge() that
    creates the charge (nothing is paid yet), stores its id, and only then
    confirms it. A charge is paid once, so a retry that confirms the stored
    one pays nothing more, even after the provider has forgotten the key."""

    def __init__(self, db, provider, clock=time.time):
        self.db, self.provider, self.clock = db, provider, clock

    def charge(self, idempotency_key, timeout=None, **inputs):
        op_id, started = idempotency_key, self.clock()
        (charge_id,) = self.db.execute(
            "SELECT charge_id FROM operations WHERE id = ?",
            (op_id,)).fetchone()
        if charge_id is None:
            created = self.provider.create(idempotency_key=op_id,
                                           timeout=timeout, **inputs)
            stored = self.db.execute(   # ours, or another start's stored first
                "UPDATE operations SET charge_id = coalesce(charge_id, ?)"
                " WHERE id = ? AND state = 'started' RETURNING charge_id",
                (created, op_id)).fetchone()
            if stored is None:              # the reconciler ended it first
                raise Declined(f"operation {op_id} was ended "
                               "before it was paid")
            (charge_id,) = stored
        left = None if timeout is None else timeout - (self.clock() - started)
        return self.provider.confirm(
            charge_id, idempotency_key=f"{op_id}/confirm", timeout=left)


def deliver(db, provider, message, dead_letters, attempts=5, base=0.2,
            cap=10.0, sleep=time.sleep, rng=random, clock=time.time,
            deadline=None, budget=None):
    """Process one message: up to `attempts` tries before `deadline`,
    waiting up to base * 2 ** attempt s (not over `cap`) before each retry.
    Return the charge id; or, giving up, append the message with its
    `error` to dead_letters."""
    for attempt in range(attempts):
        time_left = None if deadline is None else deadline - clock()
        try:
            return process(db, provider, message["id"], message["inputs"],
                           clock, time_left, budget)
        except (Conflict, Declined) as refusal:
            error = refusal                         # asking again cannot help
            break
        except Retryable as failure:
            error = failure
            wait = rng.uniform(0, min(cap, base * 2 ** attempt))  # full jitter
            if attempt == attempts - 1:
                break                               # no tries left
            if deadline is not None and clock() + wait >= deadline:
                break                               # no time left
            if budget is not None and not budget.allow_retry():
                raise RetryLater(f"{failure}; "
                                 "this worker's retry budget is spent")
            sleep(wait)
    dead_letters.append(dict(message, error=error))
    return None


# ---- Chapter 11: the limits. Slots, deadlines, budgets, status, cancel

MAX_RUNNING = 2                  # per tenant: operations being worked on...
MAX_WAITING = 5                  # ...and operations waiting for a slot
MAX_CENTS = 100000               # the most one operation may charge: $1,000.00
CURRENCY = "usd"                 # the one currency the service charges in
MAX_CENTS_PER_HOUR = 50000       # the whole service may charge $500.00 an hour
DEADLINE_SECONDS = 30            # the longest a start may take
LEASE_SECONDS = 60               # a slot is held this long, unless given back
MAX_LOST = 3                     # dead after its worker died this often
EXPIRE_SECONDS = 6 * 3600        # ended if not over this long after it came
RETRY_RATIO = 0.1                # retries may be at most 10% of calls...
BUDGET_WINDOW_SECONDS = 60       # ...over the last minute
PUT_BACK_BASE = 30               # put back, it waits up to 30 s * 2 ** starts,
PUT_BACK_CAP = 900               # never over 15 minutes (full jitter)
SETTLE_AFTER_SECONDS = 300       # a charge unknown this long is asked about


class RetryLater(Exception):
    """This worker's retry budget is spent: no fault of the operation's.
    It waits."""


class Refused(Exception):
    """Admission control said no. The caller gets an answer, not a wait."""


class OverBudget(Exception):
    """The service's spend budget for this hour is taken. Nothing was sent."""


SCHEMA += """
CREATE TABLE IF NOT EXISTS work (
    id      TEXT PRIMARY KEY,
    tenant  TEXT NOT NULL,
    inputs  TEXT NOT NULL,              -- JSON
    state   TEXT NOT NULL
            CHECK (state IN ('waiting', 'running', 'done', 'failed',
                             'expired', 'dead', 'cancelled')),
    starts  INTEGER NOT NULL DEFAULT 0, -- times started: the fencing token
    lost    INTEGER NOT NULL DEFAULT 0, -- how often its worker died holding it
    expires_at    REAL NOT NULL,        -- not over by then, it is ended
    not_before    REAL NOT NULL DEFAULT 0,  -- if waiting: no start before this
    locked_until  REAL,                 -- while running: when its lease ends
    cancel_asked  INTEGER NOT NULL DEFAULT 0, -- its client asked to cancel it
    last_error    TEXT                  -- why it ended, or was put back
);
CREATE TABLE IF NOT EXISTS spend (
    hour   INTEGER PRIMARY KEY,         -- hours since the clock's zero
    cents  INTEGER NOT NULL             -- taken from the budget in that hour
);
"""

NEVER_CALLED = "id NOT IN (SELECT id FROM operations)"  # never past its gate


def admit(db, tenant, client_id, inputs, clock=time.time):
    """Queue a sound operation if its tenant has room, or refuse; answer
    its status."""
    amount = inputs.get("amount_cents")
    if inputs.get("tenant") != tenant or inputs.get("currency") != CURRENCY:
        raise Refused(f"a charge from {tenant} must name {tenant} "
                      f"and {CURRENCY}")
    if type(amount) is not int or not 0 < amount <= MAX_CENTS:
        raise Refused("amount_cents must be a whole number "
                      f"from 1 to {MAX_CENTS}")
    op_id = operation_id(tenant, client_id)
    db.execute("""
        INSERT INTO work (id, tenant, inputs, state, expires_at)
        SELECT ?, ?, ?, 'waiting', ?
        WHERE (SELECT count(*) FROM work
               WHERE tenant = ? AND state = 'waiting') < ?
        ON CONFLICT (id) DO NOTHING
    """, (op_id, tenant, json.dumps(inputs), clock() + EXPIRE_SECONDS,
          tenant, MAX_WAITING))
    known = db.execute("SELECT inputs FROM work WHERE id = ?",
                       (op_id,)).fetchone()
    if known is None:
        raise Refused(f"tenant {tenant} already has {MAX_WAITING} "
                      "operations waiting; try again later")
    if digest(json.loads(known[0])) != digest(inputs):
        raise Conflict(f"{op_id} was first submitted with other inputs")
    return status(db, tenant, client_id)


def status(db, tenant, client_id):
    """What a client polls instead of submitting again: (state, charge), the
    charge being the provider's id, 'none', or 'unknown' (it may have been
    paid). None for an id this tenant never used."""
    return db.execute("""
        SELECT work.state,
               CASE WHEN operations.state = 'charged' THEN charge_id
                    WHEN operations.state = 'started'
                         AND charge_id IS NOT NULL THEN 'unknown'
                    ELSE 'none' END
        FROM work LEFT JOIN operations USING (id) WHERE work.id = ?
    """, (operation_id(tenant, client_id),)).fetchone()


def start_next(db, tenant, clock=time.time):
    """Start the tenant's oldest waiting operation that is due and not past
    its end, if the tenant has a free running slot. Returns its message."""
    now = clock()
    # A dead worker's slot comes back as its lease runs out; after
    # MAX_LOST such losses, the operation is dead.
    db.execute("""
        UPDATE work SET lost = lost + 1,
                        state = CASE WHEN lost + 1 >= :max_lost
                                     THEN 'dead' ELSE 'waiting' END,
                        last_error = 'worker lost: the lease of start '
                                     || starts || ' ran out'
        WHERE tenant = :tenant AND state = 'running' AND locked_until < :now
    """, {"tenant": tenant, "now": now, "max_lost": MAX_LOST})
    row = db.execute("""
        UPDATE work SET state = 'running', starts = starts + 1,
                        locked_until = :now + :lease
        WHERE id = (SELECT id FROM work
                    WHERE tenant = :tenant AND state = 'waiting'
                      AND not_before <= :now AND expires_at > :now
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
    """End the start that start_next() gave as `message`, or put it back to
    wait until `not_before`, with `why`. A later start makes it do nothing."""
    db.execute("UPDATE work SET state = ?, last_error = ?, not_before = ?"
               " WHERE id = ? AND state = 'running' AND starts = ?",
               (state, why, not_before, message["id"], message["start"]))


def cancel(db, tenant, client_id):
    """Cancel an operation no start has taken past its gate: at once if it
    waits, at the gate if it runs. Else say why not, and if money may move."""
    op_id = operation_id(tenant, client_id)
    if db.execute("UPDATE work SET state = 'cancelled',"
                  " last_error = 'cancelled by its client'"
                  f" WHERE id = ? AND state = 'waiting' AND {NEVER_CALLED}",
                  (op_id,)).rowcount:
        return f"{op_id} cancelled: it had not started, so nothing was charged"
    if db.execute("UPDATE work SET cancel_asked = 1 WHERE id = ?"
                  f" AND state = 'running' AND {NEVER_CALLED}",
                  (op_id,)).rowcount:
        return (f"{op_id} is running: asked to stop before it calls the "
                "provider; ask its status to see how it ended")
    known = status(db, tenant, client_id)
    if known is None:
        return f"{tenant} has no operation {client_id}"
    state, charge = known
    if state in ("waiting", "running"):
        return (f"{op_id} cannot be cancelled now: it has called the "
                "provider, or is about to; ask again when it ends")
    if charge == "unknown":
        return (f"{op_id} is {state}, and may have been charged: the "
                "reconciler will ask the provider. Ask again in a few minutes")
    if charge != "none":
        return (f"{op_id} cannot be cancelled: it was charged as {charge}."
                " Undoing it takes a refund: a new operation, with its own"
                " id and approval")
    return f"{op_id} is already {state}, and nothing was charged"


@contextlib.contextmanager
def transaction(db):
    """BEGIN IMMEDIATE ... COMMIT; or, if anything goes wrong, the COMMIT
    included, ROLLBACK: the connection never stays inside a transaction."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
        db.execute("COMMIT")
    except BaseException:
        with contextlib.suppress(sqlite3.OperationalError):
            db.execute("ROLLBACK")          # unless nothing is left to undo
        raise


def go_ahead(db, message, clock=time.time):
    """The gate before the point of no return, one transaction: this start
    still holds the operation, no cancel was asked, and then the record and
    this hour's spend. False: stop, with nothing recorded, spent or called."""
    op_id, hour = message["id"], int(clock() // 3600)
    with transaction(db):
        asked = db.execute("SELECT cancel_asked FROM work WHERE id = ?"
                           " AND state = 'running' AND starts = ?",
                           (op_id, message["start"])).fetchone()
        if asked is None:                       # a later start holds it now
            return False
        if asked[0]:                            # asked only while unrecorded
            finish(db, message, "cancelled", "cancelled by its client")
            return False
        write_down(db, op_id, message["inputs"], clock)
        if db.execute("UPDATE operations SET spent_hour = ? WHERE id = ?"
                      " AND state = 'started' AND spent_hour IS NOT ?",
                      (hour, op_id, hour)).rowcount:
            amount = message["inputs"]["amount_cents"]
            spend(db, amount, clock)            # OverBudget: none of it
    return True


def spend(db, cents, clock=time.time):
    """Take `cents` from this hour's budget, which every worker counts in the
    database, or raise OverBudget. The check and the take are one UPDATE."""
    hour = int(clock() // 3600)
    db.execute("INSERT INTO spend (hour, cents) VALUES (?, 0)"
               " ON CONFLICT (hour) DO NOTHING", (hour,))
    if not db.execute("UPDATE spend SET cents = cents + ?"
                      " WHERE hour = ? AND cents + ? <= ?",
                      (cents, hour, cents, MAX_CENTS_PER_HOUR)).rowcount:
        (used,) = db.execute("SELECT cents FROM spend WHERE hour = ?",
                             (hour,)).fetchone()
        raise OverBudget(
            f"the service may charge {dollars(MAX_CENTS_PER_HOUR)} an hour,"
            f" and {dollars(MAX_CENTS_PER_HOUR - used)} of it is left this"
            " hour. Nothing was sent")


def work_one(db, provider, tenant, clock=time.time, **retries):
    """See the tenant's next operation through; its id, or None if none."""
    message = start_next(db, tenant, clock)
    if message is None:
        return None
    see_through(db, provider, message, clock, **retries)
    return message["id"]


def see_through(db, provider, message, clock=time.time, rng=random, **retries):
    """Take a started operation through the gate and deliver it, then end the
    start with its reason. What waiting may cure waits, never for a person."""
    ceiling = min(PUT_BACK_CAP, PUT_BACK_BASE * 2 ** message["start"])
    wait = rng.uniform(0, ceiling)
    try:
        if not go_ahead(db, message, clock):
            return
        dead_letters = []
        charge = deliver(db, CreateThenConfirm(db, provider, clock), message,
                         dead_letters, rng=rng, clock=clock,
                         deadline=clock() + DEADLINE_SECONDS, **retries)
    except (RetryLater, OverBudget) as reason:      # not the operation's fault
        finish(db, message, "waiting", str(reason), clock() + wait)
        raise
    except sqlite3.OperationalError:    # a busy database: not its fault
        raise                           # either; as on Ctrl-C, the lease ends
    except Exception as error:          # a bug, for a person
        finish(db, message, "dead", f"{type(error).__name__}: {error}")
        raise
    if charge is not None:
        finish(db, message, "done")
        return
    error = dead_letters[0]["error"]
    if isinstance(error, Retryable):                # the provider's trouble
        finish(db, message, "waiting", f"{error}; put back to try again",
               clock() + wait)
    elif isinstance(error, Declined):
        finish(db, message, "failed", f"Declined: {error}")
    else:                                           # a Conflict: for a person
        finish(db, message, "dead", f"Conflict: {error}")


def settle(db, provider, clock=time.time):
    """The reconciler, run every few minutes: ask the provider about each
    charge long unknown that no worker holds; end each waiting operation
    past its end, cancelling its charge first. Return the oldest unknown's
    age in seconds."""
    now = clock()
    for op_id, recorded, charge_id, ended in db.execute("""
        SELECT id, operations.state, charge_id, expires_at <= :now
        FROM work LEFT JOIN operations USING (id)
        WHERE work.state IN ('waiting', 'dead')
          AND (operations.state = 'started' AND charge_id IS NOT NULL
                   AND started_at <= :old
               OR work.state = 'waiting' AND expires_at <= :now)
    """, {"now": now, "old": now - SETTLE_AFTER_SECONDS}).fetchall():
        if charge_id is None:       # nothing of it can have been paid
            answer = "cancelled"
        else:
            try:
                ask = provider.cancel if ended else provider.retrieve
                answer = ask(charge_id)
            except Retryable:
                continue
        if answer not in ("paid", "declined", "cancelled"):
            continue                # still open: a later start confirms it
        closed = db.execute(
            "UPDATE operations SET state = ?"
            " WHERE id = ? AND state = 'started'"
            " AND charge_id IS ?",  # the charge it asked about, or none
            ("charged" if answer == "paid" else "failed", op_id, charge_id))
        if recorded == "started" and not closed.rowcount:
            continue                # stored by a late start: ask next time
        ending = ("done" if answer == "paid"
                  else "expired" if ended else "failed")
        why = (f"the provider says {charge_id} is {answer}" if charge_id
               else "nothing was paid")
        db.execute("UPDATE work SET state = ?, last_error = ? WHERE id = ?"
                   " AND state IN ('waiting', 'dead')",
                   (ending, f"settled: {why}", op_id))
    (oldest,) = db.execute(
        "SELECT min(started_at) FROM operations"
        " WHERE state = 'started' AND charge_id IS NOT NULL").fetchone()
    return 0 if oldest is None else now - oldest


if __name__ == "__main__":
    import ex09_practice_given  # the replays: given, downloaded, not typed
    ex09_practice_given.main()
