"""Claims the guide makes about the exercises beyond their transcripts.

Each test names its exercise with a marker and runs the file from the source
folder (code/, or the learner's WORK) in a fresh copy, with the time warp.
"""

import re

import pytest

import console

exercise = pytest.mark.exercise
NEW_USERS = ["ann@example.com", "bob@example.com", "cat@example.com"]


@pytest.fixture
def folder(request, source_folder, tmp_path):
    """A fresh copy of the source folder; fails if the test's exercise is missing."""
    name = request.node.get_closest_marker("exercise").args[0]
    if not (source_folder / name).is_file():
        pytest.fail(f"{name} is missing from {source_folder}")
    console.copy_sources(source_folder, tmp_path / "work")
    return tmp_path / "work"


def run_script(folder, script, **options):
    (folder / "claim.py").write_text(script)
    return console.run("python3 claim.py", folder, **options)


def numbers(pattern, text):
    return [float(n) for n in re.findall(pattern, text)]


# ---------------------------------------------------------------- Exercise 1

@exercise("ex01_slow_signup.py")
def test_ex01_a_failing_email_fails_a_signup_whose_account_exists(folder):
    """When sending the email fails, the signup fails, yet its account exists."""
    console.apply_edit(folder, "ex01_slow_signup.py", "time.sleep(MAIL_SERVER_SECONDS)",
                       "raise ConnectionError('mail server unreachable')")
    status, output = console.run("python3 ex01_slow_signup.py", folder)
    assert status != 0 and "ConnectionError: mail server unreachable" in output, output
    created = output.find("ann@example.com: account created")
    assert 0 <= created < output.find("Traceback"), output
    # and the loop stopped there: Bob and Cat never got accounts
    assert "bob@" not in output and "cat@" not in output, output
    # the coupling: the account is stored, yet the signup as a whole failed
    status, output = run_script(folder, """
import ex01_slow_signup as ex
try:
    ex.signup("ann@example.com")
except ConnectionError:
    print("signup failed; accounts:", ex.accounts)
""")
    assert output.endswith("signup failed; accounts: ['ann@example.com']\n"), output


@exercise("ex01_slow_signup.py")
def test_ex01_a_signup_waits_as_long_as_the_mail_server(folder):
    """With a 30 s mail server, each signup answers after about 30 s."""
    path = folder / "ex01_slow_signup.py"
    text, count = re.subn(r"(?m)^MAIL_SERVER_SECONDS\s*=\s*[\d.]+", "MAIL_SERVER_SECONDS = 30",
                          path.read_text())
    assert count == 1, "ex01_slow_signup.py should set MAIL_SERVER_SECONDS once"
    path.write_text(text)
    status, output = console.run("python3 ex01_slow_signup.py", folder, timewarp=500)
    assert status == 0, output
    waits = numbers(r"signup answered after ([\d.]+) s", output)
    assert len(waits) == 3 and all(30 <= wait < 30.5 for wait in waits), output


# ---------------------------------------------------------------- Exercise 2

@exercise("ex02_jobs.py")
def test_ex02_jobs_survive_a_json_round_trip(folder):
    """Both jobs come back from JSON as equal dicts."""
    status, output = run_script(folder, """
import json, ex02_jobs as ex
for job in [ex.make_job("welcome_email", user_id=42),
            ex.make_job("resize_photo", photo_id=7, width=800)]:
    copy = json.loads(json.dumps(job))
    print(type(copy).__name__, copy == job)
""")
    assert (status, output) == (0, "dict True\ndict True\n")


@exercise("ex02_jobs.py")
def test_ex02_an_unknown_kind_is_refused(folder):
    """make_job raises ValueError for a kind with no handler."""
    status, output = run_script(folder, """
import ex02_jobs as ex
try:
    ex.make_job("bake_cake", flavour="lemon")
except ValueError:
    print("refused")
""")
    assert (status, output) == (0, "refused\n")


@exercise("ex02_jobs.py")
def test_ex02_a_job_holding_a_connection_cannot_be_stored(folder):
    """A job holding a sqlite3 connection cannot be turned into JSON (TypeError)."""
    status, output = run_script(folder, """
import json, sqlite3, ex02_jobs as ex
job = ex.make_job("welcome_email", db=sqlite3.connect(":memory:"))
try:
    json.dumps(job)
except TypeError:
    print("cannot be stored")
""")
    assert (status, output) == (0, "cannot be stored\n")


# ---------------------------------------------------------------- Exercise 3

@exercise("ex03_memory_queue.py")
def test_ex03_quitting_loses_the_waiting_jobs(folder):
    """--quit exits at once, cleanly, with 3 emails unsent and none sent."""
    status, output = console.run("python3 ex03_memory_queue.py --quit", folder)
    assert status == 0, output
    assert "3 emails not sent" in output and "email sent" not in output
    # promptly: it quits before the first email could have been sent
    [quit_at] = numbers(r"\[\s*([\d.]+) s\] quitting", output)
    assert quit_at < 1


@exercise("ex03_memory_queue.py")
def test_ex03_the_worker_sends_every_email_in_order_and_signups_do_not_wait(folder):
    """All 3 emails are sent, in order, and each signup answers in under 50 ms."""
    status, output = console.run("python3 ex03_memory_queue.py", folder)
    assert status == 0, output
    assert re.findall(r"welcome email sent to (\S+)", output) == NEW_USERS
    waits = numbers(r"answered after ([\d.]+) ms", output)
    assert len(waits) == 3 and all(wait < 50 for wait in waits), output
    assert "all 3 emails sent" in output
