# Exercise 9's practice world: GIVEN. Download this file from the guide and
# put it beside your ex09_charge_worker.py; do not type it. It holds what
# the worker is tried against: a payment provider to practise on, workers
# that crash at each point, a provider that stalls and one that is down, a
# simulated clock, and the replays that `python3 ex09_charge_worker.py
# COMMAND` runs (the worker's last lines hand its command line to main()).
# Everything it runs of the worker is yours: worker.process, worker.admit...

import argparse
import json
import os
import random

import ex09_charge_worker as worker


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
        if known and self.clock() - known[2] < worker.KEY_WINDOW_SECONDS:
            if known[0] != worker.digest(inputs):
                raise worker.Conflict(f"provider: key {idempotency_key}"
                                      " was used with other inputs")
            print(f"{'':13}provider: key {idempotency_key} again, same inputs: {known[1]} again")
            return known[1]
        charge_id = f"C{self.next_charge}"
        self.next_charge += 1
        self.keys[idempotency_key] = (worker.digest(inputs), charge_id, self.clock())
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
            raise worker.Retryable(f"no answer within {timeout:g} s")  # yet it may have charged
        return charge_id


class Outage:
    """A provider that is down: every call fails, as a 503 would."""

    def __init__(self):
        self.calls = 0

    def charge(self, **request):
        self.calls += 1
        raise worker.Retryable("503 Service Unavailable")


# ---- the replays, on a simulated clock

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
    o7 = {"id": worker.operation_id("North", "O7"),
          "inputs": {"tenant": "North", "invoice": 7, "amount_cents": 5000}}

    def charge_then_crash(message, hours, minutes):
        """W1 calls the provider, which charges; W1 dies a minute later."""
        op_id, inputs = message["id"], message["inputs"]
        clock.set(1, hours, minutes)
        yield clock.stamp(), (f"W1 takes {op_id} (invoice {inputs['invoice']},"
                              f" {worker.dollars(inputs['amount_cents'])}) and calls the provider,"
                              f" key {op_id}")
        try:
            worker.process(db, CrashAfterCall(provider), op_id, inputs, clock)
        except WorkerCrashed:
            clock.set(1, hours, minutes + 1)
            yield clock.stamp(), (f"W1 crashes before it records the charge or"
                                  f" acknowledges {op_id}")

    yield from charge_then_crash(o7, 12, 0)
    clock.set(1, 12, 2)
    yield clock.stamp(), (f"the queue delivers {o7['id']} again (at least once, as promised);"
                          " W2 takes it")
    charge = worker.deliver(db, provider, o7, clock=clock)
    yield clock.stamp(), f"W2 records {charge} and acknowledges {o7['id']}"
    yield "", f"the provider saw {provider.calls} calls and made {len(provider.charges)} charge"

    clock.set(1, 12, 5)
    changed = {"id": o7["id"], "inputs": dict(o7["inputs"], amount_cents=6000)}
    yield clock.stamp(), (f"a message for {changed['id']} arrives again, now for"
                          f" {worker.dollars(changed['inputs']['amount_cents'])}")
    try:
        worker.deliver(db, provider, changed, clock=clock)
    except worker.Parked:
        dead.append(changed)
    yield clock.stamp(), f"W2 refuses it (Conflict) and parks it: {len(dead)} dead letter"

    o8 = {"id": worker.operation_id("North", "O8"),
          "inputs": {"tenant": "North", "invoice": 8, "amount_cents": 2000}}
    yield from charge_then_crash(o8, 12, 10)
    clock.set(2, 14, 0)
    yield clock.stamp(), (f"{o8['id']} is delivered again, 26 hours later: the provider has"
                          " forgotten its key")
    charge = worker.deliver(db, provider, o8, clock=clock)
    yield clock.stamp(), f"W2 records {charge} and acknowledges {o8['id']}"
    yield "", f"the provider made {len(provider.charges)} charges for 2 operations"


def print_o7():
    clock = Clock()
    db = worker.open_db(":memory:")
    for stamp, text in replay_o7(clock, db, Provider(clock, first_charge=9), []):
        print(f"{stamp:13}{text}")


CRASH_POINTS = {"before-call": "before the call",
                "after-commit": "after the provider's commit",
                "after-record": "after it recorded the charge, before it acknowledged"}


def replay_crash(point):
    """W1 dies at one of the three points; W2 gets the operation again."""
    clock = Clock()
    db, provider = worker.open_db(":memory:"), Provider(clock)
    o7 = {"id": worker.operation_id("North", "O7"),
          "inputs": {"tenant": "North", "invoice": 7, "amount_cents": 5000}}
    w1_db, w1_provider = db, provider
    if point == "before-call":
        w1_provider = CrashBeforeCall()
    elif point == "after-commit":
        w1_provider = CrashAfterCall(provider)
    else:
        w1_db = CrashAfterRecord(db)
    print(f"W1 takes {o7['id']} ({worker.dollars(o7['inputs']['amount_cents'])}), stores it as"
          " started, and goes to call the provider")
    try:
        worker.process(w1_db, w1_provider, o7["id"], o7["inputs"], clock)
    except WorkerCrashed:
        state, charge = db.execute("SELECT state, charge_id FROM operations WHERE id = ?",
                                   (o7["id"],)).fetchone()
        print(f"W1 crashes {CRASH_POINTS[point]}; our record: {state}, charge {charge or 'none'}")
    print(f"the queue delivers {o7['id']} again; W2 takes it")
    charge = worker.deliver(db, provider, o7, clock=clock)
    print(f"W2 acknowledges {o7['id']} with charge {charge}")
    calls = f"{provider.calls} call{'s' * (provider.calls > 1)}"
    print(f"the provider saw {calls} and made {len(provider.charges)} charge"
          f"{'s' * (len(provider.charges) > 1)}")


def show_admission():
    clock = Clock()
    db = worker.open_db(":memory:")

    def submit(tenant, client_id, again=""):
        try:
            state, _ = worker.admit(db, tenant, client_id, {"invoice": client_id})
            print(f"{tenant} submits {client_id}{again}: {state}")
        except worker.Refused as refusal:
            print(f"{tenant} submits {client_id}{again}: refused: {refusal}")

    def start(tenant, when=""):
        message = worker.start_next(db, tenant, clock)
        started = (message["id"] if message
                   else f"none: {tenant} has {worker.MAX_RUNNING} running")
        print(f"{when}the worker starts {tenant}'s next: {started}")
        return message

    print(f"each tenant may have {worker.MAX_RUNNING} operations running"
          f" and {worker.MAX_WAITING} waiting")
    for number in range(1, worker.MAX_WAITING + 3):              # two more than may wait
        submit("North", f"N{number}")
    submit("North", "N1", " again")                       # answered, not queued twice
    running = [start("North") for _ in range(worker.MAX_RUNNING)]
    start("North")
    submit("South", "N1")
    start("South")
    submit("North", f"N{worker.MAX_WAITING + 1}", " again")
    print(f"the workers running {' and '.join(m['id'] for m in running)} die;"
          " nothing gives their slots back")
    clock.advance(worker.LEASE_SECONDS)
    start("North", f"after {clock.now:.0f} s, their leases still hold: ")
    clock.advance(1)
    start("North", f"after {clock.now:.0f} s, their leases have run out: ")


def why(db, tenant, client_id):
    """The reason an operation's record keeps: why it is dead, or was put back."""
    (reason,) = db.execute("SELECT last_error FROM work WHERE id = ?",
                           (worker.operation_id(tenant, client_id),)).fetchone()
    return f"; why: {reason}" if reason else ""


def show_cancel():
    clock = Clock()
    db, provider = worker.open_db(":memory:"), Provider(clock)
    for client_id in ("P1", "P2", "P3", "P4"):
        worker.admit(db, "North", client_id, {"tenant": "North", "invoice": client_id,
                                       "amount_cents": 1000})
    print("the worker runs P1, then P2 while the provider is down; P3 starts; P4 waits")
    worker.work_one(db, provider, "North", clock=clock)
    worker.work_one(db, Outage(), "North", clock=clock, attempts=1)
    p3 = worker.start_next(db, "North", clock)
    for client_id in ("P1", "P2", "P3", "P4"):
        state, charge = worker.status(db, "North", client_id)
        print(f"status of {client_id}: {state}, charge {charge}{why(db, 'North', client_id)}")
    for tenant, client_id in (("North", "P4"), ("North", "P4"), ("North", "P3"),
                              ("North", "P2"), ("North", "P1"), ("North", "P9"),
                              ("South", "P1")):
        print(f"{tenant} cancels {client_id}: {worker.cancel(db, tenant, client_id)}")
    worker.see_through(db, provider, p3, clock)
    state, charge = worker.status(db, "North", "P3")
    print(f"the worker reaches P3's safe point, before the call: {state}, charge {charge}")


def show_deadline():
    clock = Clock()
    db, provider = worker.open_db(":memory:"), Provider(clock)
    stalled = Stalled(provider, 600)
    worker.admit(db, "North", "O9", {"tenant": "North", "invoice": 9, "amount_cents": 3000})
    print(f"an operation must be over within {worker.DEADLINE_SECONDS} s;"
          f" today the provider answers after {stalled.seconds} s")
    print(f"W1 starts {worker.operation_id('North', 'O9')} and calls the provider")
    worker.work_one(db, stalled, "North", clock=clock)
    print(f"W1 gives its slot back after {clock():g} s")
    state, charge = worker.status(db, "North", "O9")
    print(f"status of O9: {state}, charge {charge}{why(db, 'North', 'O9')}")


def show_budget():
    print("the provider is down; 100 charges arrive, one every 0.5 s, each allowed 5 tries")
    for budget_on in (False, True):
        clock, outage, parked, put_back = Clock(), Outage(), 0, 0
        budget = worker.RetryBudget(clock) if budget_on else None
        rng = random.Random(1)
        for number in range(100):
            clock.now = max(clock.now, number * 0.5)
            message = {"id": f"M{number}", "inputs": {"amount_cents": 100}}
            try:
                worker.deliver(worker.open_db(":memory:"), outage, message, sleep=clock.advance,
                        budget=budget, rng=rng, clock=clock)
            except worker.Parked:
                parked += 1
            except worker.RetryLater:
                put_back += 1
        name = (f"with a {worker.RETRY_RATIO:.0%} retry budget" if budget_on
                else "without a retry budget")
        print(f"{name}: {outage.calls} calls to the provider,"
              f" {outage.calls - 100} of them retries;"
              f" {parked} parked for a person, {put_back} put back for later")


def show_spend():
    clock = Clock()
    provider = Provider(clock)
    if os.path.exists("spend.db"):
        os.remove("spend.db")                           # each run starts afresh
    workers = {"W1": worker.open_db("spend.db"),          # two connections
               "W2": worker.open_db("spend.db")}
    print(f"the service may charge {worker.dollars(worker.MAX_CENTS_PER_HOUR)} an hour,"
          " across all tenants; W1 and W2 count it in spend.db")
    for number, tenant in ((1, "North"), (2, "South"), (3, "North")):
        worker.admit(workers["W1"], tenant, f"B{number}",
                     {"tenant": tenant, "invoice": number, "amount_cents": 20000})
    for hours, minutes, name, tenant in ((12, 0, "W1", "North"), (12, 10, "W2", "South"),
                                         (12, 20, "W1", "North"), (13, 0, "W2", "North")):
        clock.set(1, hours, minutes)
        db = workers[name]
        op_id, inputs = db.execute("SELECT id, inputs FROM work WHERE tenant = ?"
                                   " AND state = 'waiting' ORDER BY rowid LIMIT 1",
                                   (tenant,)).fetchone()
        print(f"{clock.stamp()}  {name} runs {op_id}"
              f" ({worker.dollars(json.loads(inputs)['amount_cents'])})")
        try:
            worker.work_one(db, provider, tenant, clock=clock)
        except worker.OverBudget as refusal:
            print(f"{'':13}refused: {refusal}")
            state, charge = worker.status(db, tenant, op_id.partition("/")[2])
            print(f"{'':13}status of {op_id}: {state}, charge {charge}")


def main():
    commands = {"o7": print_o7, "admission": show_admission, "cancel": show_cancel,
                "deadline": show_deadline, "budget": show_budget, "spend": show_spend,
                "crash": replay_crash}
    parser = argparse.ArgumentParser(description="Replays of Exercise 9's worked cases.")
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
