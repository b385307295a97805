"""Classic mistakes, each a small change to one reference file in code/, as a
learner might make it. test_mutations.py grades each one and expects its own
exercise to fail; the tests that can see the mistake are the reason it fails.

Each is a Mistake: the file, the mistake in a few words, and its edits,
each (old text, new text), where the old text occurs exactly once in the
file as it stands. An empty old text stands for the whole file, so
[("", "")] is a file handed in empty.
"""
from pathlib import Path
from typing import NamedTuple

from harness import sandbox


class Mistake(NamedTuple):
    file: str
    what: str
    edits: list


MISTAKES = [
    Mistake("ex02_jobs.py", "handed in empty", [("", "")]),

    Mistake("ex05_two_workers.py", "a claim in two steps, a read then a write", [('''\
    return db.execute("""
        UPDATE jobs SET worker = ?, status = 'running'
        WHERE id = (SELECT id FROM jobs WHERE status = 'queued' ORDER BY id ASC LIMIT 1)
        RETURNING id, kind, args
    """, (WORKER,)).fetchone()''', '''\
    oldest = db.execute("SELECT id, kind, args FROM jobs WHERE status = 'queued' "
                        "ORDER BY id ASC LIMIT 1").fetchone()
    if oldest is not None:
        db.execute("UPDATE jobs SET worker = ?, status = 'running' WHERE id = ?",
                   (WORKER, oldest[0]))
    return oldest''')]),

    Mistake("ex06_leases.py", "a claim that never takes a job whose lease ran out", [
        ("                       OR (status = 'running' AND locked_until < ?)\n", ""),
        ("(WORKER, now + lease, now)", "(WORKER, now + lease)")]),

    Mistake("ex08_idempotency.py", "a key made fresh on every attempt", [
        ('key = f"charge-for-order-{order_id}"', 'key = f"charge-{uuid.uuid4()}"')]),

    Mistake("capstone/tinyq.py", "complete() without the token check", [
        ("WHERE id = :id AND token = :token AND status = 'running'",
         "WHERE id = :id AND status = 'running'")]),

    Mistake("capstone/shop.py", "points awarded outside the job's transaction", [('''\
        with job.complete() as db:
            db.execute("UPDATE customers SET points = points + ? WHERE id = ?",
                       (POINTS, job.args["customer"]))
            maybe_crash("inside the transaction, before the commit")''', '''\
        queue.db.execute("UPDATE customers SET points = points + ? WHERE id = ?",
                         (POINTS, job.args["customer"]))
        maybe_crash("after the points, before the ack")''')]),
]


def apply(mistake, folder):
    """Make the mistake in folder's copy of its file; the mistake back."""
    if mistake.edits == [("", "")]:
        (Path(folder) / mistake.file).write_text("")
    for old, new in mistake.edits:
        if old:
            sandbox.apply_edit(folder, mistake.file, old, new)
    return mistake
