"""Exercise 5 (Chapter 4): two workers, and the race a claim must not lose.

What the guide claims of ex05_two_workers.py beyond its transcripts. Each
test runs the file from the folder under test (code/, or a learner's WORK)
in a fresh copy, and is graded for it.
"""

import collections
import re
import sqlite3
import time

import pytest

from tools.harness import sandbox
from tests.helpers import (Edit, Lands, Terminals, import_learner_file, outbox,
                           two_workers_on_held_mail)

pytestmark = pytest.mark.exercise("ex05_two_workers.py")

# The guide has the reader make this exercise from a copy of the one before,
# and shows only what changes: the two tests at the end hold both to it.
EDIT = Edit("ex04_durable_queue.py", "ex05_two_workers.py",
            frozenset({"import os", "DATABASE", "POLL_SECONDS", "RACE_GAP_SECONDS", "WORKER",
                       "SCHEMA", "send_welcome_email", "claim_naive", "claim_atomic", "CLAIMS",
                       "work", "show", "main"}),
            frozenset({"claim"}))


def two_workers_then_three_jobs(terminals, claim):
    ex05 = "ex05_two_workers.py"
    workers = [terminals.start(f"python3 {ex05} work {claim}") for _ in range(2)]
    for worker in workers:
        terminals.wait_for(worker, "waiting for jobs")
    terminals.run(f"python3 {ex05} enqueue ann@example.com bob@example.com cat@example.com")
    for worker in workers:
        terminals.wait_for(worker, "no jobs left")
    # A worker says "no jobs left" only after its last email, and no job is
    # queued again: this is for one that sends on after saying so, an email's
    # time (MAIL_SERVER_SECONDS) and a little more.
    terminals.sleep(3)
    return [terminals.stop(worker) for worker in workers]


# Lines the naive claim's race gap gets in the test's copy: having looked for
# the nth time, a worker goes on to mark its job only once the other worker
# has looked n times too (or after 20 s of the virtual clock, 10 s or more of
# real time at SLOW_TIMEWARP). The guide's gap of 0.3 s is 150 ms of real
# time there, and a busy machine that runs no second worker within it left
# one worker to claim every job alone; held open, the race's outcome is the
# claim's doing. They name none of the claim's variables, which a learner's
# file may name otherwise, only os and time, which its claim uses.
HOLD_THE_GAP = """\
    looks = sum(name.startswith(f"looked-{os.getpid()}-") for name in os.listdir())
    open(f"looked-{os.getpid()}-{looks}", "w").close()
    until = time.monotonic() + 20
    while time.monotonic() < until and sum(
            name.startswith("looked-") and name.endswith(f"-{looks}")
            for name in os.listdir()) < 2:
        time.sleep(0.01)
"""


def test_ex05_two_naive_workers_email_everyone_twice(slow_terminals, folder):
    """With claim_naive, two workers started together send every email twice."""
    gap = "    time.sleep(RACE_GAP_SECONDS)"
    sandbox.apply_edit(folder, "ex05_two_workers.py", gap, HOLD_THE_GAP + gap)
    two_workers_then_three_jobs(slow_terminals, "naive")
    sent = [line.split(",")[0] for line in outbox(folder)]
    assert sorted(sent) == sorted(f"welcome email to {name}@example.com"
                                  for name in ["ann", "bob", "cat"] * 2), sent


def test_ex05_two_atomic_workers_email_everyone_once_and_share_the_work(terminals, folder):
    """With claim_atomic, each email goes once, and both workers send some."""
    # The first email waits at the mail server until both workers have
    # claimed a job: however long a busy machine leaves the second worker
    # unrun, the first cannot send all three meanwhile.
    sent, _, printed = two_workers_on_held_mail(
        terminals, folder, "ex05_two_workers.py work atomic",
        ["ann@example.com", "bob@example.com", "cat@example.com"], 3)
    assert sorted(line.split(",")[0] for line in sent) == [
        f"welcome email to {name}@example.com" for name in ["ann", "bob", "cat"]], sent
    senders = {line.split("sent by ")[1] for line in sent}
    assert len(senders) == 2, sent
    assert sorted(re.findall(r"claimed job (\d)", "".join(printed))) == ["1", "2", "3"], printed


def claims_with_another_between(folder, claim_name):
    """For each moment of a claim (before each of its statements, and
    after the last): two jobs queued, and a second worker's claim landed
    there (tests/helpers.py: Lands). The ids the two claims got, a pair for
    each moment."""
    ex05 = import_learner_file(folder / "ex05_two_workers.py", "ex05")
    ex05.RACE_GAP_SECONDS = 0                            # the naive claim's gap, in no hurry
    claim = getattr(ex05, claim_name)
    pairs = []
    for after in range(20):
        (folder / ex05.DATABASE).unlink(missing_ok=True)
        db = ex05.connect()
        ex05.enqueue(db, "welcome_email", address="ann@example.com")
        ex05.enqueue(db, "welcome_email", address="bob@example.com")
        other = ex05.connect()
        other.execute("PRAGMA busy_timeout = 0")         # locked: try before the next one
        lands = Lands(db, after, lambda: claim(other))
        mine = claim(lands)
        got = lands.answer if lands.landed else claim(other)   # after its last statement
        pairs.append((mine and mine[0], got and got[0]))
        db.close()
        other.close()
        if lands.statements <= after:
            return pairs
    pytest.fail(f"{claim_name} ran more than 20 statements")


def test_ex05_no_claim_landing_inside_an_atomic_claim_gets_its_job(folder, monkeypatch):
    """Another worker's claim lands between any two statements of
    claim_atomic (or before or after it): the two claims never get the same
    job. The naive claim, under the same test, does."""
    monkeypatch.chdir(folder)
    for mine, other in claims_with_another_between(folder, "claim_atomic"):
        assert mine != other, f"both workers claimed job {mine}"
    assert any(mine == other for mine, other in
               claims_with_another_between(folder, "claim_naive"))


def drain(terminals, folder, claim, jobs, workers, until_done, batches=1):
    """Start `workers` idle workers, as the chapter does, then queue `jobs`
    jobs in `batches`, each once the one before is done, and run the workers
    until `until_done` jobs are done. Each batch wakes idle workers at the
    same moment, which is when a claim's race strikes most."""
    ex05 = "ex05_two_workers.py"
    running = [terminals.start(f"python3 {ex05} work {claim}") for _ in range(workers)]
    for worker in running:
        terminals.wait_for(worker, "waiting for jobs")
    db = sqlite3.connect(folder / "ex05.db")
    try:
        deadline = time.monotonic() + 120
        size = jobs // batches
        for first in range(0, jobs, size):
            addresses = " ".join(f"user{n}@example.com" for n in range(first, first + size))
            terminals.run(f"python3 {ex05} enqueue {addresses}")
            while db.execute("SELECT count(*) FROM jobs WHERE status = 'done'").fetchone()[0] \
                    < min(until_done, first + size):
                assert time.monotonic() < deadline, "the workers stopped making progress"
                time.sleep(0.02)
    finally:
        db.close()
    for worker in running:
        terminals.stop(worker)
    return collections.Counter(line.split(",")[0] for line in outbox(folder))


def test_ex05_the_atomic_claim_under_load_sends_each_email_exactly_once(folder):
    """Four atomic workers and 500 jobs, in 10 batches: no duplicates, none lost."""
    terminals = Terminals(folder, timewarp=200)
    try:
        sent = drain(terminals, folder, "atomic", jobs=500, workers=4, until_done=500,
                     batches=10)
    finally:
        terminals.close()
    assert len(sent) == 500 and set(sent.values()) == {1}


def test_ex05_the_naive_claim_under_the_same_load_sends_duplicates(folder):
    """Four naive workers and 500 jobs: duplicates within the first 20 jobs done."""
    terminals = Terminals(folder, timewarp=50)      # the gap stays 6 ms of real time
    try:
        sent = drain(terminals, folder, "naive", jobs=500, workers=4, until_done=20)
    finally:
        terminals.close()
    assert any(count > 1 for count in sent.values()), sent


def test_the_guide_shows_exactly_the_parts_an_edited_exercise_changes():
    """The guide includes every part that ex05_two_workers.py adds to or
    changes in ex04_durable_queue.py, by pyobject=, and nothing else of it
    (imports the prose names, which have no listing)."""
    assert EDIT.shown_by_the_guide() == EDIT.shown


def test_an_edited_exercise_differs_from_the_one_before_only_where_the_guide_says(
        folder, source_folder):
    """ex05_two_workers.py is your ex04_durable_queue.py with the top-level
    statements the guide shows added or changed, and those it names deleted;
    every other statement does what it did, in the same order. Comments,
    docstrings and the names of a function's own variables may differ.
    (Without your ex04_durable_queue.py, it is compared with the course's.)"""
    EDIT.check_against(folder, source_folder)


@pytest.mark.parametrize("command", ["work", "work quick"])
def test_ex05_work_without_naive_or_atomic_says_how_to_use_it(folder, command):
    """`main` wants naive or atomic after work: without one of them, the
    worker does not start, and ex05 ends with the line that says how to use it."""
    status, output = sandbox.run(f"python3 ex05_two_workers.py {command}", folder)
    assert status == 1 and output == ("usage: python3 ex05_two_workers.py enqueue ADDRESS... "
                                      "| list | work naive|atomic | reset\n"), output


@pytest.mark.parametrize("claim", ["claim_naive", "claim_atomic"])
def test_ex05_a_claim_marks_its_job_running_by_its_worker(folder, claim):
    """Either claim, the naive one too, marks the job it returns `running`
    and names its worker: the naive one only leaves a gap between looking
    and marking."""
    status, output = sandbox.run(
        "python3 -c \"import ex05_two_workers as ex; db = ex.connect(); "
        "ex.enqueue(db, 'welcome_email', address='ann@example.com'); "
        f"print(ex.{claim}(db)); ex.show(db)\"", folder)
    assert status == 0, output
    assert re.search(r"^  1  running  \{\"address\": \"ann@example\.com\"\}  worker \d+$",
                     output, re.M), output
