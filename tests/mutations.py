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
    # ---- the capstone: each file graded on its own
    Mistake("capstone/tinyq.py", "a claim that takes a running job whatever its lease", [
        ("    (SELECT id FROM jobs WHERE status = 'running' AND locked_until < :now\n",
         "    (SELECT id FROM jobs WHERE status = 'running'\n")]),
    Mistake("capstone/tinyq.py", "a token that is not raised at each claim", [
        ("UPDATE jobs SET status = 'running', attempts = attempts + 1, token = token + 1,",
         "UPDATE jobs SET status = 'running', attempts = attempts + 1,")]),
    Mistake("capstone/tinyq.py", "no burying: a job that kills its worker is claimed for ever", [
        ('            db.execute(BURY, {"now": now, "max_attempts": self.max_attempts})\n', "")]),
    Mistake("capstone/tinyq.py", "one attempt too many before a failing job is dead", [
        ("        if job.attempts >= self.max_attempts:", "        if job.attempts > self.max_attempts:")]),
    Mistake("capstone/tinyq.py", "a backoff without jitter: every retry waits the whole ceiling", [
        ("        return self.rng.uniform(0, ceiling)", "        return ceiling")]),
    Mistake("capstone/world.py", "a key reused with another amount gets the first charge's answer", [
        ("                WHERE customer = excluded.customer AND cents = excluded.cents\n", "")]),
    Mistake("capstone/world.py", "a lost reply that comes before the effect instead of after it", [
        ('''        yield
        if self.rng.random() < LOST_REPLY:
            raise TimeoutError(f"{service}: the reply never came back")''', '''        if self.rng.random() < LOST_REPLY:
            raise TimeoutError(f"{service}: the reply never came back")
        yield''')]),
    Mistake("capstone/shop.py", "an email key that changes with every attempt", [
        ("key=f\"welcome-{job.args['customer']}\")", "key=f\"welcome-{job.args['customer']}-{job.attempts}\")")]),
    Mistake("capstone/shop.py", "a fee key made from the claim's token", [
        ("key=f\"fee-{job.args['customer']}\")", "key=f\"fee-{job.token}\")")]),
    Mistake("capstone/shop.py", "a signup of separate statements instead of one transaction", [
        ("    with queue.transaction() as db:\n        (customer,) = db.execute(",
         "    if True:\n        db = queue.db\n        (customer,) = db.execute(")]),
    Mistake("capstone/chaos.py", "an audit that looks only for duplicates, never for what is missing", [
        ("            elif got != owed:", "            elif got > owed:")]),
    Mistake("capstone/chaos.py", "a supervisor that does not restart a crashed worker", [
        ("                running.append(start_worker(seed, chaos))\n", "")]),
    Mistake("capstone/chaos.py", "a worker that quits when no job is due, leaving retries behind", [
        ('''        counts = queue.counts()
        if counts["queued"] + counts["running"] == 0:
            return''', '''        return''')]),
]


def apply(mistake, folder):
    """Make the mistake in folder's copy of its file; the mistake back."""
    if mistake.edits == [("", "")]:
        (Path(folder) / mistake.file).write_text("")
    for old, new in mistake.edits:
        if old:
            sandbox.apply_edit(folder, mistake.file, old, new)
    return mistake
