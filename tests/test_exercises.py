"""Claims the guide makes about the exercises beyond their transcripts.

Each test names its exercise with a marker and runs the file from the source
folder (code/, or the learner's WORK) in a fresh copy, with the time warp.
"""

import collections
import re
import sqlite3
import time

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


# ---------------------------------------------------------------- Exercises 4-6
# Several processes of one exercise at once, sharing one warped clock, as the
# chapters' two- and three-terminal transcripts do.

class Terminals:
    """Commands started side by side in one folder, on one shared virtual clock."""

    def __init__(self, folder, timewarp=console.TIMEWARP_FACTOR):
        self.folder = folder
        bin_folder = folder.parent / "bin"
        bin_folder.mkdir()
        self.env = console.child_environment(console.link_python(bin_folder), timewarp,
                                             console.new_clock(folder.parent / "clock"))
        self.started = []

    def start(self, command):
        process = console.Process(command, self.folder, self.env)
        self.started.append(process)
        return process

    def run(self, command):
        """Run a command to its end; return what it printed."""
        process = self.start(command)
        assert process.wait_until(lambda lines, exited: exited, 60), process.output()
        return process.output()

    def wait_for(self, process, text, timeout=60):
        process.wait_until(lambda lines, exited: exited or text in "".join(lines), timeout)
        assert text in process.output(), f"never printed {text!r}:\n{process.output()}"

    def sleep(self, seconds):
        """Let `seconds` pass on the shared virtual clock."""
        self.run(f"python3 -c 'import time; time.sleep({seconds})'")

    def stop(self, process):
        """Ctrl-C, then wait for the process to finish."""
        process.interrupt()
        assert process.wait_until(lambda lines, exited: exited, 60), process.output()
        return process.output()

    def close(self):
        for process in self.started:
            process.stop()


@pytest.fixture
def terminals(folder):
    opened = Terminals(folder)
    yield opened
    opened.close()


def outbox(folder):
    path = folder / "outbox.txt"
    return path.read_text().splitlines() if path.exists() else []


def statuses(terminals, exercise):
    """The status column of `list`, job by job."""
    lines = terminals.run(f"python3 {exercise} list").splitlines()[1:]
    return [line.split()[1] for line in lines]


@exercise("ex04_durable_queue.py")
def test_ex04_a_job_interrupted_mid_send_stays_running_forever(terminals, folder):
    """After Ctrl-C during a send, the job stays running and a new worker never takes it."""
    ex04 = "ex04_durable_queue.py"
    terminals.run(f"python3 {ex04} enqueue ann@example.com")
    worker = terminals.start(f"python3 {ex04} work")
    terminals.wait_for(worker, "claimed job 1")
    terminals.stop(worker)
    assert outbox(folder) == [] and statuses(terminals, ex04) == ["running"]
    again = terminals.start(f"python3 {ex04} work")
    terminals.wait_for(again, "waiting for jobs")
    terminals.sleep(20)                       # 20 s of polling, on the shared clock
    assert "claimed" not in terminals.stop(again)
    assert outbox(folder) == [] and statuses(terminals, ex04) == ["running"]


def two_workers_then_three_jobs(terminals, claim):
    ex05 = "ex05_two_workers.py"
    workers = [terminals.start(f"python3 {ex05} work {claim}") for _ in range(2)]
    for worker in workers:
        terminals.wait_for(worker, "waiting for jobs")
    terminals.run(f"python3 {ex05} enqueue ann@example.com bob@example.com cat@example.com")
    for worker in workers:
        terminals.wait_for(worker, "no jobs left")
    terminals.sleep(10)                       # time for any straggling duplicate
    return [terminals.stop(worker) for worker in workers]


@exercise("ex05_two_workers.py")
def test_ex05_two_naive_workers_email_everyone_twice(terminals, folder):
    """With claim_naive, two workers started together send every email twice."""
    two_workers_then_three_jobs(terminals, "naive")
    sent = [line.split(",")[0] for line in outbox(folder)]
    assert sorted(sent) == sorted(f"welcome email to {name}@example.com"
                                  for name in ["ann", "bob", "cat"] * 2), sent


@exercise("ex05_two_workers.py")
def test_ex05_two_atomic_workers_email_everyone_once_and_share_the_work(terminals, folder):
    """With claim_atomic, each email goes once, and both workers send some."""
    printed = two_workers_then_three_jobs(terminals, "atomic")
    sent = outbox(folder)
    assert sorted(line.split(",")[0] for line in sent) == [
        f"welcome email to {name}@example.com" for name in ["ann", "bob", "cat"]], sent
    senders = {line.split("sent by ")[1] for line in sent}
    assert len(senders) == 2, sent
    assert all("claimed job" in output for output in printed)


def drain(terminals, folder, claim, jobs, workers, until_done):
    """Queue `jobs` jobs, run `workers` workers until `until_done` jobs are done."""
    ex05 = "ex05_two_workers.py"
    addresses = " ".join(f"user{n}@example.com" for n in range(jobs))
    terminals.run(f"python3 {ex05} enqueue {addresses}")
    running = [terminals.start(f"python3 {ex05} work {claim}") for _ in range(workers)]
    db = sqlite3.connect(folder / "ex05.db")
    try:
        deadline = time.monotonic() + 120
        while db.execute("SELECT count(*) FROM jobs WHERE status = 'done'").fetchone()[0] \
                < until_done:
            assert time.monotonic() < deadline, "the workers stopped making progress"
            time.sleep(0.02)
    finally:
        db.close()
    for worker in running:
        terminals.stop(worker)
    return collections.Counter(line.split(",")[0] for line in outbox(folder))


@exercise("ex05_two_workers.py")
def test_ex05_the_atomic_claim_under_load_sends_each_email_exactly_once(folder):
    """Four atomic workers and 500 jobs: no duplicates, none lost."""
    terminals = Terminals(folder, timewarp=200)
    try:
        sent = drain(terminals, folder, "atomic", jobs=500, workers=4, until_done=500)
    finally:
        terminals.close()
    assert len(sent) == 500 and set(sent.values()) == {1}


@exercise("ex05_two_workers.py")
def test_ex05_the_naive_claim_under_the_same_load_sends_duplicates(folder):
    """Four naive workers and 500 jobs: duplicates within the first 20 jobs done."""
    terminals = Terminals(folder, timewarp=200)
    try:
        sent = drain(terminals, folder, "naive", jobs=500, workers=4, until_done=20)
    finally:
        terminals.close()
    assert any(count > 1 for count in sent.values()), sent


def crash_then_recover(terminals, crash_flag):
    ex06 = "ex06_leases.py"
    terminals.run(f"python3 {ex06} enqueue ann@example.com")
    crashed = terminals.run(f"python3 {ex06} work {crash_flag}")
    assert "crashing" in crashed
    healthy = terminals.start(f"python3 {ex06} work")
    terminals.wait_for(healthy, "no jobs left")
    terminals.sleep(10)
    return terminals.stop(healthy)


@exercise("ex06_leases.py")
@pytest.mark.parametrize("crash, emails", [("--crash-before-send", 1),
                                           ("--crash-after-send", 2)])
def test_ex06_after_a_crash_a_healthy_worker_finishes_the_job(terminals, folder, crash, emails):
    """After the lease, a healthy worker takes the job over: one email in all
    if the crash came before the send, two if it came after."""
    printed = crash_then_recover(terminals, crash)
    assert "claimed job 1 (attempt 2)" in printed
    assert [line.split(",")[0] for line in outbox(folder)] == \
        ["welcome email to ann@example.com"] * emails


@exercise("ex06_leases.py")
def test_ex06_a_lease_shorter_than_the_work_sends_twice_without_any_crash(terminals, folder):
    """Two healthy workers, a 1 s lease, 2 s of work: two emails, no crash."""
    ex06 = "ex06_leases.py"
    terminals.run(f"python3 {ex06} enqueue ann@example.com")
    first = terminals.start(f"python3 {ex06} work --lease 1")
    terminals.wait_for(first, "claimed job 1 (attempt 1)")
    second = terminals.start(f"python3 {ex06} work --lease 1")
    terminals.wait_for(second, "claimed job 1 (attempt 2)")
    for worker in (first, second):
        terminals.wait_for(worker, "no jobs left")
    printed = [terminals.stop(worker) for worker in (first, second)]
    assert not any("crashing" in output for output in printed)
    assert [worker.popen.returncode for worker in (first, second)] == [0, 0]
    assert [line.split(",")[0] for line in outbox(folder)] == \
        ["welcome email to ann@example.com"] * 2


# ---------------------------------------------------------------- Exercise 7

SEEDS = range(1, 51)

# Runs the exercise's own command line for many seeds in one process, each
# run with fresh module globals (runpy), and prints what each printed.
MANY_SEEDS = """
import contextlib, io, runpy, sys
for seed in {seeds}:
    for command in (["setup"], ["work", "--seed", str(seed)], ["report"]):
        sys.argv = ["{file}", *command]
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            runpy.run_path("{file}", run_name="__main__")
        print(f"=== seed {{seed}} {{command[0]}}")
        print(printed.getvalue(), end="")
"""


def runs_by_seed(folder, file, seeds=SEEDS):
    """{seed: (what `work` printed, what `report` printed)} for every seed."""
    status, output = run_script(folder, MANY_SEEDS.format(seeds=list(seeds), file=file),
                                timewarp=1000)
    assert status == 0, output
    parts = re.split(r"^=== seed (\d+) (\w+)\n", output, flags=re.M)[1:]
    runs = {}
    for seed, command, printed in zip(parts[::3], parts[1::3], parts[2::3]):
        runs.setdefault(int(seed), {})[command] = printed
    return {seed: (run["work"], run["report"]) for seed, run in runs.items()}


def overcharge_cents(report):
    paid, owed = re.search(r"alice paid \$([\d.]+) for orders worth \$([\d.]+)",
                           report).groups()
    return round((float(paid) - float(owed)) * 100)


@exercise("ex07_retries.py")
def test_ex07_alice_loses_ten_dollars_per_lost_reply_and_nothing_per_lost_request(folder):
    """Across 50 seeds, what Alice pays beyond what she owes is $10 per
    TimeoutError (a charge whose reply was lost); ConnectionErrors cost nothing."""
    runs = runs_by_seed(folder, "ex07_retries.py")
    assert sorted(runs) == list(SEEDS)
    for seed, (work, report) in runs.items():
        timeouts = work.count("TimeoutError")
        assert overcharge_cents(report) == 1000 * timeouts, (seed, work, report)
    # the lost requests really happened, often, and with no lost reply cost nothing
    assert sum(work.count("ConnectionError") for work, _ in runs.values()) > 50
    assert any(w.count("ConnectionError") and not w.count("TimeoutError")
               and overcharge_cents(r) == 0 for w, r in runs.values())


@exercise("ex07_retries.py")
def test_ex07_without_lost_replies_every_balance_is_right(folder):
    """The drill: with LOST_REPLY = 0, Alice pays exactly what she owes, whatever the seed."""
    console.apply_edit(folder, "ex07_retries.py", "LOST_REPLY = 0.3", "LOST_REPLY = 0")
    for seed, (work, report) in runs_by_seed(folder, "ex07_retries.py").items():
        assert "TimeoutError" not in work and overcharge_cents(report) == 0, (seed, report)


@exercise("ex07_retries.py")
def test_ex07_with_two_attempts_jobs_die_with_their_last_error(folder):
    """The drill: with MAX_ATTEMPTS = 2, some jobs end dead, each showing its last error."""
    console.apply_edit(folder, "ex07_retries.py", "MAX_ATTEMPTS = 5", "MAX_ATTEMPTS = 2")
    runs = runs_by_seed(folder, "ex07_retries.py")
    dead_runs = 0
    for seed, (work, report) in runs.items():
        died = re.findall(r"^job (\d+), attempt 2: .*(ConnectionError|TimeoutError): .*; "
                          r"dead, giving up$", work, re.M)
        shown = re.findall(r"^  job (\d+) is dead; its last error: (\w+):", report, re.M)
        assert sorted(died) == sorted(shown), (seed, work, report)
        assert f"{len(died)} dead" in report
        dead_runs += bool(died)
    assert dead_runs > 10


@exercise("ex07_retries.py")
def test_ex07_backoff_doubles_up_to_the_cap_with_jitter_below_it(folder):
    """backoff(attempt, rng) is a random wait up to base * 2**(attempt-1), capped."""
    status, output = run_script(folder, """
import random
from ex07_retries import backoff, BACKOFF_BASE, BACKOFF_CAP
class Highest:                       # a stand-in rng that always draws the top
    def uniform(self, low, high):
        return high
print(BACKOFF_BASE, BACKOFF_CAP, [backoff(n, Highest()) for n in range(1, 9)])
rng = random.Random(7)
waits = [backoff(3, rng) for _ in range(2000)]
print(min(waits) >= 0, max(waits) <= BACKOFF_BASE * 4, len(set(waits)) > 1900)
print(backoff(4, random.Random(1)) == backoff(4, random.Random(1)))
""")
    assert status == 0, output
    assert output.splitlines() == [
        "0.5 8.0 [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0, 8.0]", "True True True", "True"]
