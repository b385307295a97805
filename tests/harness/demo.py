"""What the harness's tests share: small programs that stand for a worker,
a producer and a sender, and a guide made of console blocks that run them."""

import os
import textwrap

import pytest

WORKER = """
import os, time
with open(PGIDS, "a") as record:          # for the test: its process group
    record.write(f"{os.getpgrp()}\\n")
print("worker: waiting for jobs")
done = 0
try:
    while True:
        try:
            with open("jobs.txt") as jobs:
                waiting = [line.strip() for line in jobs if line.endswith("\\n")][done:]
        except FileNotFoundError:
            waiting = []
        for job in waiting:
            print(f"worker: did {job}")
            done += 1
        time.sleep(0.5)
except KeyboardInterrupt:
    print("\\nworker: stopped")
"""

PRODUCER = """
import sys, time
try:
    with open("jobs.txt") as jobs:
        number = len(jobs.readlines())
except FileNotFoundError:
    number = 0
for _ in range(int(sys.argv[1])):
    number += 1
    with open("jobs.txt", "a") as jobs:
        jobs.write(f"job {number}\\n")
    print(f"producer: added job {number}")
    time.sleep(1)
"""

# Sends for 2 s, or as many as its argument says: a ^C a transcript sends
# must land in the sleep, so those give it a minute, however busy the machine.
SENDER = """
import sys, time
try:
    print("sending")
    time.sleep(float(sys.argv[1]) if sys.argv[1:] else 2)
    print("sent")
except KeyboardInterrupt:
    print("\\nstopped")
"""


def demo_programs(tmp_path):
    """A folder of demo programs in tmp_path: a worker that runs until ^C, a
    producer, a sender (the root conftest.py's `demo` fixture)."""
    folder = tmp_path / "code"
    folder.mkdir()
    (folder / "worker.py").write_text(WORKER.replace("PGIDS", repr(str(tmp_path / "pgids"))))
    (folder / "producer.py").write_text(PRODUCER)
    (folder / "sender.py").write_text(SENDER)
    return folder


def guide_text(*blocks):
    """A guide holding console blocks, given as (info, body): its text, and their fence lines."""
    text, lines = "# Demo\n\n", []
    for info, body in blocks:
        lines.append(text.count("\n") + 1)
        text += f"```{info}\n{textwrap.dedent(body).lstrip()}```\n\n"
    return text, lines


WORKER_STARTS = ('{.console session="jobs"}', """
    $ python3 worker.py
    worker: waiting for jobs
    """)
PRODUCER_ADDS_TWO = ('{.console session="jobs" terminal="2"}', """
    $ python3 producer.py 2
    producer: added job 1
    producer: added job 2
    """)
WORKER_DOES_THEM = ('{.console session="jobs"}', """
    worker: did job 1
    worker: did job 2
    ^C
    worker: stopped
    """)


def worker_groups_gone(demo):
    """Whether every worker's process group has ended (all its processes reaped)."""
    groups = (demo.parent / "pgids").read_text().split()
    assert groups
    for group in groups:
        with pytest.raises(ProcessLookupError):
            os.killpg(int(group), 0)
    return True
