# shop.py: a small shop built on tinyq. Signing up writes the customer and
# their three jobs in one transaction. The jobs: a welcome email and a $5
# signup fee (effects in the given world_given.py, protected by idempotency
# keys), and 10 loyalty points (a write to the shop's own database,
# protected by Job.complete()). A key the world refuses (KeyReused) fails
# its job for good. maybe_crash() may kill the worker at every dangerous
# moment, and says where; chaos.py sets how likely that is.

import os
import random
import sys

import tinyq
from world_given import KeyReused, World

SHOP_DB = "shop.db"
WORLD_DB = "world.db"
WELCOME = "Welcome to the shop!"
FEE_CENTS = 500
POINTS = 10
LEASE_SECONDS = 0.5              # each job takes a few milliseconds
MAX_ATTEMPTS = 25                # claims, then dead: 1 + 24 retries (Sidekiq
                                 # retries 25 times by default: 26 runs)
BACKOFF_BASE = 0.01
BACKOFF_CAP = 0.5
CRASHED = 3                      # exit status of a worker maybe_crash() killed

# The shop's own table, and the two statements that write to it.
CUSTOMERS = """
CREATE TABLE IF NOT EXISTS customers (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,  -- never an id used before
    email   TEXT NOT NULL UNIQUE,
    points  INTEGER NOT NULL DEFAULT 0
)"""
SIGN_UP = "INSERT INTO customers (email) VALUES (?) RETURNING id"
ADD_POINTS = "UPDATE customers SET points = points + ? WHERE id = ?"


def open_queue():
    """tinyq on the shop's database, with the shop's settings."""
    return tinyq.Queue(SHOP_DB, lease=LEASE_SECONDS, max_attempts=MAX_ATTEMPTS,
                       backoff_base=BACKOFF_BASE, backoff_cap=BACKOFF_CAP)


def open_shop(chaos=0.0, seed=0):
    """The shop's queue, with its handlers registered. Each handler crashes
    the worker with probability `chaos` at each of its crash points."""
    queue = open_queue()
    queue.db.execute(CUSTOMERS)
    dice = random.Random()
    world = World(WORLD_DB, rng=dice)

    def roll_dice(job):
        # New dice for every attempt, from the seed, the job and the attempt
        # (not from the worker): the same seed replays the same crashes and
        # lost messages, whichever worker happens to take which job.
        dice.seed(f"{seed} {job.id} {job.attempts}")

    def maybe_crash(job, where):
        if dice.random() < chaos:
            # One write, so that two dying workers' lines never mix.
            sys.stderr.write(f"monkey: job {job.id}, attempt {job.attempts}:"
                             f" worker killed {where}\n")
            os._exit(CRASHED)  # like kill -9: no finally, no rollback, no ack

    @queue.handler("welcome_email")
    def welcome_email(job):
        roll_dice(job)
        maybe_crash(job, "before the email")
        try:
            world.send_email(job.args["email"], WELCOME,
                             key=f"welcome-{job.args['customer']}")
        except KeyReused as error:        # refused; every retry would be too
            raise tinyq.Permanent(error) from error
        maybe_crash(job, "after the email, before the ack")

    @queue.handler("signup_fee")
    def signup_fee(job):
        roll_dice(job)
        maybe_crash(job, "before the charge")
        try:
            world.charge(job.args["customer"], FEE_CENTS,
                         key=f"fee-{job.args['customer']}")
        except KeyReused as error:
            raise tinyq.Permanent(error) from error
        maybe_crash(job, "after the charge, before the ack")

    @queue.handler("loyalty_points")
    def loyalty_points(job):
        roll_dice(job)
        maybe_crash(job, "before the points")
        with job.complete() as db:
            db.execute(ADD_POINTS, (POINTS, job.args["customer"]))
            maybe_crash(job, "inside the transaction, before the commit")

    return queue


def signup(queue, email):
    """A new customer and their three jobs: all four rows, or none."""
    with queue.transaction() as db:
        (customer,) = db.execute(SIGN_UP, (email,)).fetchone()
        for kind in ("welcome_email", "signup_fee", "loyalty_points"):
            queue.enqueue(kind, {"customer": customer, "email": email})
    return customer
