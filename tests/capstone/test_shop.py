"""capstone/shop.py (in code/, or in the learner's WORK folder), beside
code/'s other capstone files: its audit passes under chaos.py's fire for
many seeds, its signup is all or nothing, a key the bank refuses is a
permanent failure, the monkey says where each crash struck, and its Study
Drills on the points (each applied to a copy) come out as Chapter 9 says.
Every test here is graded for capstone/shop.py."""

import re

import pytest

from tools.harness import sandbox
from tests.capstone.chaos_helpers import (absorbed, chaos_by_seed, passed_for_every_seed,
                                          problems, side_by_side)

pytestmark = pytest.mark.exercise("capstone/shop.py")

POINTS_IN_THE_TRANSACTION = """\
        with job.complete() as db:
            db.execute(ADD_POINTS, (POINTS, job.args["customer"]))
            maybe_crash(job, "inside the transaction, before the commit")
"""


def test_the_audit_passes_under_chaos(folder):
    """Crashes at every crash point, lost requests and lost replies: for 20
    seeds, everyone gets one email, pays $5 and holds 10 points."""
    keyed = chaos_by_seed(folder)
    passed_for_every_seed(keyed)
    assert all(sum(absorbed(output)) > 0 for _, output in keyed.values())


def test_the_audit_passes_under_three_times_the_chaos(folder):
    """Study Drill: at a crash chance of 0.3 the audit still passes, every seed."""
    passed_for_every_seed(chaos_by_seed(folder, "--chaos 0.3"))


# A signup whose third job cannot be written: a trigger in the shop's own
# database refuses it, however the signup writes its rows.
SIGNUP_FAILS_HALFWAY = '''
import sqlite3
import shop

queue = shop.open_shop()
queue.db.execute("""CREATE TRIGGER full BEFORE INSERT ON jobs
    WHEN (SELECT count(*) FROM jobs) >= 2
    BEGIN SELECT RAISE(ABORT, 'the disk is full'); END""")
try:
    shop.signup(queue, "ann@example.com")
    print("signup returned")
except sqlite3.Error as error:
    print("signup failed:", error)
for table in ("customers", "jobs"):
    print(table, queue.db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
'''


def test_a_signup_that_fails_halfway_leaves_no_customer_and_no_job(folder):
    """signup() writes the customer and its three jobs in one transaction:
    when the third job cannot be written, the customer and the first two
    jobs are gone too, and nothing is left for a worker to half-do."""
    (folder / "capstone" / "signup.py").write_text(SIGNUP_FAILS_HALFWAY)
    status, output = sandbox.run("python3 signup.py", folder / "capstone")
    assert status == 0, output
    assert output.splitlines() == ["signup failed: the disk is full", "customers 0", "jobs 0"]


# A "Sign up" button clicked twice: the same email signs up twice.
DOUBLE_CLICK = '''
import sqlite3
import shop

queue = shop.open_shop()
shop.signup(queue, "ann@example.com")
try:
    shop.signup(queue, "ann@example.com")
    print("second signup returned")
except sqlite3.IntegrityError as error:
    print("second signup failed:", error)
for table in ("customers", "jobs"):
    print(table, queue.db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
'''


def test_a_double_clicked_signup_makes_one_customer_and_three_jobs(folder):
    """The second signup with the same email breaks the UNIQUE constraint on
    customers.email, and the error rolls its whole transaction back: one
    customer, three jobs, with no unique_key needed."""
    (folder / "capstone" / "twice.py").write_text(DOUBLE_CLICK)
    status, output = sandbox.run("python3 twice.py", folder / "capstone")
    assert status == 0, output
    assert output.splitlines() == [
        "second signup failed: UNIQUE constraint failed: customers.email",
        "customers 1", "jobs 3"], output


# A fee whose key the bank has seen before, with another amount: the bank
# refuses it (KeyReused), and would refuse every retry alike.
KEY_REUSED = '''
import shop
import world_given as world

world.LOST_REQUEST = world.LOST_REPLY = 0         # a network that loses nothing
queue = shop.open_shop()
customer = shop.signup(queue, "ann@example.com")
world.World(shop.WORLD_DB).charge(customer, 900, key=f"fee-{customer}")
while queue.work_one():
    pass
for job in queue.jobs():
    print(job["kind"], job["status"], job["attempts"], job["last_error"])
'''


def test_a_key_reused_with_other_inputs_is_dead_after_one_claim(folder):
    """The bank's KeyReused is a permanent failure: the fee job is dead at
    its first attempt, with the bank's words in last_error, not retried up
    to MAX_ATTEMPTS times; the other jobs are done."""
    (folder / "capstone" / "reused.py").write_text(KEY_REUSED)
    status, output = sandbox.run("python3 reused.py", folder / "capstone")
    assert status == 0, output
    assert output.splitlines() == [
        "welcome_email done 1 None",
        "signup_fee dead 1 Permanent: bank: key fee-1 was first used with other inputs",
        "loyalty_points done 1 None"], output


# Ann signs up and leaves before her jobs run; Bob signs up next. A network
# that loses nothing, so that only the ids and the keys decide.
ID_AFTER_A_LEAVER = '''
import shop
import world_given as world

world.LOST_REQUEST = world.LOST_REPLY = 0
queue = shop.open_shop()
shop.signup(queue, "ann@example.com")
queue.db.execute("DELETE FROM customers")
bob = shop.signup(queue, "bob@example.com")
while queue.work_one():
    pass
bank = world.World(shop.WORLD_DB).db
print(bob, [job["status"] for job in queue.jobs()][3:])
print(bank.execute("SELECT key, customer FROM charges ORDER BY id").fetchall())
'''


def test_a_customer_id_is_never_given_out_twice_so_a_key_names_one_intent(folder):
    """Study Drill 8: the newest customer's id, deleted, does not go to the
    next signup (AUTOINCREMENT), so the keys made from it (welcome-1,
    fee-1) stay Ann's: Bob's email is sent and Bob is charged under keys of
    his own, instead of being refused and answered with Ann's charge."""
    (folder / "capstone" / "leaver.py").write_text(ID_AFTER_A_LEAVER)
    status, output = sandbox.run("python3 leaver.py", folder / "capstone")
    assert status == 0, output
    assert output.splitlines() == [
        "2 ['done', 'done', 'done']",
        "[('fee-1', 1), ('fee-2', 2)]"], output


CRASH_LINE = re.compile(r"^monkey: job (\d+), attempt (\d+): worker killed (.*)$", re.M)
CRASH_POINTS = {"before the email", "after the email, before the ack", "before the charge",
                "after the charge, before the ack", "before the points",
                "inside the transaction, before the commit"}


def test_the_monkey_says_where_each_crash_struck(folder):
    """Each crash prints one line as it strikes: the job, the attempt, and
    the crash point. One line per crash counted, and the same lines for the
    same seed, however many workers share the jobs."""
    sandbox.apply_edit(folder, "capstone/shop.py", "LEASE_SECONDS = 0.5", "LEASE_SECONDS = 5")

    def crashes(run):
        status, output = run
        assert status == 0, output
        lines = CRASH_LINE.findall(output)
        assert len(lines) == int(re.search(r"worker crashes: (\d+)", output)[1]), output
        assert {where for _, _, where in lines} == CRASH_POINTS, output
        return sorted(lines)

    many, one = side_by_side(folder, ["--seed 7 --chaos 0.3", "--seed 7 --chaos 0.3 --workers 1"])
    assert crashes(many) == crashes(one)


def test_a_crash_point_after_the_transaction_changes_nothing(folder):
    """Study Drill: moving the in-transaction crash point after the block
    still passes: by then the points and the job's done are committed."""
    sandbox.apply_edit(folder, "capstone/shop.py", POINTS_IN_THE_TRANSACTION, """\
        with job.complete() as db:
            db.execute(ADD_POINTS, (POINTS, job.args["customer"]))
        maybe_crash(job, "after the commit")
""")
    for seed, (status, output) in chaos_by_seed(folder, "--chaos 0.3", seeds=range(1, 9)).items():
        assert status == 0 and "AUDIT PASSED" in output, (seed, output)


def test_points_outside_complete_fail_the_points_audit(folder):
    """Study Drill: points written on their own, then the ack, with a crash
    point between: a retry awards them again, and only points go wrong."""
    sandbox.apply_edit(folder, "capstone/shop.py", POINTS_IN_THE_TRANSACTION, """\
        queue.db.execute(ADD_POINTS, (POINTS, job.args["customer"]))
        maybe_crash(job, "after the points, before the ack")
""")
    runs = chaos_by_seed(folder, seeds=range(1, 9))
    wrong = [seed for seed, (status, output) in runs.items() if status == 1]
    assert wrong, runs
    for seed, (status, output) in runs.items():
        for problem in problems(output):
            assert re.fullmatch(r"customer\d+@example.com holds \d+ points", problem), output
