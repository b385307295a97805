"""Exercise 4 (Chapter 4): a durable queue in SQLite and a worker.

What the guide claims of ex04_durable_queue.py beyond its transcripts. Each
test runs the file from the folder under test (code/, or a learner's WORK)
in a fresh copy, and is graded for it.
"""


import pytest

from tools.harness import sandbox
from tests.helpers import hold_the_mail, outbox, receive, run_script, set_constant, statuses

pytestmark = pytest.mark.exercise("ex04_durable_queue.py")


def test_ex04_a_job_interrupted_mid_send_stays_running_forever(terminals, folder):
    """After Ctrl-C during a send, the job stays running and a new worker never takes it."""
    ex04 = "ex04_durable_queue.py"
    hold_the_mail(folder)                     # so the ^C lands before the email is out
    terminals.run(f"python3 {ex04} enqueue ann@example.com")
    worker = terminals.start(f"python3 {ex04} work")
    terminals.wait_for(worker, "claimed job 1")
    terminals.stop(worker)
    assert statuses(terminals, ex04) == ["running"]
    again = terminals.start(f"python3 {ex04} work")
    terminals.wait_for(again, "waiting for jobs")
    terminals.sleep(20)                       # 20 s of polling, on the shared clock
    assert "claimed" not in terminals.stop(again)
    assert receive(folder, 1, timeout=0) == [] and statuses(terminals, ex04) == ["running"]


def test_ex04_a_job_is_running_while_it_is_sent_and_done_only_after(terminals, folder):
    """Study Drill 2: while the worker sends, `list` shows its job running;
    the job is done only once the email is out."""
    ex04 = "ex04_durable_queue.py"
    hold_the_mail(folder)                     # the send lasts until the test reads it
    terminals.run(f"python3 {ex04} enqueue ann@example.com")
    worker = terminals.start(f"python3 {ex04} work")
    terminals.wait_for(worker, "claimed job 1")
    assert statuses(terminals, ex04) == ["running"] and "done" not in worker.output()
    assert receive(folder, 1) == ["welcome email to ann@example.com"]
    terminals.wait_for(worker, "job 1 done")
    assert statuses(terminals, ex04) == ["done"]
    terminals.stop(worker)


def test_ex04_without_a_command_says_how_to_use_it(folder):
    """With no words after the file's name, ex04 ends with a line that says
    how to use it."""
    status, output = sandbox.run("python3 ex04_durable_queue.py", folder)
    assert status == 1 and output == ("usage: python3 ex04_durable_queue.py "
                                      "enqueue ADDRESS... | list | work | reset\n"), output


def test_ex04_reset_starts_the_numbers_again(terminals, folder):
    """After a run, reset empties the queue and the outbox, and the next job is job 1
    again, so a learner who ran an earlier version sees the guide's job numbers."""
    ex04 = "ex04_durable_queue.py"
    terminals.run(f"python3 {ex04} enqueue ann@example.com bob@example.com")
    worker = terminals.start(f"python3 {ex04} work")
    terminals.wait_for(worker, "job 2 done")
    terminals.stop(worker)
    assert len(outbox(folder)) == 2
    assert terminals.run(f"python3 {ex04} reset") == "no jobs, empty outbox\n"
    assert outbox(folder) == [] and statuses(terminals, ex04) == []
    assert terminals.run(f"python3 {ex04} enqueue cat@example.com") == \
        "queued job 1: welcome_email to cat@example.com\n"


def test_ex04_an_idle_worker_says_no_jobs_left_once_each_time_it_runs_out(terminals):
    """`busy` only decides when to print "no jobs left": once, when the worker
    runs out of work, and not again while it idles; once more after the next
    job it finishes."""
    ex04 = "ex04_durable_queue.py"
    worker = terminals.start(f"python3 {ex04} work")
    terminals.wait_for(worker, "waiting for jobs")
    terminals.run(f"python3 {ex04} enqueue ann@example.com")
    terminals.wait_for(worker, "no jobs left")
    terminals.sleep(10)                       # 20 polls of an idle worker
    terminals.run(f"python3 {ex04} enqueue bob@example.com")
    terminals.wait_for(worker, "job 2 done")
    # Its second "no jobs left" comes as it looks again, however late a busy
    # machine lets it: wait for it rather than stop the worker 10 s later.
    worker.wait_until(lambda lines, exited: exited or "".join(lines).count("no jobs left") > 1,
                      sandbox.COMMAND_TIMEOUT)
    terminals.sleep(10)
    printed = terminals.stop(worker)
    assert printed.count("no jobs left") == 2, printed


# `work` on an empty queue, with time.sleep replaced before the file runs:
# each nap is noted, and the third stops the worker as Ctrl-C would.
NAPS = """
import time
naps = []

def nap(seconds):
    naps.append(seconds)
    if len(naps) == 3:
        raise KeyboardInterrupt

time.sleep = nap
import runpy, sys
sys.argv = ["ex04_durable_queue.py", "work"]
runpy.run_path("ex04_durable_queue.py", run_name="__main__")
print("naps:", naps)
"""


def test_ex04_an_idle_worker_looks_again_every_poll_seconds(folder):
    """Study Drill 3: with POLL_SECONDS = 5, an idle worker waits 5 s each time
    before it looks at the table again, so a job can wait up to 5 s."""
    set_constant(folder / "ex04_durable_queue.py", "POLL_SECONDS", 5)
    status, output = run_script(folder, NAPS)
    assert status == 0, output
    assert output.splitlines()[-1] == "naps: [5, 5, 5]", output
