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

from tools.harness import sandbox


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
        ('key = f"charge-for-order-{order_id}"', 'key = f"charge-{random.random()}"')]),

    # ---- ex01-ex09: mistakes whose effect the transcripts cannot show, and
    # the classic ones the guide warns about. The comment under each
    # names the tests that catch it, on a copy of code/ (`pytest --work=COPY
    # --exercise FILE`); "transcripts" are the guide's console blocks.

    Mistake("ex01_slow_signup.py", "the mail server's 2 s written into the sleep", [
        ("time.sleep(MAIL_SERVER_SECONDS)      # talking to the mail server",
         "time.sleep(2)                        # talking to the mail server")]),
    # FAIL: test_ex01_a_signup_waits_as_long_as_the_mail_server (Study Drill 1);
    # the Break It's transcript and test, whose edit no longer finds the sleep

    Mistake("ex01_slow_signup.py", "Study Drill 3's swap kept: the email before the account", [
        ("    create_account(address)\n    send_welcome_email(address)          # the user waits for this too\n",
         "    send_welcome_email(address)          # the user waits for this too\n    create_account(address)\n")]),
    # FAIL: test_ex01_a_failing_email_fails_a_signup_whose_account_exists, the transcripts

    Mistake("ex02_jobs.py", "make_job no longer checks the kind (Study Drill 3 left in)", [
        ('    if kind not in HANDLERS:\n        raise ValueError(f"no handler for job kind {kind!r}")\n', "")]),
    # FAIL: test_ex02_an_unknown_kind_is_refused, the Break It's misspelt kind

    Mistake("ex02_jobs.py", "the job holds its handler function instead of its kind", [
        ('return {"kind": kind, "args": args}', 'return {"kind": HANDLERS[kind], "args": args}'),
        ('handler = HANDLERS[job["kind"]]', 'handler = job["kind"]')]),
    # ERROR: test_ex02_jobs_survive_a_json_round_trip, the transcripts (TypeError)

    Mistake("ex03_memory_queue.py", "a stack, not a queue: the newest job first", [
        ("jobs = queue.Queue()", "jobs = queue.LifoQueue()")]),
    # FAIL: test_ex03_the_worker_sends_every_email_in_order_and_signups_do_not_wait,
    # the transcript

    Mistake("ex03_memory_queue.py", "each signup waits for the worker (put, then join)", [
        ('    jobs.put({"kind": "welcome_email", "args": {"address": address}})\n',
         '    jobs.put({"kind": "welcome_email", "args": {"address": address}})\n'
         '    jobs.join()                          # make sure it went\n')]),
    # FAIL: test_ex03_the_worker_sends_every_email_in_order_and_signups_do_not_wait,
    # test_ex03_quitting_loses_the_waiting_jobs, the transcripts

    Mistake("ex03_memory_queue.py", "Study Drill 1's second worker left in", [
        ("    threading.Thread(target=worker, daemon=True).start()\n",
         "    for _ in range(2):\n        threading.Thread(target=worker, daemon=True).start()\n")]),
    # FAIL: test_ex03_a_burst_answers_at_once_and_drains_at_a_steady_pace (emails
    # go out two at a time), the transcript; and, when the two workers' emails
    # happen to come out of order, test_ex03_the_worker_sends_every_email_in_order_...

    Mistake("ex04_durable_queue.py", "ack before the work", [
        ("        HANDLERS[kind](**json.loads(args))               # 2. do\n"
         "        ack(db, job_id)                                  # 3. acknowledge\n",
         "        ack(db, job_id)                                  # 3. acknowledge\n"
         "        HANDLERS[kind](**json.loads(args))               # 2. do\n")]),
    # FAIL: test_ex04_a_job_is_running_while_it_is_sent_and_done_only_after. The
    # Break It and test_ex04_a_job_interrupted_mid_send_stays_running_forever
    # catch it only when the Ctrl-C lands after the early ack: a race

    Mistake("ex04_durable_queue.py", "claim takes running jobs too, not only queued ones", [
        ("\"SELECT id, kind, args FROM jobs WHERE status = 'queued' \"",
         "\"SELECT id, kind, args FROM jobs WHERE status IN ('queued', 'running') \"")]),
    # FAIL: test_ex04_a_job_interrupted_mid_send_stays_running_forever, the Break It

    Mistake("ex04_durable_queue.py", "no isolation_level=None: nothing is ever committed", [
        ("db = sqlite3.connect(DATABASE, isolation_level=None)",
         "db = sqlite3.connect(DATABASE)")]),
    # too little: every job is lost. TIMEOUT (about 3 minutes of waiting):
    # test_ex04_reset_starts_the_numbers_again, test_ex04_a_job_interrupted_...,
    # the transcripts

    Mistake("ex05_two_workers.py", "ack without its WHERE: every job marked done", [
        ("db.execute(\"UPDATE jobs SET status = 'done' WHERE id = ?\", (job_id,))",
         "db.execute(\"UPDATE jobs SET status = 'done'\")")]),
    # too little: jobs lost. FAIL:
    # test_ex05_two_atomic_workers_email_everyone_once_and_share_the_work,
    # test_ex05_the_atomic_claim_under_load_sends_each_email_exactly_once,
    # test_ex05_two_naive_workers_email_everyone_twice, the transcripts

    Mistake("ex06_leases.py", "claim takes a running job whatever its lease", [
        ("                       OR (status = 'running' AND locked_until < ?)\n",
         "                       OR status = 'running'\n"),
        ("(WORKER, now + lease, now)", "(WORKER, now + lease)")]),
    # no transcript and no earlier test shows it. FAIL:
    # test_ex06_a_live_lease_holds_the_job_until_it_runs_out, alone

    Mistake("ex06_leases.py", "the lease always LEASE_SECONDS long, whatever --lease says", [
        ("(WORKER, now + lease, now)", "(WORKER, now + LEASE_SECONDS, now)")]),
    # TIMEOUT: test_ex06_a_lease_shorter_than_the_work_sends_twice_without_any_crash,
    # test_ex06_a_live_lease_holds_the_job_until_it_runs_out, the transcripts

    Mistake("ex06_leases.py", "the command line read by hand, as ex05 does, not by argparse", [(
        '''    parser = argparse.ArgumentParser(description="A job queue with leases.")
    parser.add_argument("command", choices=["enqueue", "list", "work", "reset"])
    parser.add_argument("addresses", nargs="*", help="for enqueue")
    parser.add_argument("--lease", type=float, default=LEASE_SECONDS,
                        help="seconds a claim lasts (default %(default)s)")
    crash_when = parser.add_mutually_exclusive_group()
    crash_when.add_argument("--crash-before-send", action="store_true")
    crash_when.add_argument("--crash-after-send", action="store_true")
    options = parser.parse_args(args)
''', '''    import types
    options = types.SimpleNamespace(
        command=args[0],
        addresses=[arg for arg in args[1:] if "@" in arg],
        lease=float(args[args.index("--lease") + 1]) if "--lease" in args else LEASE_SECONDS,
        crash_before_send="--crash-before-send" in args,
        crash_after_send="--crash-after-send" in args)
''')]),
    # every command works, but `work --help` starts a worker that waits for
    # jobs. TIMEOUT: test_ex06_work_help_is_written_by_argparse (Study Drill 2), alone

    Mistake("ex07_retries.py", "backoff without its cap", [
        ("return fraction * min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1))",
         "return fraction * BACKOFF_BASE * 2 ** (attempt - 1)")]),
    # no transcript reaches the cap. FAIL:
    # test_ex07_backoff_is_a_pure_function_of_the_attempt_and_a_fraction,
    # test_ex07_a_change_of_retry_policy_leaves_the_networks_luck_alone

    Mistake("ex07_retries.py", "no jitter: every retry waits its whole ceiling", [
        ("wait = backoff(attempts, dice.random())", "wait = backoff(attempts, 1.0)")]),
    # FAIL: test_ex07_each_wait_is_the_attempts_own_fraction_of_its_ceiling,
    # test_ex07_a_change_of_retry_policy_leaves_the_networks_luck_alone, the transcripts

    Mistake("ex07_retries.py", "a job dies one attempt early", [
        ("if attempts >= MAX_ATTEMPTS:", "if attempts + 1 >= MAX_ATTEMPTS:")]),
    # FAIL: test_ex07_with_two_attempts_jobs_die_with_their_last_error, the transcripts

    Mistake("herd.py", "full jitter that waits its whole ceiling", [
        ("        return dice.uniform(0, ceiling)\n", "        return ceiling\n")]),
    # full jitter becomes exponential backoff: 5,050 calls, 99 in step. FAIL: the transcript

    Mistake("herd.py", "a write taken though another was taken since its read", [
        ("        taken = written_at < read_at", "        taken = written_at < now")]),
    # only writes at the same instant clash: far fewer calls with jitter than the
    # transcript shows. FAIL: the transcript

    Mistake("ex08_idempotency.py", "the key names the account, not the order", [
        ('key = f"charge-for-order-{order_id}"', 'key = f"charge-for-{account}"')]),
    # too little: one charge for five orders. FAIL:
    # test_ex08_a_stable_key_charges_each_order_once_however_often_it_is_sent,
    # test_ex08_many_seeds_balance_and_seed_4_charges_a_dead_job, the transcript

    Mistake("ex08_idempotency.py", "the key noted after the charge is committed", [
        ("        db.execute(\"INSERT INTO bank_requests VALUES (?, ?)\", (idempotency_key, response))\n"
         "    db.execute(\"COMMIT\")\n",
         "    db.execute(\"COMMIT\")\n"
         "    if answered is None:                 # note the key once the charge is safe\n"
         "        db.execute(\"INSERT INTO bank_requests VALUES (?, ?)\", (idempotency_key, response))\n")]),
    # no transcript shows it, nor the two-process race test (the key is noted
    # before the other request gets the lock). FAIL, alone:
    # test_ex08_a_bank_that_dies_at_any_point_charges_once_when_the_key_comes_again

    Mistake("ex08_idempotency.py", "no transaction around the lookup, the charge and the key", [
        ('    db.execute("BEGIN IMMEDIATE")\n', ""),
        ('    db.execute("COMMIT")\n', "")]),
    # FAIL: test_ex08_the_bank_charges_once_when_one_key_arrives_twice_at_once,
    # test_ex08_a_bank_that_dies_at_any_point_charges_once_when_the_key_comes_again

    Mistake("ex09_charge_worker.py", "start_next takes back a running operation whatever its lease", [
        ("        WHERE tenant = :tenant AND state = 'running' AND locked_until < :now\n",
         "        WHERE tenant = :tenant AND state = 'running'\n")]),
    # FAIL: test_ex09_a_dead_workers_slot_comes_back_after_its_lease,
    # test_ex09_admission_limits_each_tenant_on_its_own,
    # test_ex09_a_worker_gives_its_slot_back_on_every_way_out, the admission transcript

    Mistake("ex09_charge_worker.py", "marked charged before the provider is called", [
        ("    if charge_id is None:\n"
         "        charge_id = provider.charge(idempotency_key=op_id, timeout=timeout, **inputs)\n"
         "    # 4. Record the charge. Only then may the message be acknowledged.\n"
         "    db.execute(\"UPDATE operations SET charge_id = ?, state = 'charged'\"\n"
         "               \" WHERE id = ? AND state = 'started'\", (charge_id, op_id))\n",
         "    db.execute(\"UPDATE operations SET state = 'charged' WHERE id = ?\", (op_id,))\n"
         "    if charge_id is None:\n"
         "        charge_id = provider.charge(idempotency_key=op_id, timeout=timeout, **inputs)\n"
         "    db.execute(\"UPDATE operations SET charge_id = ? WHERE id = ?\", (charge_id, op_id))\n")]),
    # too little: a crash before the call ends with no charge. FAIL:
    # test_ex09_a_crash_at_any_point_ends_with_exactly_one_charge, and most
    # tests of process() and the transcripts (a charge id None is returned)

    Mistake("ex09_charge_worker.py", "every delivery writes its own started_at", [
        ("\" VALUES (?, ?, 'started', ?) ON CONFLICT (id) DO NOTHING\"",
         "\" VALUES (?, ?, 'started', ?)\"\n"
         "               \" ON CONFLICT (id) DO UPDATE SET started_at = excluded.started_at\"")]),
    # FAIL: test_ex09_after_the_key_window_the_worker_reconciles, the o7 transcript

    Mistake("ex09_charge_worker.py", "the record and the spend in two transactions", [
        ("    with transaction(db):\n        if db.execute(",
         "    if True:\n        if db.execute(")]),
    # a refused operation is left recorded as started, its charge unknown. FAIL:
    # test_ex09_a_spent_budget_refuses_sends_nothing_and_parks_nothing,
    # test_ex09_a_refusal_by_the_spend_budget_is_not_a_lost_worker, the spend transcript

    Mistake("ex09_charge_worker.py", "every delivery spends the amount again", [
        ("                      (op_id, digest(inputs), clock())).rowcount:\n",
         "                      (op_id, digest(inputs), clock())).rowcount or True:\n")]),
    # FAIL: test_ex09_the_spend_budget_counts_an_operation_once_however_often_it_starts

    Mistake("ex09_charge_worker.py", "a spent retry budget parks a healthy message", [
        ('raise RetryLater(f"{failure}; this worker\'s retry budget is spent")',
         'raise Parked(f"{failure}; this worker\'s retry budget is spent")')]),
    # FAIL: test_ex09_a_spent_retry_budget_puts_a_healthy_message_back_for_later,
    # the budget transcript

    Mistake("ex09_charge_worker.py", "no safe point: a cancel request is never checked", [
        ('    if db.execute("UPDATE work SET state = \'cancelled\', last_error = \'cancelled by its client\'"\n'
         '                  " WHERE id = ? AND state = \'running\' AND starts = ? AND cancel_asked = 1"',
         '    if False and db.execute("UPDATE work SET state = \'cancelled\', last_error = \'cancelled by its client\'"\n'
         '                  " WHERE id = ? AND state = \'running\' AND starts = ? AND cancel_asked = 1"')]),
    # FAIL: test_ex09_a_running_operation_asked_to_cancel_stops_at_its_safe_point,
    # the cancel transcript

    Mistake("ex09_charge_worker.py", "a parked operation keeps no reason", [
        ('        finish(db, message, "dead", str(reason))\n',
         '        finish(db, message, "dead")\n')]),
    # FAIL: test_ex09_a_worker_gives_its_slot_back_on_every_way_out, the
    # cancel and deadline transcripts

    Mistake("ex09_charge_worker.py", "finish without the fencing token", [
        ("\" WHERE id = ? AND state = 'running' AND starts = ?\",\n"
         "               (state, why, not_before, message[\"id\"], message[\"start\"]))",
         "\" WHERE id = ? AND state = 'running'\",\n"
         "               (state, why, not_before, message[\"id\"]))")]),
    # FAIL: test_ex09_a_worker_whose_lease_ran_out_cannot_end_the_operation, alone

    Mistake("ex09_charge_worker.py", "admission counts, then inserts, in two statements", [
        ('    db.execute("""\n'
         '        INSERT INTO work (id, tenant, inputs, state)\n'
         "        SELECT ?, ?, ?, 'waiting'\n"
         "        WHERE (SELECT count(*) FROM work WHERE tenant = ? AND state = 'waiting') < ?\n"
         '        ON CONFLICT (id) DO NOTHING\n'
         '    """, (op_id, tenant, json.dumps(inputs), tenant, MAX_WAITING))\n',
         "    (waiting,) = db.execute(\"SELECT count(*) FROM work WHERE tenant = ? AND state = 'waiting'\",\n"
         '                            (tenant,)).fetchone()\n'
         '    if waiting < MAX_WAITING:\n'
         "        db.execute(\"INSERT INTO work (id, tenant, inputs, state) VALUES (?, ?, ?, 'waiting')\"\n"
         '                   " ON CONFLICT (id) DO NOTHING", (op_id, tenant, json.dumps(inputs)))\n')]),
    # no transcript and no earlier test shows it. FAIL, alone:
    # test_ex09_two_requests_cannot_both_take_the_last_waiting_slot

    Mistake("capstone/tinyq.py", "complete() without the token check", [
        ("run_at = coalesce(:run_at, run_at)\n        WHERE id = :id AND token = :token AND",
         "run_at = coalesce(:run_at, run_at)\n        WHERE id = :id AND")]),

    Mistake("capstone/shop.py", "points awarded outside the job's transaction", [('''\
        with job.complete() as db:
            db.execute(ADD_POINTS, (POINTS, job.args["customer"]))
            maybe_crash(job, "inside the transaction, before the commit")''', '''\
        queue.db.execute(ADD_POINTS, (POINTS, job.args["customer"]))
        maybe_crash(job, "after the points, before the ack")''')]),
    # ---- the capstone: each file graded on its own
    Mistake("capstone/tinyq.py", "a claim that takes a running job whatever its lease", [
        ("    (SELECT id FROM jobs WHERE status = 'running' AND locked_until < :now\n",
         "    (SELECT id FROM jobs WHERE status = 'running'\n")]),
    Mistake("capstone/tinyq.py", "a claim that serves queued jobs before a dead worker's job", [
        ("""\
            (SELECT id FROM jobs WHERE status = 'running' AND locked_until < :now
             ORDER BY locked_until LIMIT 1),
            (SELECT id FROM jobs WHERE status = 'queued' AND run_at <= :now
             ORDER BY run_at, id LIMIT 1))""", """\
            (SELECT id FROM jobs WHERE status = 'queued' AND run_at <= :now
             ORDER BY run_at, id LIMIT 1),
            (SELECT id FROM jobs WHERE status = 'running' AND locked_until < :now
             ORDER BY locked_until LIMIT 1))""")]),
    Mistake("capstone/tinyq.py", "a token that is not raised at each claim", [
        ("UPDATE jobs SET status = 'running', attempts = attempts + 1, token = token + 1,",
         "UPDATE jobs SET status = 'running', attempts = attempts + 1,")]),
    Mistake("capstone/tinyq.py", "no burying: a job that kills its worker is claimed for ever", [
        ("            db.execute(self.BURY, values)\n", "")]),
    Mistake("capstone/tinyq.py", "one attempt too many before a failing job is dead", [
        ("or job.attempts >= self.max_attempts:", "or job.attempts > self.max_attempts:")]),
    Mistake("capstone/tinyq.py", "a permanent failure retried like any other", [
        ("if isinstance(error, Permanent) or job.attempts", "if job.attempts")]),
    Mistake("capstone/tinyq.py", "a backoff without jitter: every retry waits the whole ceiling", [
        ("self.rng.uniform(0, ceiling(job.attempts, self.backoff_base, self.backoff_cap))",
         "ceiling(job.attempts, self.backoff_base, self.backoff_cap)")]),
    # (capstone/world_given.py is given, not typed, so never graded: the
    # key that binds its inputs and the reply lost after the effect are held
    # on code/'s copy by tests/capstone/test_world_given.py.)
    Mistake("capstone/shop.py", "an email key that changes with every attempt", [
        ("key=f\"welcome-{job.args['customer']}\")", "key=f\"welcome-{job.args['customer']}-{job.attempts}\")")]),
    Mistake("capstone/shop.py", "a key the bank refuses, retried as if the network lost it", [
        ("""\
        except KeyReused as error:
            raise tinyq.Permanent(error) from error
        maybe_crash(job, "after the charge, before the ack")""", """\
        except KeyReused as error:
            raise
        maybe_crash(job, "after the charge, before the ack")""")]),
    Mistake("capstone/shop.py", "an email without UNIQUE: a double-clicked signup makes two customers", [
        ("    email   TEXT NOT NULL UNIQUE,", "    email   TEXT NOT NULL,")]),
    Mistake("capstone/shop.py", "a fee key made from the claim's token", [
        ("key=f\"fee-{job.args['customer']}\")", "key=f\"fee-{job.token}\")")]),
    Mistake("capstone/shop.py", "a signup of separate statements instead of one transaction", [
        ("    with queue.transaction() as db:\n        (customer,) = db.execute(",
         "    if True:\n        db = queue.db\n        (customer,) = db.execute(")]),
    Mistake("capstone/chaos.py", "an audit that looks only for duplicates, never for what is missing", [
        ("            elif got != owed:", "            elif got > owed:")]),
    Mistake("capstone/chaos.py", "a supervisor that does not restart a crashed worker", [
        ("                running.append(start_worker(seed, chaos))\n", "")]),
    Mistake("capstone/chaos.py", "an idle worker that sleeps instead of calling the queue's wait()", [
        ("        queue.wait(POLL_SECONDS)", "        time.sleep(POLL_SECONDS)")]),
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
