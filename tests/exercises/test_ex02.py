"""Exercise 2 (Chapter 2): jobs as data, and their handlers.

What the guide claims of ex02_jobs.py beyond its transcripts. Each test runs
the file from the folder under test (code/, or a learner's WORK) in a fresh
copy, and is graded for it.
"""


import pytest

from tests.helpers import run_script

pytestmark = pytest.mark.exercise("ex02_jobs.py")


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


def test_ex02_main_runs_the_copy_decoded_from_the_stored_text(folder):
    """main turns each job into text with json.dumps, turns the text back
    into a dictionary with json.loads, and runs the result: the decoded copy,
    not the job it made, is what does the work."""
    status, output = run_script(folder, """
import ex02_jobs as ex
made, ran = [], []
make_job, run = ex.make_job, ex.run
ex.make_job = lambda kind, **args: made.append(make_job(kind, **args)) or made[-1]
ex.run = lambda job: ran.append(job) or run(job)
ex.main()
print("ran", len(ran), "jobs, equal to the ones made:", ran == made)
print("any of them the very job made:", any(job is original for job in ran for original in made))
""")
    assert status == 0, output
    assert output.splitlines()[-2:] == ["ran 2 jobs, equal to the ones made: True",
                                        "any of them the very job made: False"], output
