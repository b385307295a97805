"""Exercise 1 (Chapter 1): a signup that waits for its email.

What the guide claims of ex01_slow_signup.py beyond its transcripts. Each
test runs the file from the folder under test (code/, or a learner's WORK)
in a fresh copy, and is graded for it.
"""

import re

import pytest

from tools.harness import sandbox
from tests.helpers import add_new_users, numbers, run_script, set_constant

pytestmark = pytest.mark.exercise("ex01_slow_signup.py")


def test_ex01_a_failing_email_fails_a_signup_whose_account_exists(folder):
    """When sending the email fails, the signup fails, yet its account exists."""
    sandbox.apply_edit(folder, "ex01_slow_signup.py", "time.sleep(MAIL_SERVER_SECONDS)",
                       "raise ConnectionError('mail server unreachable')")
    status, output = sandbox.run("python3 ex01_slow_signup.py", folder)
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


def test_ex01_a_signup_waits_as_long_as_the_mail_server(folder):
    """With a 30 s mail server, each signup answers after about 30 s."""
    set_constant(folder / "ex01_slow_signup.py", "MAIL_SERVER_SECONDS", 30)
    status, output = sandbox.run("python3 ex01_slow_signup.py", folder, timewarp=500)
    assert status == 0, output
    waits = numbers(r"signup answered after ([\d.]+) s", output)
    assert len(waits) == 3 and all(30 <= wait < 30.5 for wait in waits), output


def test_ex01_a_fourth_address_is_a_fourth_signup_and_two_seconds_more(folder):
    """Study Drill 2: with a fourth address in NEW_USERS, the program signs up
    four users, and the total it prints is four signups of about 2 s each."""
    add_new_users(folder / "ex01_slow_signup.py", ["dan@example.com"])
    status, output = sandbox.run("python3 ex01_slow_signup.py", folder)
    assert status == 0, output
    assert "dan@example.com: signup answered after" in output, output
    totals = re.findall(r"(?m)^(\d+) signups took ([\d.]+) s$", output)
    assert len(totals) == 1 and totals[0][0] == "4", output
    assert 8 <= float(totals[0][1]) < 8.5, output
