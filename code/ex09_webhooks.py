# Exercise 9, optional: webhooks. The provider posts an event for each
# charge it pays or declines: signed, at least once, in no promised order.
# This file checks each event's signature and age, keeps its id in an inbox
# so that a repeat does nothing, and records the answer on the operation.
# Beside ex09_charge_worker.py and ex09_practice_given.py, run:
#   python3 ex09_webhooks.py

import hashlib
import hmac
import json
import time

import ex09_charge_worker as worker

SECRET = b"whsec_practice"       # signing secret, shared with the provider
TOLERANCE_SECONDS = 300          # refused if signed longer ago than this

INBOX = """
CREATE TABLE IF NOT EXISTS inbox (
    event_id     TEXT PRIMARY KEY,      -- every event applied, once
    received_at  REAL NOT NULL
)"""


class Rejected(Exception):
    """Not an event to apply now: the endpoint answers 400, keeping nothing."""


def verify(body, header, clock=time.time):
    """The event in `body`, if `header` ("t=TIME,v1=SIGNATURE") signs it: an
    HMAC-SHA256, with SECRET, of TIME, a dot and the body as it was sent."""
    fields = dict(part.split("=", 1)
                  for part in header.split(",") if "=" in part)
    expected = hmac.new(SECRET, fields.get("t", "").encode() + b"." + body,
                        hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, fields.get("v1", "")):  # not ==
        raise Rejected("the signature does not match")
    if int(fields["t"]) < clock() - TOLERANCE_SECONDS:
        raise Rejected("signed too long ago: a replay")
    return json.loads(body)


def receive(db, body, header, clock=time.time):
    """One delivery: verified, then applied once, the inbox and the answer in
    one transaction. Returns what it did."""
    event = verify(body, header, clock)
    db.execute(INBOX)
    with worker.transaction(db):
        if not db.execute("INSERT INTO inbox (event_id, received_at)"
                          " VALUES (?, ?) ON CONFLICT DO NOTHING",
                          (event["id"], clock())).rowcount:
            return "seen before: nothing done"
        return apply(db, event)


def apply(db, event):
    """Record the event's answer on its operation, from `started` only: an
    answer once recorded, by the worker, the reconciler or an earlier event,
    stays. An operation not known yet is refused, so that the event comes
    again later."""
    charge = event["charge"]
    state = "charged" if event["type"] == "charge.paid" else "failed"
    changed = db.execute(
        "UPDATE operations SET state = ?, charge_id = coalesce(charge_id, ?)"
        " WHERE id = ? AND state = 'started'",
        (state, charge["id"], charge["operation"])).rowcount
    if not changed:
        known = db.execute("SELECT state FROM operations WHERE id = ?",
                           (charge["operation"],)).fetchone()
        if known is None:
            raise Rejected(f"no operation {charge['operation']} yet")
        return f"{charge['operation']} was already {known[0]}"
    db.execute("UPDATE work SET state = ?, last_error = ? WHERE id = ?"
               " AND state IN ('waiting', 'dead')",
               ("done" if state == "charged" else "failed",
                f"settled by the provider's event {event['id']}",
                charge["operation"]))
    return f"recorded: {charge['operation']} {state}"


if __name__ == "__main__":
    import ex09_practice_given  # the replay: given, downloaded, not typed
    ex09_practice_given.show_webhooks(receive, SECRET)
