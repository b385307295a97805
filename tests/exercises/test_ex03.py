"""Exercise 3 (Chapter 3): a queue in memory and its worker thread.

What the guide claims of ex03_memory_queue.py beyond its transcripts. Each
test runs the file from the folder under test (code/, or a learner's WORK)
in a fresh copy, and is graded for it.
"""

import re

import pytest

from tools.harness import sandbox
from tests.helpers import add_new_users, numbers, set_constant

pytestmark = pytest.mark.exercise("ex03_memory_queue.py")
NEW_USERS = ["ann@example.com", "bob@example.com", "cat@example.com"]


def test_ex03_quitting_loses_the_waiting_jobs(folder):
    """--quit exits at once, cleanly, with 3 emails unsent and none sent."""
    status, output = sandbox.run("python3 ex03_memory_queue.py --quit", folder)
    assert status == 0, output
    assert "3 emails not sent" in output and "email sent" not in output
    # promptly: it quits before the first email could have been sent
    [quit_at] = numbers(r"\[\s*([\d.]+) s\] quitting", output)
    assert quit_at < 1


def test_ex03_a_handler_that_raises_kills_the_worker_and_join_waits_for_ever(folder):
    """Break It: when the mail server raises, the worker thread dies with a
    traceback on its first job, no email is sent, and jobs.join() goes on
    waiting for the jobs nobody will take: the program never ends by itself."""
    sandbox.apply_edit(folder, "ex03_memory_queue.py", "    time.sleep(MAIL_SERVER_SECONDS)",
                       "    raise ConnectionError('mail server unreachable')")
    # three emails take 6 s, 0.3 s under the time warp: 3 s is ten times that
    with pytest.raises(sandbox.TranscriptError, match="still running") as stopped:
        sandbox.run("python3 ex03_memory_queue.py", folder, timeout=3)
    output = str(stopped.value)
    assert output.count("ConnectionError: mail server unreachable") == 1, output
    assert "Exception in thread" in output and "sent" not in output, output


# A signup that does not wait for its email answers in far less than the
# email's 2 s. The bound is loose on purpose: under the time warp (20 times)
# a pause of a busy machine counts 20 times over, and 500 ms is 25 ms of it.
ANSWERS_AT_ONCE_MS = 500


def test_ex03_the_worker_sends_every_email_in_order_and_signups_do_not_wait(folder):
    """All 3 emails are sent, in order, and each signup answers at once, long
    before the first email is out."""
    status, output = sandbox.run("python3 ex03_memory_queue.py", folder)
    assert status == 0, output
    assert re.findall(r"welcome email sent to (\S+)", output) == NEW_USERS
    waits = numbers(r"answered after ([\d.]+) ms", output)
    assert len(waits) == 3 and all(wait < ANSWERS_AT_ONCE_MS for wait in waits), output
    assert "all 3 emails sent" in output


def test_ex03_a_burst_answers_at_once_and_drains_at_a_steady_pace(folder):
    """Study Drill 3: with twenty more addresses in NEW_USERS, all 23 signups
    answer at once, before the first email goes out, and the emails then
    drain at a steady pace: one every 2 s, in the order the users signed up."""
    burst = [f"user{n}@example.com" for n in range(1, 21)]
    add_new_users(folder / "ex03_memory_queue.py", burst)
    status, output = sandbox.run("python3 ex03_memory_queue.py", folder)
    assert status == 0, output
    everyone = NEW_USERS + burst
    lines = output.splitlines()
    signups = [n for n, line in enumerate(lines) if "answered after" in line]
    emails = [n for n, line in enumerate(lines) if "welcome email sent to" in line]
    assert len(signups) == len(emails) == 23, output
    # at once: every signup has answered before the worker sends anything
    assert max(signups) < min(emails), output
    assert all(wait < ANSWERS_AT_ONCE_MS
               for wait in numbers(r"answered after ([\d.]+) ms", output)), output
    assert re.findall(r"welcome email sent to (\S+)", output) == everyone, output
    # a steady pace: each email goes out 2 s after the one before it, never
    # sooner (one worker), and never much later (no signup holds it up)
    sent_at = numbers(r"\[\s*([\d.]+) s\] worker: welcome email sent", output)
    gaps = [later - earlier for earlier, later in zip([0.0] + sent_at, sent_at)]
    assert all(1.99 <= gap < 3 for gap in gaps), gaps
    assert "all 23 emails sent" in output, output


def test_ex03_a_slower_mail_server_slows_the_emails_not_the_signups(folder):
    """Study Drill 2: with a 30 s mail server, the signups still answer at
    once, and the emails go out 30 s apart, the last after 90 s."""
    set_constant(folder / "ex03_memory_queue.py", "MAIL_SERVER_SECONDS", 30)
    # At 100 times, the first email is out 300 ms of real time after the
    # start: the signups have answered long before (the bound above).
    status, output = sandbox.run("python3 ex03_memory_queue.py", folder, timewarp=100)
    assert status == 0, output
    assert all(wait < ANSWERS_AT_ONCE_MS
               for wait in numbers(r"answered after ([\d.]+) ms", output)), output
    sent_at = numbers(r"\[\s*([\d.]+) s\] worker: welcome email sent", output)
    assert len(sent_at) == 3 and all(30 * n <= at < 30 * n + 1
                                     for n, at in enumerate(sent_at, 1)), output
