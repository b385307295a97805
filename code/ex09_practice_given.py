# Exercise 9's practice world: GIVEN. Download this file from the guide and
# put it beside your ex09_charge_worker.py; do not type it. It holds what
# the worker is tried against: a payment provider to practise on, workers
# that crash at each point, a provider that stalls and one that is down,
# simulated clocks (one that several workers take turns on), and the
# replays that `python3 ex09_charge_worker.py COMMAND` runs (the worker's
# last lines hand its command line to main()).
# Everything it runs of the worker is yours: worker.process, worker.admit...

import argparse
import collections
import contextlib
import hashlib
import hmac
import io
import json
import os
import random
import sys
import threading
import time

import ex09_charge_worker as worker

KEY_WINDOW_SECONDS = 24 * 3600   # the provider keeps a key this long
                                 # (Stripe's API v1: at least 24 h)


# ---- a provider to practise on

class Provider:
    """A payment provider in Stripe's shape. create() makes a charge that is
    not paid yet and returns its id; confirm() pays it; retrieve() says how
    it stands; cancel() makes sure it is never paid. charge() creates and
    pays in one request, as many integrations do (Stripe's confirm=true).

    A request's key is kept for KEY_WINDOW_SECONDS. Its first answer is
    given again to the same request; another request under the key is
    refused; and while the first is still running, a second gets "in
    progress" (409), which is safe to retry. A charge is paid once, however
    often it is confirmed (Stripe answers a second confirm of a paid charge
    with an error that says so; this provider answers with the charge)."""

    def __init__(self, clock, first_charge=1):
        self.clock = clock
        self.keys = {}                  # key -> (request, answer, when)
        self.busy = {}                  # key -> when its first request answers
        self.charges = {}               # id -> {"key", "cents", "state"}
        self.payments = []              # (when, cents, charge id): money moved
        self.declining = set()          # keys whose card is declined
        self.events = []                # for the webhook: paid or declined
        self.next_charge = first_charge
        self.calls = 0

    def create(self, idempotency_key, timeout=None, **inputs):
        return self.request(idempotency_key, ("create", worker.digest(inputs)),
                            lambda: self.new_charge(idempotency_key, inputs))

    def charge(self, idempotency_key, timeout=None, **inputs):
        def create_and_pay():
            return self.pay(self.new_charge(idempotency_key, inputs))
        return self.request(idempotency_key, ("charge", worker.digest(inputs)),
                            create_and_pay)

    def confirm(self, charge_id, idempotency_key, timeout=None):
        return self.request(idempotency_key, ("confirm", charge_id),
                            lambda: self.pay(charge_id))

    def retrieve(self, charge_id, timeout=None):
        self.calls += 1
        state = self.charges[charge_id]["state"]
        print(f"{'':13}provider: {charge_id} is {state}")
        return state

    def cancel(self, charge_id, timeout=None):
        self.calls += 1
        charge = self.charges[charge_id]
        if charge["state"] == "waiting":
            charge["state"] = "cancelled"
        print(f"{'':13}provider: cancel {charge_id}: it is {charge['state']}")
        return charge["state"]

    def paid(self):
        """The ids of the charges that were paid, in order."""
        return [charge_id for _, _, charge_id in self.payments]

    # -- how the provider answers a request that carries a key

    def request(self, key, request, do):
        self.calls += 1
        if self.clock() < self.busy.get(key, 0):
            raise worker.Retryable(f"409 Conflict: a request with key {key} "
                                   "is in progress")
        known = self.keys.get(key)
        if known and self.clock() - known[2] < KEY_WINDOW_SECONDS:
            if known[0] != request:
                raise worker.Declined(f"provider: key {key} was first used "
                                      "for another request")
            print(f"{'':13}provider: key {key} again: "
                  f"the same answer, {known[1]}")
            return known[1]
        answer = do()
        self.keys[key] = (request, answer, self.clock())
        return answer

    def new_charge(self, key, inputs):
        charge_id = f"C{self.next_charge}"
        self.next_charge += 1
        self.charges[charge_id] = {"key": key, "cents": inputs["amount_cents"],
                                   "state": "waiting"}
        print(f"{'':13}provider: new charge {charge_id},"
              f" {worker.dollars(inputs['amount_cents'])}, key {key}")
        return charge_id

    def pay(self, charge_id):
        charge = self.charges[charge_id]
        if charge["state"] == "waiting" and charge["key"] in self.declining:
            charge["state"] = "declined"
            self.tell("charge.declined", charge_id)
        if charge["state"] == "waiting":
            charge["state"] = "paid"
            self.payments.append((self.clock(), charge["cents"], charge_id))
            self.tell("charge.paid", charge_id)
            print(f"{'':13}provider: {charge_id} paid")
        elif charge["state"] == "paid":
            print(f"{'':13}provider: {charge_id} was paid already: "
                  "nothing more")
        if charge["state"] != "paid":
            print(f"{'':13}provider: {charge_id} is {charge['state']}: "
                  "not paid")
            raise worker.Declined(f"{charge_id} is {charge['state']}")
        return charge_id

    def tell(self, kind, charge_id):
        """An event for the webhook: its id, its kind, when, and the charge,
        with the operation whose key created it (Stripe's metadata)."""
        charge = self.charges[charge_id]
        self.events.append({"id": f"evt_{len(self.events) + 1}", "type": kind,
                            "created": self.clock(), "charge": {
                                "id": charge_id, "operation": charge["key"],
                                "cents": charge["cents"]}})


class RetryBudget:
    """One worker's retry budget, kept in its memory: its retries may be at
    most RETRY_RATIO of the calls it made in the last BUDGET_WINDOW_SECONDS
    (both set in your ex09_charge_worker.py). process() calls request()
    before each call to the provider; deliver() calls allow_retry()."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.requests = collections.deque()  # each call's time, oldest first
        self.retries = collections.deque()   # when each retry was allowed

    def request(self):
        self.requests.append(self.clock())

    def allow_retry(self):
        now = self.clock()
        for times in (self.requests, self.retries):
            while times and times[0] < now - worker.BUDGET_WINDOW_SECONDS:
                times.popleft()              # older than the window: forgotten
        if len(self.retries) + 1 > worker.RETRY_RATIO * len(self.requests):
            return False
        self.retries.append(now)
        return True


def signed(event, secret, when):
    """A delivery of `event` as the provider posts it, signed as Stripe signs:
    the body, and a header "t=TIME,v1=SIGNATURE", the signature being an
    HMAC-SHA256 with the endpoint's secret of TIME, a dot and the body."""
    body = json.dumps(event).encode()
    signature = hmac.new(secret, f"{when:.0f}.".encode() + body,
                         hashlib.sha256).hexdigest()
    return body, f"t={when:.0f},v1={signature}"


class WorkerCrashed(Exception):
    pass


class CrashAfterPaying:
    """The provider, seen by a worker that dies as soon as a call of its has
    paid: before it can record the payment or acknowledge the message."""

    def __init__(self, provider):
        self.provider = provider

    def __getattr__(self, name):
        call = getattr(self.provider, name)

        def then_crash(*args, **kwargs):
            paid = len(self.provider.payments)
            answer = call(*args, **kwargs)
            if len(self.provider.payments) > paid:
                raise WorkerCrashed()
            return answer
        return then_crash


class CrashBeforeCall:
    """The provider, seen by a worker that dies just before it sends a call."""

    def __getattr__(self, name):
        def crash(*args, **kwargs):
            raise WorkerCrashed()
        return crash


class CrashAfterRecord:
    """The database, seen by a worker that dies as soon as it has recorded the
    charge: before it can acknowledge the message."""

    def __init__(self, db):
        self.db = db

    def execute(self, sql, params=()):
        cursor = self.db.execute(sql, params)
        if "state = 'charged'" in sql:
            raise WorkerCrashed()
        return cursor


class Stalled:
    """The provider on a bad day: a confirm pays at once, but its answer takes
    `seconds`, and until then another request with its key is "in progress".
    A caller that passes a timeout stops waiting when it runs out, not
    knowing whether it paid; a caller without one waits it out."""

    def __init__(self, provider, seconds):
        self.provider, self.seconds = provider, seconds
        self.open = 0                   # calls waiting for their answer now

    def __getattr__(self, name):
        return getattr(self.provider, name)

    def confirm(self, charge_id, idempotency_key, timeout=None):
        answer = self.provider.confirm(charge_id, idempotency_key)
        clock = self.provider.clock
        self.provider.busy[idempotency_key] = clock() + self.seconds
        waited = (self.seconds if timeout is None
                  else min(timeout, self.seconds))
        self.open += 1
        try:
            clock.advance(waited)
        finally:
            self.open -= 1
        if waited < self.seconds:
            print(f"{'':13}no answer within {timeout:g} s: "
                  "the worker stops waiting")
            # it paid all the same
            raise worker.Retryable(f"no answer within {timeout:g} s")
        return answer


class Outage:
    """A provider that is down: every call fails, as a 503 would."""

    def __init__(self):
        self.calls = 0

    def __getattr__(self, name):
        def fail(*args, **kwargs):
            self.calls += 1
            raise worker.Retryable("503 Service Unavailable")
        return fail


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


class TakingTurns(Clock):
    """Simulated time for workers that run side by side. Each runs on its own
    thread, but only one at a time: it runs until it waits (advance), and then
    the clock jumps to the earliest moment that a waiting one wakes. So a
    worker that waits 30 s for the provider holds its slot for those 30 s
    while the others go on, and every run prints the same."""

    def __init__(self):
        super().__init__()
        self.turn = {}                  # thread -> the event that wakes it

    def run(self, *workers):
        """Run each of `workers`, a function of no arguments, until all
        return."""
        threads = [threading.Thread(target=self.take_turns, args=(work,),
                                    daemon=True)
                   for work in workers]
        self.turn = {thread: threading.Event() for thread in threads}
        self.wakes = dict.fromkeys(threads, self.now)  # thread -> its next run
        self.paused, self.failure = threading.Event(), None
        for thread in threads:
            thread.start()
        while self.wakes:
            thread = min(self.wakes,
                         key=lambda t: (self.wakes[t], threads.index(t)))
            self.now = max(self.now, self.wakes.pop(thread))
            self.paused.clear()
            self.turn[thread].set()
            self.paused.wait()
            if self.failure is not None:
                raise self.failure

    def take_turns(self, work):
        self.wait_for_turn()
        try:
            work()
        except BaseException as error:         # for run() to raise
            self.failure = error
        self.paused.set()

    def advance(self, seconds):
        if threading.current_thread() not in self.turn:
            return super().advance(seconds)     # not one of the workers
        self.wakes[threading.current_thread()] = self.now + seconds
        self.paused.set()
        self.wait_for_turn()

    def wait_for_turn(self):
        turn = self.turn[threading.current_thread()]
        turn.wait()
        turn.clear()


def charge_inputs(tenant, invoice, cents):
    """The inputs of a charge, as the worker expects them: in US dollars,
    the currency that Chapter 11's CURRENCY names."""
    return {"tenant": tenant, "invoice": invoice, "amount_cents": cents,
            "currency": "usd"}


def replay_o7(clock, db, provider, dead, changed_id="O7"):
    """The O7 timeline, one line at a time: yields (time, text) for each line
    before doing what it says; time is "" for a line that goes on from the
    one before. The provider prints what it does as it does it. The $60.00
    message comes under changed_id (Study Drill 1 gives it a new one)."""
    o7 = {"id": worker.operation_id("North", "O7"),
          "inputs": charge_inputs("North", 7, 5000)}

    def pay_then_crash(message, hours, minutes):
        """W1 creates the charge, stores its id, confirms it, and dies a
        minute later."""
        op_id, inputs = message["id"], message["inputs"]
        clock.set(1, hours, minutes)
        amount = worker.dollars(inputs["amount_cents"])
        yield clock.stamp(), (f"W1 takes {op_id} (invoice {inputs['invoice']},"
                              f" {amount}): creates a charge, stores its id,"
                              " confirms it")
        try:
            crashing = CrashAfterPaying(provider)
            worker.process(db, worker.CreateThenConfirm(db, crashing, clock),
                           op_id, inputs, clock)
        except WorkerCrashed:
            clock.set(1, hours, minutes + 1)
            yield clock.stamp(), ("W1 crashes before it records the payment"
                                  f" or acknowledges {op_id}")

    def deliver(message):
        paying = worker.CreateThenConfirm(db, provider, clock)
        return worker.deliver(db, paying, message, dead, clock=clock)

    yield from pay_then_crash(o7, 12, 0)
    clock.set(1, 12, 2)
    yield clock.stamp(), (f"the queue delivers {o7['id']} again (at least "
                          "once, as promised); W2 takes it")
    charge = deliver(o7)
    yield clock.stamp(), f"W2 records {charge} and acknowledges {o7['id']}"
    yield "", (f"the provider saw {provider.calls} calls and made "
               f"{len(provider.payments)} charge")

    clock.set(1, 12, 5)
    changed = {"id": worker.operation_id("North", changed_id),
               "inputs": dict(o7["inputs"], amount_cents=6000)}
    again = " again, now" if changed["id"] == o7["id"] else ","
    amount = worker.dollars(changed["inputs"]["amount_cents"])
    yield clock.stamp(), (f"a message for {changed['id']} arrives{again} for"
                          f" {amount}")
    charge = deliver(changed)
    if charge is None:
        yield clock.stamp(), ("W2 refuses it (Conflict) and parks it: "
                              f"{len(dead)} dead letter")
    else:
        yield clock.stamp(), (f"W2 records {charge} and acknowledges "
                              f"{changed['id']}")

    o8 = {"id": worker.operation_id("North", "O8"),
          "inputs": charge_inputs("North", 8, 2000)}
    yield from pay_then_crash(o8, 12, 10)
    clock.set(2, 14, 0)
    yield clock.stamp(), (f"{o8['id']} is delivered again, 26 hours later: "
                          "the provider has forgotten its keys")
    charge = deliver(o8)
    yield clock.stamp(), f"W2 records {charge} and acknowledges {o8['id']}"
    (operations,) = db.execute("SELECT count(*) FROM operations").fetchone()
    yield "", (f"the provider made {len(provider.payments)} charges "
               f"for {operations} operations")


def print_o7(changed_id="O7"):
    clock = Clock()
    db = worker.open_db(":memory:")
    provider = Provider(clock, first_charge=9)
    for stamp, text in replay_o7(clock, db, provider, [], changed_id):
        print(f"{stamp:13}{text}")


CRASH_POINTS = {"before-call": "before the call",
                "after-commit": "after the provider's commit",
                "after-record":
                    "after it recorded the charge, before it acknowledged"}


def replay_crash(point):
    """W1 dies at one of the three points; W2 gets the operation again."""
    clock = Clock()
    db, provider = worker.open_db(":memory:"), Provider(clock)
    o7 = {"id": worker.operation_id("North", "O7"),
          "inputs": charge_inputs("North", 7, 5000)}
    w1_db, w1_provider = db, provider
    if point == "before-call":
        w1_provider = CrashBeforeCall()
    elif point == "after-commit":
        w1_provider = CrashAfterPaying(provider)
    else:
        w1_db = CrashAfterRecord(db)
    amount = worker.dollars(o7["inputs"]["amount_cents"])
    print(f"W1 takes {o7['id']} ({amount}), stores it as started, "
          "and goes to call the provider")
    try:
        worker.process(w1_db,
                       worker.CreateThenConfirm(w1_db, w1_provider, clock),
                       o7["id"], o7["inputs"], clock)
    except WorkerCrashed:
        state, charge = db.execute(
            "SELECT state, charge_id FROM operations WHERE id = ?",
            (o7["id"],)).fetchone()
        print(f"W1 crashes {CRASH_POINTS[point]}; our record: {state}, "
              f"charge {charge or 'none'}")
    print(f"the queue delivers {o7['id']} again; W2 takes it")
    charge = worker.deliver(db, worker.CreateThenConfirm(db, provider, clock),
                            o7, [], clock=clock)
    print(f"W2 acknowledges {o7['id']} with charge {charge}")
    calls = f"{provider.calls} call{'s' * (provider.calls > 1)}"
    print(f"the provider saw {calls} and made {len(provider.payments)} charge"
          f"{'s' * (len(provider.payments) > 1)}")


def show_admission():
    clock = Clock()
    db = worker.open_db(":memory:")

    def submit(tenant, client_id, again=""):
        try:
            inputs = charge_inputs(tenant, client_id, 1000)
            state, _ = worker.admit(db, tenant, client_id, inputs, clock)
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
    for number in range(1, worker.MAX_WAITING + 3):  # two more than may wait
        submit("North", f"N{number}")
    submit("North", "N1", " again")                  # answered, not queued
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
    """The reason an operation's record keeps: why it ended as it did, or
    was put back."""
    op_id = worker.operation_id(tenant, client_id)
    (reason,) = db.execute("SELECT last_error FROM work WHERE id = ?",
                           (op_id,)).fetchone()
    return f"; why: {reason}" if reason else ""


def print_status(db, tenant, client_ids):
    for client_id in client_ids:
        state, charge = worker.status(db, tenant, client_id)
        print(f"status of {client_id}: {state}, charge {charge}"
              f"{why(db, tenant, client_id)}")


def show_cancel():
    clock = Clock()
    db, provider = worker.open_db(":memory:"), Provider(clock)
    provider.declining.add(worker.operation_id("North", "P2"))
    for client_id in ("P1", "P2", "P3", "P4", "P5"):
        worker.admit(db, "North", client_id,
                     charge_inputs("North", client_id, 1000), clock)
    print("the worker runs P1; P2, whose card is declined; P3, while the "
          "provider stalls; P4 starts; P5 waits")
    worker.work_one(db, provider, "North", clock=clock)
    worker.work_one(db, provider, "North", clock=clock)
    worker.work_one(db, Stalled(provider, 600), "North", clock=clock)
    p4 = worker.start_next(db, "North", clock)
    print_status(db, "North", ("P1", "P2", "P3", "P4", "P5"))
    asks = (("North", "P5"), ("North", "P5"), ("North", "P4"), ("North", "P3"),
            ("North", "P2"), ("North", "P1"), ("North", "P9"), ("South", "P1"))
    for tenant, client_id in asks:
        answer = worker.cancel(db, tenant, client_id)
        print(f"{tenant} cancels {client_id}: {answer}")
    worker.see_through(db, provider, p4, clock)
    state, charge = worker.status(db, "North", "P4")
    print("the worker takes P4 to its gate, before any call: "
          f"{state}, charge {charge}")


def show_deadline():
    clock = Clock()
    db, provider = worker.open_db(":memory:"), Provider(clock)
    stalled = Stalled(provider, 600)
    worker.admit(db, "North", "O9", charge_inputs("North", 9, 3000), clock)
    print(f"a start must be over within {worker.DEADLINE_SECONDS} s;"
          f" today the provider answers after {stalled.seconds} s")
    print(f"W1 starts {worker.operation_id('North', 'O9')} "
          "and calls the provider")
    worker.work_one(db, stalled, "North", clock=clock)
    print(f"W1 gives its slot back after {clock():g} s")
    print_status(db, "North", ("O9",))
    clock.advance(30)
    oldest = worker.settle(db, provider, clock)
    print(f"after {clock():g} s, the reconciler finds the oldest unknown "
          f"charge {oldest:g} s old, and waits")
    clock.advance(worker.SETTLE_AFTER_SECONDS)
    print(f"after {clock():g} s, it asks the provider about every charge "
          f"unknown for {worker.SETTLE_AFTER_SECONDS} s")
    oldest = worker.settle(db, provider, clock)
    print_status(db, "North", ("O9",))
    left = "none" if oldest == 0 else f"the oldest {oldest:g} s old"
    print(f"unknown charges left: {left}")


def show_budget():
    print("the provider is down; 100 charges arrive, one every 0.5 s, "
          "each allowed 5 tries")
    for budget_on in (False, True):
        clock, outage, given_up, put_back = Clock(), Outage(), 0, 0
        budget = RetryBudget(clock) if budget_on else None
        rng = random.Random(1)
        for number in range(100):
            clock.now = max(clock.now, number * 0.5)
            message = {"id": f"M{number}",
                       "inputs": charge_inputs("North", number, 100)}
            try:
                db = worker.open_db(":memory:")
                if worker.deliver(db, outage, message, [], sleep=clock.advance,
                                  budget=budget, rng=rng, clock=clock) is None:
                    given_up += 1
            except worker.RetryLater:
                put_back += 1
        name = (f"with a {worker.RETRY_RATIO:.0%} retry budget" if budget_on
                else "without a retry budget")
        print(f"{name}: {outage.calls} calls to the provider,"
              f" {outage.calls - 100} of them retries;"
              f" {given_up} given up after 5 tries,"
              f" {put_back} put back at once")


def show_spend():
    clock = Clock()
    provider = Provider(clock)
    if os.path.exists("spend.db"):
        os.remove("spend.db")                      # each run starts afresh
    workers = {"W1": worker.open_db("spend.db"),   # two connections
               "W2": worker.open_db("spend.db")}
    hourly = worker.dollars(worker.MAX_CENTS_PER_HOUR)
    print(f"the service may charge {hourly} an hour, across all tenants; "
          "W1 and W2 count it in spend.db")
    clock.set(1, 11, 55)
    for number, tenant in ((1, "North"), (2, "South"), (3, "North")):
        worker.admit(workers["W1"], tenant, f"B{number}",
                     charge_inputs(tenant, number, 20000), clock)
    turns = ((12, 0, "W1", "North"), (12, 10, "W2", "South"),
             (12, 20, "W1", "North"), (13, 0, "W2", "North"))
    for hours, minutes, name, tenant in turns:
        clock.set(1, hours, minutes)
        db = workers[name]
        op_id, inputs = db.execute(
            "SELECT id, inputs FROM work WHERE tenant = ?"
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


def run_outage(trouble, budget_on, seed=1):
    """Three tenants each submit a 25-cent charge every 5 s for 30 minutes;
    the provider is in `trouble` ('down': every call a 503, or 'slow': it
    pays, and answers after 45 s) for the first 10. One worker serves the
    tenants in turn; the reconciler runs every minute. After the 30 minutes,
    the worker goes on until nothing waits. Returns what happened, counted."""
    clock, counts = Clock(), collections.Counter()
    db, provider = worker.open_db(":memory:"), Provider(clock)
    troubled = Outage() if trouble == "down" else Stalled(provider, 45)
    budget = RetryBudget(clock) if budget_on else None
    rng, tenants = random.Random(seed), ("North", "South", "East")
    next_submit, next_settle = 0, 60

    def now_provider():
        if clock() < 600:
            return troubled
        # counted at the first call after the trouble
        counts.setdefault("calls in trouble", troubled.calls)
        return provider

    def unfinished():
        return db.execute("SELECT count(*) FROM work WHERE state"
                          " IN ('waiting', 'running')").fetchone()[0]

    while clock() < 1800 or unfinished():
        if clock() > 8 * 3600:
            raise RuntimeError("still waiting after 8 hours")
        while clock() >= next_submit and clock() < 1800:
            for tenant in tenants:
                try:
                    worker.admit(db, tenant, f"I{next_submit}",
                                 charge_inputs(tenant, next_submit, 25), clock)
                    counts["admitted"] += 1
                except worker.Refused:
                    counts["refused at admission"] += 1
            next_submit += 5
        for tenant in tenants:
            with contextlib.suppress(worker.RetryLater, worker.OverBudget):
                worker.work_one(db, now_provider(), tenant, clock=clock,
                                rng=rng, sleep=clock.advance, budget=budget)
        if clock() >= next_settle:
            worker.settle(db, now_provider(), clock)
            next_settle += 60
        clock.advance(1)
    counts.update(state for (state,) in db.execute("SELECT state FROM work"))
    paid = [provider.charges[charge_id]["key"]
            for charge_id in provider.paid()]
    counts["paid"] = len(paid)
    counts["paid twice"] = len(paid) - len(set(paid))
    return counts


def show_outage():
    print("3 tenants each charge $0.25 every 5 s for 30 min; "
          "the provider is in trouble for the first 10")
    for trouble, words in (("down", "down: a 503 for every call"),
                           ("slow", "slow: it pays, then answers after 45 s")):
        print(words)
        for budget_on in (False, True):
            # the provider's chatter, not shown
            with contextlib.redirect_stdout(io.StringIO()):
                counts = run_outage(trouble, budget_on)
            print(f"  retry budget {'on: ' if budget_on else 'off:'}"
                  f" {counts['calls in trouble']:3} calls in trouble;"
                  f" {counts['admitted']} admitted, {counts['done']} done,"
                  f" {counts['paid']} paid, {counts['paid twice']} twice,"
                  f" {counts['dead']} dead")


def show_workload():
    """The source document's controlled workload, run once: an operation too
    dear to take, a bulk run that fills North's queue, a duplicate, a client
    that cancels, and North's charges stalled for two minutes, while South
    keeps paying. Three workers and a reconciler share workload.db."""
    clock, tenants, rng = TakingTurns(), ("North", "South"), random.Random(1)
    clock.set(1, 12, 0)
    provider = Provider(clock)
    stalled, began, out = Stalled(provider, 45), clock(), sys.stdout
    arrived, ended, done = {}, {}, threading.Event()
    if os.path.exists("workload.db"):
        os.remove("workload.db")                   # each run starts afresh

    def connect():                  # a connection of its own, as a process has
        return contextlib.closing(worker.open_db("workload.db"))

    def say(text):
        seconds = int(clock()) % 86400
        hours, minutes = seconds // 3600, seconds // 60 % 60
        print(f"{hours:02}:{minutes:02}:{seconds % 60:02}  {text}",
              file=out)                         # past the provider's chatter

    def provider_for(tenant):       # North's charges meet a bank that stalls
        stalling = tenant == "North" and clock() < began + 120
        return stalled if stalling else provider

    def submit(db, tenant, client_id, cents):
        try:
            inputs = charge_inputs(tenant, client_id, cents)
            answer = worker.admit(db, tenant, client_id, inputs, clock)
        except worker.Refused as refusal:
            return f"refused: {refusal}"
        arrived.setdefault(worker.operation_id(tenant, client_id), clock())
        return f"{answer[0]}, charge {answer[1]}"

    def client():
        with connect() as db:
            answer = submit(db, "North", "X1", 500000)
            say(f"North asks for $5,000.00: {answer}")
            answers = [submit(db, "North", f"B{number}", 2000)
                       for number in range(1, 9)]
            say("North sends a bulk run of 8 charges of $20.00, B1 to B8:")
            for answer, times in collections.Counter(answers).items():
                say(f"  {times} of them: {answer}")
            for client_id in ("S1", "S2", "S3", "S4", "S5", "S6"):
                clock.advance(10)
                answer = submit(db, "South", client_id, 500)
                say(f"South sends {client_id}, $5.00: {answer}")
                if client_id == "S2":
                    answer = submit(db, "North", "B1", 2000)
                    say(f"North sends B1 again: {answer}")
                if client_id == "S3":
                    for client_id in ("B5", "B2"):
                        answer = worker.cancel(db, "North", client_id)
                        say(f"North cancels {client_id}: {answer}")

    def count(db, sql, *params):
        return db.execute(f"SELECT count(*) FROM {sql}", params).fetchone()[0]

    def slots(db):
        return [str(count(db, "work WHERE tenant = ? AND state = ?",
                          tenant, state))
                for state in ("running", "waiting") for tenant in tenants]

    def observe():
        with connect() as db:
            print("time      running  waiting  calls open  rows stored"
                  "  calls made  paid", file=out)
            while not done.is_set():
                for op_id, state in db.execute(
                        "SELECT id, state FROM work"
                        " WHERE state NOT IN ('waiting', 'running')"):
                    ended.setdefault(op_id, (state, clock()))
                now = slots(db)
                if (clock() - began > 60 and now == ["0"] * 4
                        and not stalled.open):
                    done.set()                  # all over: back to the start
                if (clock() - began) % 30 == 0 or done.is_set():
                    rows = count(db, "work") + count(db, "operations")
                    say(f"{now[0] + '/' + now[1]:>7}{now[2] + '/' + now[3]:>9}"
                        f"{stalled.open:12}{rows:13}"
                        f"{provider.calls:12}{len(provider.payments):6}")
                clock.advance(1)
                if clock() - began > 3600:
                    raise RuntimeError(
                        "the workload is not over after an hour")

    def work():
        with connect() as db:
            while not done.is_set():
                busy = False
                for tenant in tenants:
                    with contextlib.suppress(worker.RetryLater,
                                             worker.OverBudget):
                        took = worker.work_one(
                            db, provider_for(tenant), tenant, clock=clock,
                            rng=rng, sleep=clock.advance)
                        busy |= took is not None
                if not busy:
                    clock.advance(1)

    def reconcile():
        with connect() as db:
            while not done.is_set():
                clock.advance(60)
                worker.settle(db, provider, clock)

    print(f"3 workers serve North and South, each tenant "
          f"{worker.MAX_RUNNING} running and"
          f" {worker.MAX_WAITING} waiting at most")
    print("for the first 2 minutes, the provider answers North's charges "
          "after 45 s")
    print("(running and waiting: North's/South's; "
          "calls open: calls waiting for an answer)")
    with contextlib.redirect_stdout(io.StringIO()):  # the provider's chatter
        clock.run(observe, client, work, work, work, reconcile)
    for tenant in tenants:
        mine = {op_id: ended[op_id] for op_id in arrived
                if op_id.startswith(tenant + "/")}
        states = collections.Counter(state for state, _ in mine.values())
        slowest = max(when - arrived[op_id]
                      for op_id, (state, when) in mine.items()
                      if state == "done")
        print(f"{tenant}: {len(mine)} admitted, "
              + ", ".join(f"{times} {state}"
                          for state, times in states.items())
              + f"; the slowest done {slowest:g} s after it came")
    paid = [provider.charges[charge_id]["key"]
            for charge_id in provider.paid()]
    print(f"the provider paid {len(paid)} charges, "
          f"{len(paid) - len(set(paid))} of them twice")


def show_webhooks(receive, secret):
    """Your webhook at work, `receive` taking each delivery (the replay of
    `python3 ex09_webhooks.py`): events sent twice, out of order, before the
    worker's own record, forged, and replayed late."""
    clock = Clock()
    clock.set(1, 12, 0)
    db, provider = worker.open_db(":memory:"), Provider(clock)
    provider.declining.add(worker.operation_id("North", "W2"))
    for client_id in ("W1", "W2", "W3", "W4"):
        worker.admit(db, "North", client_id,
                     charge_inputs("North", client_id, 1000), clock)

    def post(event, secret=secret, signed_at=None):
        when = clock() if signed_at is None else signed_at
        body, header = signed(event, secret, when)
        try:
            answer = receive(db, body, header, clock)
        except Exception as refusal:            # the endpoint answers 400
            answer = f"refused: {refusal}"
        print(f"{clock.stamp()}  {event['id']} ({event['type']},"
              f" {event['charge']['operation']}): {answer}")

    with contextlib.redirect_stdout(io.StringIO()):  # the provider's chatter
        # W1 is paid; W2 declined; W3 paid, its answer unheard; W4 not paid
        worker.work_one(db, provider, "North", clock=clock)
        worker.work_one(db, provider, "North", clock=clock)
        worker.work_one(db, Stalled(provider, 600), "North", clock=clock)
        worker.work_one(db, Outage(), "North", clock=clock, attempts=1)
    paid, declined, unheard = provider.events
    print_status(db, "North", ("W1", "W2", "W3", "W4"))
    post(unheard)
    post(paid)
    post(paid)
    post(declined)
    forged = {"id": "evt_9", "type": "charge.paid", "created": clock(),
              "charge": {"id": "C99", "operation": "North/W4", "cents": 1000}}
    post(forged, secret=b"not the secret")
    clock.advance(3600)
    post(paid, signed_at=paid["created"])
    print_status(db, "North", ("W1", "W2", "W3", "W4"))


def main():
    commands = {"o7": print_o7, "admission": show_admission,
                "cancel": show_cancel, "deadline": show_deadline,
                "budget": show_budget, "spend": show_spend,
                "outage": show_outage, "workload": show_workload,
                "crash": replay_crash}
    parser = argparse.ArgumentParser(
        description="Replays of Exercise 9's worked cases.")
    parser.add_argument("command", choices=commands)
    parser.add_argument("point", nargs="?", choices=CRASH_POINTS,
                        help="for crash: where W1 dies")
    parser.add_argument("--changed-id", default="O7", metavar="ID",
                        help="for o7: the id the $60.00 message comes under "
                             "(Study Drill 1)")
    args = parser.parse_args()
    if args.command == "o7":
        print_o7(args.changed_id)
    elif args.command != "crash":
        commands[args.command]()
    elif args.point:
        replay_crash(args.point)
    else:
        parser.error("crash needs a point: " + ", ".join(CRASH_POINTS))
