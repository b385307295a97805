"""Exercise 7 (Chapter 6): retries with backoff and jitter, and dead letters.

What the guide claims of ex07_retries.py beyond its transcripts. Each test
runs the file from the folder under test (code/, or a learner's WORK) in a
fresh copy, and is graded for it.
"""

import collections
import contextlib
import re
import sqlite3

import pytest

from tools.harness import sandbox
from tests.helpers import SEEDS, attempts_by_job, overcharge_cents, run_script, runs_by_seed

pytestmark = pytest.mark.exercise("ex07_retries.py")


def test_ex07_alice_loses_ten_dollars_per_lost_reply_and_nothing_per_lost_request(folder):
    """Across 50 seeds, what Alice pays beyond what she owes is $10 per
    TimeoutError (a charge whose reply was lost); ConnectionErrors cost nothing."""
    runs = runs_by_seed(folder, "ex07_retries.py")
    assert sorted(runs) == list(SEEDS)
    for seed, (work, report) in runs.items():
        timeouts = work.count("TimeoutError")
        assert overcharge_cents(report) == 1000 * timeouts, (seed, work, report)
    # the lost requests really happened, often, and cost nothing: runs with as
    # many lost replies and a different number of lost requests pay the same
    assert sum(work.count("ConnectionError") for work, _ in runs.values()) > 50
    requests = collections.defaultdict(set)
    for work, _ in runs.values():
        requests[work.count("TimeoutError")].add(work.count("ConnectionError"))
    assert any(len(counts) > 1 for counts in requests.values())


def test_ex07_without_lost_replies_every_balance_is_right(folder):
    """The drill: with LOST_REPLY = 0, Alice pays exactly what she owes, whatever the seed."""
    sandbox.apply_edit(folder, "ex07_retries.py", "LOST_REPLY = 0.3", "LOST_REPLY = 0")
    for seed, (work, report) in runs_by_seed(folder, "ex07_retries.py").items():
        assert "TimeoutError" not in work and overcharge_cents(report) == 0, (seed, report)


def test_ex07_with_two_attempts_jobs_die_with_their_last_error(folder):
    """The Break It: with MAX_ATTEMPTS = 2, some jobs end dead, each showing its
    last error; some of them were charged, and for some of those the last
    error is a ConnectionError (an earlier attempt timed out)."""
    sandbox.apply_edit(folder, "ex07_retries.py", "MAX_ATTEMPTS = 5", "MAX_ATTEMPTS = 2")
    runs = runs_by_seed(folder, "ex07_retries.py")
    dead_runs = charged_and_dead = hidden = 0
    for seed, (work, report) in runs.items():
        died = re.findall(r"^job (\d+), attempt 2: .*(ConnectionError|TimeoutError): .*; "
                          r"dead, giving up$", work, re.M)
        shown = re.findall(r"^  job (\d+) is dead; its last error: (\w+):", report, re.M)
        assert sorted(died) == sorted(shown), (seed, work, report)
        assert f"{len(died)} dead" in report
        dead_runs += bool(died)
        for job, _ in died:
            tried = [outcome for j, _, outcome in attempts_by_job(work) if j == int(job)]
            charged_and_dead += "TimeoutError" in tried
            hidden += tried == ["TimeoutError", "ConnectionError"]
    assert dead_runs > 10
    # the Break It asks the reader to find a dead job that was charged although
    # its last error says the request was lost: there are some
    assert charged_and_dead > hidden > 0


# Drill 4: a declined card, first unhandled, then parked at once.
DECLINE_ORDER_3 = ("def charge_card(db, order_id, account, amount_cents):\n",
                   "def charge_card(db, order_id, account, amount_cents):\n"
                   "    if order_id == 3:\n"
                   "        raise ValueError(\"card declined\")\n")
PARK_AT_ONCE = ("        else:\n            db.execute(\"UPDATE jobs SET status = 'done'",
                "        except ValueError as error:\n"
                "            fail(db, job_id, MAX_ATTEMPTS, error)\n"
                "            print(f\"{what}: {type(error).__name__}: {error}; dead at once\")\n"
                "        else:\n            db.execute(\"UPDATE jobs SET status = 'done'")


def setup_and_work(folder):
    for command in ("setup", "work --seed 1"):
        status, output = sandbox.run(f"python3 ex07_retries.py {command}", folder)
    return status, output, sandbox.run("python3 ex07_retries.py report", folder)[1]


def test_ex07_a_declined_card_stops_a_worker_that_expects_only_glitches(folder):
    """Drill 4: an error that work() does not expect, a declined card, ends
    the worker with a traceback and leaves job 3 running, for ever."""
    sandbox.apply_edit(folder, "ex07_retries.py", *DECLINE_ORDER_3)
    status, work, _ = setup_and_work(folder)
    assert status != 0 and "ValueError: card declined" in work, work
    with contextlib.closing(sqlite3.connect(folder / "ex07.db")) as db:
        assert db.execute("SELECT status FROM jobs WHERE id = 3").fetchone() == ("running",)


def test_ex07_a_declined_card_parked_at_once_is_dead_after_one_attempt(folder):
    """Drill 4: parked at once, the declined job is dead after its first
    attempt, with the decline as its last error, and the others are done."""
    sandbox.apply_edit(folder, "ex07_retries.py", *DECLINE_ORDER_3)
    sandbox.apply_edit(folder, "ex07_retries.py", *PARK_AT_ONCE)
    status, work, report = setup_and_work(folder)
    assert status == 0, work
    assert re.findall(r"^job 3, attempt (\d+): .*; (.*)$", work, re.M) == [
        ("1", "dead at once")], work
    assert "jobs: 4 done, 1 dead" in report, report
    assert "job 3 is dead; its last error: ValueError: card declined" in report, report


# The changes of policy the chapter asks for: Drill 3 and the Break It.
POLICY_CHANGES = [("BACKOFF_CAP = 8.0", "BACKOFF_CAP = 1"),
                  ("MAX_ATTEMPTS = 5", "MAX_ATTEMPTS = 2")]


def test_ex07_a_change_of_retry_policy_leaves_the_networks_luck_alone(folder):
    """For every seed from 1 to 50, with BACKOFF_CAP = 1 (Drill 3) or
    MAX_ATTEMPTS = 2 (Break It), each attempt of each job meets the same luck
    as with the policy as written: the same lost requests, the same lost
    replies, the same approvals, even where the new waits change the order
    in which the jobs reach the bank."""
    before = {seed: attempts_by_job(work)
              for seed, (work, _) in runs_by_seed(folder, "ex07_retries.py").items()}
    reordered = 0
    for old, new in POLICY_CHANGES:
        sandbox.apply_edit(folder, "ex07_retries.py", old, new)
        after = runs_by_seed(folder, "ex07_retries.py")
        sandbox.apply_edit(folder, "ex07_retries.py", new, old)
        assert sorted(after) == sorted(before) == list(SEEDS)
        for seed, (work, _) in after.items():
            luck = {(job, attempt): outcome for job, attempt, outcome in before[seed]}
            tried = attempts_by_job(work)
            assert tried, (new, seed, work)
            for job, attempt, outcome in tried:
                if (job, attempt) in luck:
                    assert outcome == luck[job, attempt], (new, seed, job, attempt, work)
            both = luck.keys() & {(job, attempt) for job, attempt, _ in tried}
            reordered += ([(job, attempt) for job, attempt, _ in before[seed]
                           if (job, attempt) in both] !=
                          [(job, attempt) for job, attempt, _ in tried if (job, attempt) in both])
    # the case that matters happens: new waits send the same attempts in another order
    assert reordered > 0


def test_ex07_each_wait_is_the_attempts_own_fraction_of_its_ceiling(folder):
    """Each wait is a random fraction of its ceiling (base 0.5 s, doubling,
    cap 8 s), from anywhere in it, and like the network's luck it belongs to
    the attempt: with LOST_REPLY = 0 (Drill 2), for every seed, an attempt
    that is retried in both runs waits the same fraction of its ceiling."""
    def fractions(work):
        return {(int(job), int(attempt)): float(wait) / min(8.0, 0.5 * 2 ** (int(attempt) - 1))
                for job, attempt, wait in re.findall(
                    r"^job (\d+), attempt (\d+): .*; retry in ([\d.]+) s$", work, re.M)}

    before = runs_by_seed(folder, "ex07_retries.py")
    every = [fraction for work, _ in before.values() for fraction in fractions(work).values()]
    assert all(0 <= fraction <= 1 for fraction in every)
    assert min(every) < 0.05 and max(every) > 0.95
    sandbox.apply_edit(folder, "ex07_retries.py", "LOST_REPLY = 0.3", "LOST_REPLY = 0")
    after = runs_by_seed(folder, "ex07_retries.py")
    compared = 0
    for seed in SEEDS:
        old, new = fractions(before[seed][0]), fractions(after[seed][0])
        for tried in old.keys() & new.keys():
            # the log rounds each wait to 0.01 s; a fraction of a 0.5 s ceiling to 0.02
            assert abs(old[tried] - new[tried]) <= 0.0201, (seed, tried, before[seed][0],
                                                            after[seed][0])
            compared += 1
    assert compared > 100


def test_ex07_without_a_seed_each_run_has_new_luck(folder):
    """Drill 1: without --seed, runs differ, both in what the network loses and
    in how long the worker waits."""
    logs = []
    for _ in range(4):
        status, output = sandbox.run("python3 ex07_retries.py setup && "
                                     "python3 ex07_retries.py work", folder, timewarp=1000)
        assert status == 0, output
        logs.append(output)
    assert len({tuple(attempts_by_job(log)) for log in logs}) > 1, logs
    assert len({tuple(re.findall(r"retry in ([\d.]+) s", log)) for log in logs}) > 1, logs


def test_ex07_backoff_is_a_pure_function_of_the_attempt_and_a_fraction(folder):
    """backoff(attempt, fraction) is that fraction (0 to 1) of a ceiling that
    doubles from BACKOFF_BASE up to BACKOFF_CAP. The caller draws the
    fraction: the same arguments give the same wait, and backoff rolls no
    dice: neither the module's one set, nor the random module's."""
    status, output = run_script(folder, """
import random
import ex07_retries as ex
dice = [value for value in vars(ex).values() if isinstance(value, random.Random)]
def states():
    return [d.getstate() for d in dice], random.getstate()
before = states()
print(ex.BACKOFF_BASE, ex.BACKOFF_CAP, [ex.backoff(n, 1.0) for n in range(1, 9)])
print([ex.backoff(n, 0.25) for n in range(1, 9)])
print(ex.backoff(3, 0.0), ex.backoff(4, 0.3) == ex.backoff(4, 0.3))
print(len(dice), states() == before)
""")
    assert status == 0, output
    assert output.splitlines() == [
        "0.5 8.0 [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0, 8.0]",
        "[0.125, 0.25, 0.5, 1.0, 2.0, 2.0, 2.0, 2.0]",
        "0.0 True",
        "1 True"]


def test_ex07_a_balanced_report_says_nothing_was_charged_too_much(folder):
    """Study Drill 2: with LOST_REPLY = 0, `report` shows Alice paying exactly
    what she owes, and, with nothing overcharged, no line saying she was
    charged too much."""
    sandbox.apply_edit(folder, "ex07_retries.py", "LOST_REPLY = 0.3", "LOST_REPLY = 0")
    status, output = sandbox.run("python3 ex07_retries.py setup && "
                                 "python3 ex07_retries.py work --seed 1 && "
                                 "python3 ex07_retries.py report", folder, timewarp=1000)
    assert status == 0, output
    report = output[output.index("jobs: "):].splitlines()
    assert report == ["jobs: 5 done, 0 dead", "alice paid $50.00 for orders worth $50.00"], output


# `setup`, then `work --seed 1` with time.sleep noted (and still slept), on a
# queue whose five jobs are all due 3 s from now.
NAPS_UNTIL_DUE = """
import time
naps, sleep = [], time.sleep

def nap(seconds):
    naps.append(seconds)
    sleep(seconds)

time.sleep = nap
import runpy, sqlite3, sys

def command(*words):
    sys.argv = ["ex07_retries.py", *words]
    runpy.run_path("ex07_retries.py", run_name="__main__")

command("setup")
db = sqlite3.connect("ex07.db", isolation_level=None)
db.execute("UPDATE jobs SET run_at = ?", (time.time() + 3,))
command("work", "--seed", "1")
print("first nap:", naps[0])
print("left:", db.execute("SELECT count(*) FROM jobs WHERE status = 'queued'").fetchone()[0])
"""


def test_ex07_a_worker_with_nothing_due_sleeps_until_the_next_job_is(folder):
    """When nothing is due, `work` sleeps until the next job is, and it
    returns when no job is queued at all: with every job due in 3 s, its
    first wait is the whole 3 s, not a short poll."""
    status, output = run_script(folder, NAPS_UNTIL_DUE)
    assert status == 0, output
    first, left = output.splitlines()[-2:]
    # 3 s less the moments between setting run_at and the sleep
    assert first.startswith("first nap: ") and 2 < float(first.split()[-1]) <= 3, output
    assert left == "left: 0", output
