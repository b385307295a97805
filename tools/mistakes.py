"""Classic mistakes: each a small change to one reference file in code/, as a
learner might make it, with a hint for the learner who made it.

Each is a Mistake:
- file: the exercise's file, as the catalogue names it;
- what: the mistake in a few words, for the people who keep the course;
- edits: each (old text, new text), where the old text occurs exactly once
  in the file as the earlier edits leave it; an empty old text stands for
  the whole file, so [("", "")] is a file handed in empty;
- hint: what the learner is told, in the course's voice: where to look,
  never the fix;
- stops_at: the steps where checking a copy of code/ with the mistake made
  stops, that is the step of the first problem of its grading (results.py's
  problems[0]), each named as `step_of` names it. A racy mistake lists
  every first step seen;
- verdict: that step's kind, FAIL unless said (a crash is ERROR, a hang
  TIMEOUT): a hint is given only to a failure of its kind;
- shows: what the mistake makes the failure say, a regular expression
  searched (re.MULTILINE) in the failing step's claim and output; the hint
  is given only where it is found. Every mistake that shares a step with
  another has one, so that each failure there gets only its own hint;
  one alone at its steps may leave it out.

tests/test_mutations.py checks every mistake as a learner does and holds
its verdict and that its hint is shown (so `shows` is what it shows);
tests/test_mistakes.py checks, fast, that each one still applies to code/
and names steps that exist, and that mistakes sharing a step each have a
`shows`. The checker shows `hints_for(exercise, step, verdict, said)` at
the step it stops at.
"""
import functools
import re
from pathlib import Path
from typing import NamedTuple

from tools import guide
from tools.harness import catalogue, sandbox
from tools.harness.results import ERROR, FAIL, TIMEOUT


class Mistake(NamedTuple):
    file: str
    what: str
    edits: list
    hint: str
    stops_at: tuple
    verdict: str = FAIL      # the kind of its first failing step (results.py)
    shows: str = ""          # a regular expression its failure's words match


def step_of(problem):
    """A problem's step (results.py): a claims test by its function's name,
    without parameters; a transcript by its command as typed, without `$ `;
    a console block that failed before any command ran (its edit= found
    nothing to change) by its first command."""
    if problem["test"]:
        return problem["test"].rpartition("::")[2].partition("[")[0]
    return problem.get("command") or first_command(problem["where"])


def first_command(where):
    """The first command of the console block around `where`, guide.md:LINE."""
    line = where.rpartition(":")[2]
    if not line.isdigit():
        return None
    line = int(line)
    for block in console_blocks():
        if block.line <= line <= block.line + len(block.body) + 1:
            return next((text[2:] for text in block.body if text.startswith("$ ")), None)
    return None


@functools.cache
def console_blocks():
    text = catalogue.GUIDE.read_text(encoding="utf-8")
    return [block for block in guide.blocks(text) if "console" in block.classes]


def hints_for(exercise, step, verdict, said=None):
    """The hints of every mistake in the exercise's file that stops at step
    with that verdict (a crash where a mistake makes a wrong line is
    another mistake, whose traceback says more than any hint), and whose
    `shows` is in `said`, the failure's words (None: whatever they are)."""
    return [mistake.hint for mistake in MISTAKES
            if mistake.file == exercise and step in mistake.stops_at
            and verdict == mistake.verdict
            and (said is None or re.search(mistake.shows, said, re.MULTILINE))]


def apply(mistake, folder):
    """Make the mistake in folder's copy of its file; the mistake back."""
    if mistake.edits == [("", "")]:
        (Path(folder) / mistake.file).write_text("")
    for old, new in mistake.edits:
        if old:
            sandbox.apply_edit(folder, mistake.file, old, new)
    return mistake


# In the course's order, file by file. The first mistake of each file is the
# one test_grading.py's class makes: keep it first.
MISTAKES = [
    Mistake("ex01_slow_signup.py", "the mail server's 2 s written into the sleep", [
        ("time.sleep(MAIL_SERVER_SECONDS)      # talking to the mail server",
         "time.sleep(2)                        # talking to the mail server")],
        hint="Look at how long `send_welcome_email()` sleeps: does changing "
             "`MAIL_SERVER_SECONDS` still change it?",
        shows=r"time\.sleep\(MAIL_SERVER_SECONDS\)",
        stops_at=("python3 ex01_slow_signup.py",)),

    Mistake("ex01_slow_signup.py", "Study Drill 3's swap kept: the email before the account", [
        ("    create_account(address)\n    send_welcome_email(address)          # the user waits for this too\n",
         "    send_welcome_email(address)          # the user waits for this too\n    create_account(address)\n")],
        hint="Look at the order of the two calls in `signup()`: what becomes of the "
             "account when the email fails?",
        shows=r"^\+(\S+): welcome email sent\n \1: account created",
        stops_at=("python3 ex01_slow_signup.py",)),

    Mistake("ex02_jobs.py", "handed in empty", [("", "")],
            hint="Your `ex02_jobs.py` is empty: was the file saved after you typed it?",
            stops_at=("python3 ex02_jobs.py",)),

    Mistake("ex02_jobs.py", "make_job no longer checks the kind (Study Drill 3 left in)", [
        ('    if kind not in HANDLERS:\n        raise ValueError(f"no handler for job kind {kind!r}")\n', "")],
        hint="Look at what `make_job()` does with a kind that `HANDLERS` does not know.",
        stops_at=(
            'python3 -c "import ex02_jobs as ex; ex.make_job(\'welcome_emial\', user_id=42)"',
        )),

    Mistake("ex02_jobs.py", "the job holds its handler function instead of its kind", [
        ('return {"kind": kind, "args": args}', 'return {"kind": HANDLERS[kind], "args": args}'),
        ('handler = HANDLERS[job["kind"]]', 'handler = job["kind"]')],
        hint="Look at what `make_job()` writes under `\"kind\"`: a job is data, and has to "
             "survive being written down as JSON.",
        stops_at=("python3 ex02_jobs.py",),
        verdict=ERROR),

    Mistake("ex03_memory_queue.py", "a stack, not a queue: the newest job first", [
        ("jobs = queue.Queue()", "jobs = queue.LifoQueue()")],
        hint="Look at the kind of queue `jobs` is: which job does the worker get first?",
        shows=r"^\+.*welcome email sent to cat@[\s\S]*^[ +].*welcome email sent to bob@",
        stops_at=("python3 ex03_memory_queue.py",)),

    Mistake("ex03_memory_queue.py", "each signup waits for the worker (put, then join)", [
        ('    jobs.put({"kind": "welcome_email", "args": {"address": address}})\n',
         '    jobs.put({"kind": "welcome_email", "args": {"address": address}})\n'
         '    jobs.join()                          # make sure it went\n')],
        hint="Look at what `signup()` does after it puts the job in the queue: "
             "what is the user still waiting for?",
        shows=r"^\+\[ *[\d.]+ s\] signup\(\S+\) answered after [1-9]\d{3,}\.\d+ ms",
        stops_at=("python3 ex03_memory_queue.py",)),

    Mistake("ex03_memory_queue.py", "Study Drill 1's second worker left in", [
        ("    threading.Thread(target=worker, daemon=True).start()\n",
         "    for _ in range(2):\n        threading.Thread(target=worker, daemon=True).start()\n")],
        hint="Count the worker threads that `main()` starts (Study Drill 1 changed that).",
        shows=r"^\+\[ *4\.\d\d s\] all 3 emails sent",
        stops_at=("python3 ex03_memory_queue.py",)),

    Mistake("ex04_durable_queue.py", "ack before the work", [
        ("        HANDLERS[kind](**json.loads(args))               # 2. do\n"
         "        ack(db, job_id)                                  # 3. acknowledge\n",
         "        ack(db, job_id)                                  # 3. acknowledge\n"
         "        HANDLERS[kind](**json.loads(args))               # 2. do\n")],
        hint="Look at the order of the steps in `work()`: when is a job marked done, "
             "and when is its email sent?",
        stops_at=("python3 ex04_durable_queue.py list",)),

    Mistake("ex04_durable_queue.py", "claim takes running jobs too, not only queued ones", [
        ("\"WHERE status = 'queued' \"",
         "\"WHERE status IN ('queued', 'running') \"")],
        hint="Look at the `WHERE` in `claim()`: which statuses may a job have to be claimed?",
        # A race: if the Break It's Ctrl-C stops the second worker before it claims,
        # that transcript shows nothing wrong.
        stops_at=("python3 ex04_durable_queue.py work",
                  "test_ex04_a_job_interrupted_mid_send_stays_running_forever")),

    # Too little: every job is lost, and commands wait for them in vain.
    Mistake("ex04_durable_queue.py", "no isolation_level=None: nothing is ever committed", [
        ("db = sqlite3.connect(DATABASE, isolation_level=None)",
         "db = sqlite3.connect(DATABASE)")],
        hint="Look at how `connect()` opens the database: is each statement saved "
             "the moment it runs?",
        stops_at=("python3 ex04_durable_queue.py work",),
        verdict=TIMEOUT),

    Mistake("ex05_two_workers.py", "a claim in two steps, a read then a write", [('''\
    return db.execute("""
        UPDATE jobs SET worker = ?, status = 'running'
        WHERE id = (SELECT id FROM jobs WHERE status = 'queued'
                    ORDER BY id ASC LIMIT 1)
        RETURNING id, kind, args
    """, (WORKER,)).fetchone()''', '''\
    oldest = db.execute("SELECT id, kind, args FROM jobs "
                        "WHERE status = 'queued' "
                        "ORDER BY id ASC LIMIT 1").fetchone()
    if oldest is not None:
        db.execute("UPDATE jobs SET worker = ?, status = 'running' WHERE id = ?",
                   (WORKER, oldest[0]))
    return oldest''')],
        hint="Look at `claim_atomic()`: can another worker come between picking a job "
             "and marking it as yours?",
        stops_at=("test_ex05_no_claim_landing_inside_an_atomic_claim_gets_its_job",)),

    Mistake("ex05_two_workers.py", "ack without its WHERE: every job marked done", [
        ("db.execute(\"UPDATE jobs SET status = 'done' WHERE id = ?\", (job_id,))",
         "db.execute(\"UPDATE jobs SET status = 'done'\")")],
        hint="Look at the `UPDATE` in `ack()`: which rows does it mark done?",
        stops_at=("python3 ex05_two_workers.py list",)),

    Mistake("ex05_two_workers.py", "a naive claim that names its worker but leaves the job queued", [
        ("    db.execute(\"UPDATE jobs SET worker = ?, status = 'running' WHERE id = ?\",",
         "    db.execute(\"UPDATE jobs SET worker = ? WHERE id = ?\",")],
        hint="Look at the `UPDATE` in `claim_naive()`: what does it do to the job's status?",
        stops_at=("test_ex05_a_claim_marks_its_job_running_by_its_worker",)),

    Mistake("ex06_leases.py", "a claim that never takes a job whose lease ran out", [
        ("                       OR (status = 'running' AND locked_until < ?)\n", ""),
        ("(WORKER, now + lease, now)", "(WORKER, now + lease)")],
        hint="Look at the `WHERE` in `claim()`: what happens to a job whose worker "
             "died while it was running?",
        stops_at=("python3 ex06_leases.py work",),
        verdict=TIMEOUT),

    # No transcript and no earlier test shows it.
    Mistake("ex06_leases.py", "claim takes a running job whatever its lease", [
        ("                       OR (status = 'running' AND locked_until < ?)\n",
         "                       OR status = 'running'\n"),
        ("(WORKER, now + lease, now)", "(WORKER, now + lease)")],
        hint="Look at the `WHERE` in `claim()`: when may a worker take a job that "
             "another worker is running?",
        stops_at=("test_ex06_a_live_lease_holds_the_job_until_it_runs_out",)),

    Mistake("ex06_leases.py", "the lease always LEASE_SECONDS long, whatever --lease says", [
        ("(WORKER, now + lease, now)", "(WORKER, now + LEASE_SECONDS, now)")],
        hint="Look at how long a lease `claim()` gives: does `--lease` change it?",
        stops_at=("python3 ex06_leases.py list",)),

    # Every command works, but `work --help` starts a worker that waits for jobs.
    Mistake("ex06_leases.py", "the command line read by hand, as ex05 does, not by argparse", [(
        '''    parser = argparse.ArgumentParser(description="A job queue with leases.")
    parser.add_argument("command",
                        choices=["enqueue", "list", "work", "reset"])
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
''')],
        hint="Look at how `main()` reads its command line: what does "
             "`python3 ex06_leases.py work --help` do?",
        stops_at=("test_ex06_work_help_is_written_by_argparse",),
        verdict=TIMEOUT),

    Mistake("ex07_retries.py", "backoff without its cap", [
        ("return fraction * min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (attempt - 1))",
         "return fraction * BACKOFF_BASE * 2 ** (attempt - 1)")],
        hint="Look at `backoff()`: how long can a wait grow after many attempts?",
        stops_at=("test_ex07_a_change_of_retry_policy_leaves_the_networks_luck_alone",)),

    Mistake("ex07_retries.py", "no jitter: every retry waits its whole ceiling", [
        ("wait = backoff(attempts, dice.random())", "wait = backoff(attempts, 1.0)")],
        hint="Look at the fraction `work()` hands to `backoff()`: where is the jitter?",
        shows=r"^\+job 1, attempt 1: .*retry in 0\.50 s$",
        stops_at=("python3 ex07_retries.py work --seed 1",)),

    Mistake("ex07_retries.py", "a job dies one attempt early", [
        ("if attempts >= MAX_ATTEMPTS:", "if attempts + 1 >= MAX_ATTEMPTS:")],
        hint="Look at how `fail()` compares the attempts with `MAX_ATTEMPTS`.",
        shows=r"^\+job \d+, attempt \d+: .*dead, giving up",
        stops_at=("python3 ex07_retries.py work --seed 1",)),

    # Full jitter becomes exponential backoff: 5,050 calls, 99 in step.
    Mistake("herd.py", "full jitter that waits its whole ceiling", [
        ("        return dice.uniform(0, ceiling)\n", "        return ceiling\n")],
        hint="Look at what `wait()` returns for the `full` policy: how does it differ "
             "from `exponential`?",
        shows=r"^\+ full jitter +5,050 ",
        stops_at=("python3 herd.py",)),

    # Only writes at the same instant clash: far fewer calls with jitter.
    Mistake("herd.py", "a write taken though another was taken since its read", [
        ("        taken = written_at < read_at", "        taken = written_at < now")],
        hint="Look at how `contend()` decides that a write is taken: since when must "
             "nobody else have written?",
        shows=r"^\+ (full|equal|decorrelated) jitter +199 ",
        stops_at=("python3 herd.py",)),

    Mistake("herd.py", "--seed read but never used: every run is seed 1's", [
        ("args.cap, args.seed))", "args.cap))")],
        hint="Look at what `main()` does with `--seed`: does it reach the dice?",
        stops_at=("test_herd_a_seed_repeats_its_run_and_another_seed_makes_another",)),

    Mistake("ex08_idempotency.py", "a key made fresh on every attempt", [
        ('key = f"charge-for-order-{order_id}"', 'key = f"charge-{random.random()}"')],
        hint="Look at the idempotency key `charge_card()` makes: is it the same every "
             "time the same order is sent?",
        shows=r"\A(?![\s\S]*^\+  bank: \S+ seen before)[\s\S]*^-  bank: charge-for-order-\d+ seen before",
        stops_at=("python3 ex08_idempotency.py work --seed 1",)),

    # Too little: one charge for five orders.
    Mistake("ex08_idempotency.py", "the key names the account, not the order", [
        ('key = f"charge-for-order-{order_id}"', 'key = f"charge-for-{account}"')],
        hint="Look at what the idempotency key in `charge_card()` names: does each order "
             "get a key of its own?",
        shows=r"^\+  bank: charge-for-alice seen before",
        stops_at=("python3 ex08_idempotency.py work --seed 1",)),

    # No transcript shows it, nor the two-process race test (the key is noted
    # before the other request gets the lock).
    Mistake("ex08_idempotency.py", "the key noted after the charge is committed", [
        ("        db.execute(\"INSERT INTO bank_requests VALUES (?, ?)\",\n"
         "                   (idempotency_key, response))\n"
         "    db.execute(\"COMMIT\")\n",
         "    db.execute(\"COMMIT\")\n"
         "    if answered is None:                 # note the key once the charge is safe\n"
         "        db.execute(\"INSERT INTO bank_requests VALUES (?, ?)\",\n"
         "                   (idempotency_key, response))\n")],
        hint="Look at where `bank_charge()` notes the key: what if the bank dies between "
             "the charge and the note?",
        stops_at=("test_ex08_a_bank_that_dies_at_any_point_charges_once_when_the_key_comes_again",)),

    Mistake("ex08_idempotency.py", "no transaction around the lookup, the charge and the key", [
        ('    db.execute("BEGIN IMMEDIATE")\n', ""),
        ('    db.execute("COMMIT")\n', "")],
        hint="Look at `bank_charge()`: what stops two requests with the same key from "
             "both finding it new?",
        stops_at=("test_ex08_the_bank_charges_once_when_one_key_arrives_twice_at_once",)),

    Mistake("ex09_charge_worker.py", "start_next takes back a running operation whatever its lease", [
        ("        WHERE tenant = :tenant AND state = 'running' AND locked_until < :now\n",
         "        WHERE tenant = :tenant AND state = 'running'\n")],
        hint="Look at the first `UPDATE` in `start_next()`: which running operations "
             "does it take back as lost?",
        stops_at=("python3 ex09_charge_worker.py admission",)),

    # Too little: the record says charged before anything was paid.
    Mistake("ex09_charge_worker.py", "marked charged before the provider is called", [
        ("    # 3. Charge, with the operation's id as the key. A no is an answer too.\n",
         "    db.execute(\"UPDATE operations SET state = 'charged' WHERE id = ?\", (op_id,))\n"
         "    # 3. Charge, with the operation's id as the key. A no is an answer too.\n")],
        hint="Look at when `process()` marks the operation `charged`: what if the worker "
             "dies before the provider is called?",
        stops_at=("python3 ex09_charge_worker.py o7",), verdict="ERROR"),

    Mistake("ex09_charge_worker.py", "COMMIT outside the try", [
        ("        yield\n        db.execute(\"COMMIT\")\n    except BaseException:\n"
         "        with contextlib.suppress(sqlite3.OperationalError):\n"
         "            db.execute(\"ROLLBACK\")          # unless nothing is left to undo\n"
         "        raise\n",
         "        yield\n    except BaseException:\n"
         "        with contextlib.suppress(sqlite3.OperationalError):\n"
         "            db.execute(\"ROLLBACK\")          # unless nothing is left to undo\n"
         "        raise\n    db.execute(\"COMMIT\")\n")],
        hint="Look at `transaction()`: if the `COMMIT` itself fails, what rolls the "
             "transaction back?",
        stops_at=("test_ex09_a_failed_commit_leaves_no_transaction_open",)),

    Mistake("ex09_charge_worker.py", "a transaction rolled back on Exception only, not on Ctrl-C", [
        ("    except BaseException:\n        with contextlib.suppress(sqlite3.OperationalError):",
         "    except Exception:\n        with contextlib.suppress(sqlite3.OperationalError):")],
        hint="Look at what `transaction()` catches: is Ctrl-C an `Exception`?",
        stops_at=("test_ex09_a_ctrl_c_inside_a_transaction_undoes_it",)),

    # The gate's check and its record in two steps: a cancel lands between.
    Mistake("ex09_charge_worker.py", "the gate is not one transaction", [
        ("    with transaction(db):\n        asked = db.execute(",
         "    if True:\n        asked = db.execute(")],
        hint="Look at `go_ahead()`: is all it does one step, so that a refused start "
             "leaves no record and a cancel cannot land in the middle?",
        stops_at=("test_ex09_a_refusal_by_the_spend_budget_is_not_a_lost_worker",)),

    Mistake("ex09_charge_worker.py", "the gate does not check the start's fencing token", [
        ("\" AND state = 'running' AND starts = ?\",",
         "\" AND state = 'running' AND starts >= ?\",")],
        hint="Look at the first `SELECT` in `go_ahead()`: would a worker whose lease "
             "ran out, and whose operation another worker now holds, pass it?",
        stops_at=("test_ex09_a_start_that_lost_its_lease_records_spends_and_calls_nothing",)),

    Mistake("ex09_charge_worker.py", "every start spends the amount again", [
        ("(hour, op_id, hour)).rowcount:\n",
         "(hour, op_id, hour)).rowcount or True:\n")],
        hint="Look at when `go_ahead()` calls `spend()`: what does a second start of the "
             "same operation, in the same hour, spend?",
        stops_at=("test_ex09_the_spend_budget_counts_an_operation_once_however_often_it_starts",)),

    Mistake("ex09_charge_worker.py", "a spent retry budget gives up on the message", [
        ('                raise RetryLater(f"{failure}; "\n'
         '                                 "this worker\'s retry budget is spent")\n',
         '                break\n')],
        hint="Look at what `deliver()` does when the retry budget is spent: is the "
             "message at fault?",
        shows=r"^\+with a 10% retry budget: .*; [1-9]\d* given up after 5 tries",
        stops_at=("python3 ex09_charge_worker.py budget",)),

    Mistake("ex09_charge_worker.py", "the retry budget counts messages, not calls", [
        ("    if budget is not None:\n"
         "        budget.request()                    # one more call to the provider\n",
         ""),
        ("    for attempt in range(attempts):\n        time_left = ",
         "    if budget is not None:\n        budget.request()\n"
         "    for attempt in range(attempts):\n        time_left = ")],
        hint="Look at where `budget.request()` is called: does it count every call to "
             "the provider, and nothing else?",
        shows=r"^\+with a 10% retry budget: 110 calls",
        stops_at=("python3 ex09_charge_worker.py budget",)),

    Mistake("ex09_charge_worker.py", "no safe point: a cancel request is never checked", [
        ("        if asked[0]:", "        if False:")],
        hint="Look at `go_ahead()`: does it ever stop an operation whose client asked "
             "to cancel?",
        shows=r"^\+the worker takes P4 to its gate, before any call: done",
        stops_at=("python3 ex09_charge_worker.py cancel",)),

    Mistake("ex09_charge_worker.py", "a put-back operation keeps no reason", [
        ('f"{error}; put back to try again"', "None")],
        hint="Look at how `see_through()` puts an operation back: what will a person, "
             "or its client, read in `last_error`?",
        shows=r"^\+status of P3: waiting, charge unknown$",
        stops_at=("python3 ex09_charge_worker.py cancel",)),

    Mistake("ex09_charge_worker.py", "put-back waits that never grow", [
        ('    ceiling = min(PUT_BACK_CAP, PUT_BACK_BASE * 2 ** message["start"])\n'
         "    wait = rng.uniform(0, ceiling)\n",
         "    wait = PUT_BACK_BASE\n")],
        hint="Look at how long `see_through()` puts an operation back for: does the wait "
             "grow with each start, with jitter?",
        stops_at=("python3 ex09_charge_worker.py outage",)),

    Mistake("ex09_charge_worker.py", "Ctrl-C marks an in-flight payment dead", [
        ("    except Exception as error:          # a bug, for a person",
         "    except BaseException as error:          # a bug, for a person")],
        hint="Look at what `see_through()` catches: should a Ctrl-C, or a deploy's "
             "SIGTERM, end a payment that may have been charged?",
        stops_at=("test_ex09_a_worker_stopped_mid_call_leaves_the_operation_to_its_lease",)),

    Mistake("ex09_charge_worker.py", "a busy database ends a payment dead", [
        ("    except sqlite3.OperationalError:    # a busy database: not its fault\n"
         "        raise                           # either; as on Ctrl-C, the lease ends\n", "")],
        hint="Look at what `see_through()` does when the database is locked: is that "
             "the payment's fault, and may it have been charged?",
        stops_at=("test_ex09_a_busy_database_leaves_a_paid_operation_to_its_lease",)),

    Mistake("ex09_charge_worker.py", "the reconciler ends an operation a late worker can still pay", [
        ("'started'\"\n            \" AND charge_id IS ?\",  # the charge it asked about, or none\n",
         "'started'\",\n"),
        ("(\"charged\" if answer == \"paid\" else \"failed\", op_id, charge_id))",
         "(\"charged\" if answer == \"paid\" else \"failed\", op_id))")],
        hint="Look at the `UPDATE` that closes an operation's record in `settle()`: what "
             "if a worker that stalled past its lease stored a charge since `settle()` looked?",
        stops_at=("test_ex09_a_charge_stored_while_the_reconciler_looks_is_not_lost",)),

    Mistake("ex09_charge_worker.py", "an amount checked against its top only", [
        ("    if type(amount) is not int or not 0 < amount <= MAX_CENTS:\n",
         "    if amount > MAX_CENTS:\n")],
        hint="Look at how `admit()` checks `amount_cents`: what does it do with a "
             "negative amount, or one that is not whole cents?",
        stops_at=("test_ex09_an_amount_out_of_bounds_is_refused_at_admission",)),

    Mistake("ex09_charge_worker.py", "finish without the fencing token", [
        ("\" WHERE id = ? AND state = 'running' AND starts = ?\",\n"
         "               (state, why, not_before, message[\"id\"], message[\"start\"]))",
         "\" WHERE id = ? AND state = 'running'\",\n"
         "               (state, why, not_before, message[\"id\"]))")],
        hint="Look at the `WHERE` in `finish()`: can a worker whose lease ran out still "
             "end the operation?",
        stops_at=("test_ex09_a_worker_whose_lease_ran_out_cannot_end_the_operation",)),

    # No transcript and no earlier test shows it.
    Mistake("ex09_charge_worker.py", "admission counts, then inserts, in two statements", [
        ('    db.execute("""\n'
         '        INSERT INTO work (id, tenant, inputs, state, expires_at)\n'
         "        SELECT ?, ?, ?, 'waiting', ?\n"
         "        WHERE (SELECT count(*) FROM work\n"
         "               WHERE tenant = ? AND state = 'waiting') < ?\n"
         '        ON CONFLICT (id) DO NOTHING\n'
         '    """, (op_id, tenant, json.dumps(inputs), clock() + EXPIRE_SECONDS,\n'
         '          tenant, MAX_WAITING))\n',
         "    (waiting,) = db.execute(\"SELECT count(*) FROM work WHERE tenant = ? AND state = 'waiting'\",\n"
         '                            (tenant,)).fetchone()\n'
         '    if waiting < MAX_WAITING:\n'
         "        db.execute(\"INSERT INTO work (id, tenant, inputs, state, expires_at)\"\n"
         "                   \" VALUES (?, ?, ?, 'waiting', ?) ON CONFLICT (id) DO NOTHING\",\n"
         '                   (op_id, tenant, json.dumps(inputs), clock() + EXPIRE_SECONDS))\n')],
        hint="Look at how `admit()` counts the waiting operations and adds one: can two "
             "requests both see the last free slot?",
        stops_at=("test_ex09_two_requests_cannot_both_take_the_last_waiting_slot",)),

    # ---- Exercise 9's optional webhooks
    Mistake("ex09_webhooks.py", "the signature never checked", [
        ('    if not hmac.compare_digest(expected, fields.get("v1", "")):  # not ==\n',
         "    if False:\n")],
        hint="Look at `verify()`: what stops anyone who knows your address from posting "
             "an event?",
        shows=r"^\+.* evt_9 \(.*\): recorded",
        stops_at=("python3 ex09_webhooks.py",)),

    Mistake("ex09_webhooks.py", "a delivery of any age taken", [
        ('    if int(fields["t"]) < clock() - TOLERANCE_SECONDS:\n', "    if False:\n")],
        hint="Look at `verify()`: how old may a signed event be when it comes?",
        shows=r"^\+day 1 13:00  evt_1 .*: seen before",
        stops_at=("python3 ex09_webhooks.py",)),

    Mistake("ex09_webhooks.py", "the inbox written apart from the answer", [
        ("    with worker.transaction(db):\n        if not db.execute(\"INSERT INTO inbox",
         "    if True:\n        if not db.execute(\"INSERT INTO inbox")],
        hint="Look at `receive()`: if the answer cannot be recorded, is the event's id "
             "kept anyway, so that its next delivery is skipped?",
        stops_at=("test_webhooks_an_event_for_an_operation_not_known_yet_comes_again",)),

    Mistake("ex09_webhooks.py", "an event overwrites an answer already recorded", [
        ("\" WHERE id = ? AND state = 'started'\",\n        (state,",
         "\" WHERE id = ?\",\n        (state,")],
        hint="Look at the `UPDATE` in `apply()`: what does an event that comes late, or "
             "out of order, do to an answer already recorded?",
        shows=r"^\+day 1 12:00  evt_1 \(charge\.paid, North/W1\): recorded",
        stops_at=("python3 ex09_webhooks.py",)),

    # ---- the capstone: each file graded on its own
    Mistake("capstone/tinyq.py", "complete() without the token check", [
        ("run_at = coalesce(:run_at, run_at)\n        WHERE id = :id AND token = :token AND",
         "run_at = coalesce(:run_at, run_at)\n        WHERE id = :id AND")],
        hint="Look at the fence in `FINISH`: what stops a worker whose lease ran out "
             "from finishing the job?",
        stops_at=("test_queues_with_the_same_seed_still_fence_each_other",)),

    Mistake("capstone/tinyq.py", "a transaction rolled back on Exception only, not on Ctrl-C", [
        ("            self.db.execute(\"COMMIT\")\n        except BaseException:",
         "            self.db.execute(\"COMMIT\")\n        except Exception:")],
        hint="Look at what `transaction()` catches: is Ctrl-C an `Exception`?",
        stops_at=("test_a_ctrl_c_inside_a_transaction_undoes_it",)),

    Mistake("capstone/tinyq.py", "a claim that takes a running job whatever its lease", [
        ("             WHERE status = 'running' AND locked_until < :now\n",
         "             WHERE status = 'running'\n")],
        hint="Look at the first subquery of `CLAIM`: which running jobs may it take?",
        shows=r"is None\n.*= claim\(\)",
        stops_at=("test_a_claim_is_a_lease",)),

    Mistake("capstone/tinyq.py", "a claim that serves queued jobs before a dead worker's job", [
        ("""\
            (SELECT id FROM jobs
             WHERE status = 'running' AND locked_until < :now
             ORDER BY locked_until LIMIT 1),
            (SELECT id FROM jobs
             WHERE status = 'queued' AND run_at <= :now
             ORDER BY run_at, id LIMIT 1))""", """\
            (SELECT id FROM jobs
             WHERE status = 'queued' AND run_at <= :now
             ORDER BY run_at, id LIMIT 1),
            (SELECT id FROM jobs
             WHERE status = 'running' AND locked_until < :now
             ORDER BY locked_until LIMIT 1))""")],
        hint="Look at the order of the two subqueries in `CLAIM`: which job does a "
             "worker get first?",
        stops_at=("test_a_poison_job_does_not_keep_other_due_jobs_waiting",)),

    Mistake("capstone/tinyq.py", "a token that is not raised at each claim", [
        ("                        token = token + 1, locked_until = :now + :lease\n",
         "                        locked_until = :now + :lease\n")],
        hint="Look at what `CLAIM` does to the job's `token`: does each claim hold a "
             "larger one than the claims before it?",
        shows=r"\.token\b",
        stops_at=("test_a_claim_is_a_lease",)),

    Mistake("capstone/tinyq.py", "no burying: a job that kills its worker is claimed for ever", [
        ("            db.execute(self.BURY, values)\n", "")],
        hint="Look at what `claim()` runs before it claims: what becomes of a job whose "
             "last attempt's lease ran out?",
        stops_at=("test_a_job_whose_worker_dies_every_time_goes_dead",)),

    Mistake("capstone/tinyq.py", "one attempt too many before a failing job is dead", [
        ("or job.attempts >= self.max_attempts:", "or job.attempts > self.max_attempts:")],
        hint="Look at how `fail()` compares `job.attempts` with `max_attempts`.",
        stops_at=("test_a_job_dies_after_max_attempts",)),

    Mistake("capstone/tinyq.py", "a permanent failure retried like any other", [
        ("if isinstance(error, Permanent) or job.attempts", "if job.attempts")],
        hint="Look at what `fail()` does with a `Permanent` error.",
        stops_at=("test_a_permanent_failure_is_dead_at_once",)),

    Mistake("capstone/tinyq.py", "a backoff without jitter: every retry waits the whole ceiling", [
        ("wait = self.rng.uniform(0, limit)", "wait = limit")],
        hint="Look at the wait `fail()` picks before a retry: where is the jitter?",
        stops_at=("test_the_backoff_is_full_jitter_below_the_ceiling",)),

    # (capstone/world_given.py is given, not typed, so never graded: the
    # key that binds its inputs and the reply lost after the effect are held
    # on code/'s copy by tests/capstone/test_world_given.py.)
    Mistake("capstone/shop.py", "points awarded outside the job's transaction", [('''\
        with job.complete() as db:
            db.execute(ADD_POINTS, (POINTS, job.args["customer"]))
            maybe_crash(job, "inside the transaction, before the commit")''', '''\
        queue.db.execute(ADD_POINTS, (POINTS, job.args["customer"]))
        maybe_crash(job, "after the points, before the ack")''')],
        hint="Look at where `loyalty_points()` adds the points: do they commit together "
             "with the job's `done`?",
        shows=r"holds (?!10 points)\d+ points",
        stops_at=("test_the_audit_passes_under_chaos",)),

    Mistake("capstone/shop.py", "an email key that changes with every attempt", [
        ("key=f\"welcome-{job.args['customer']}\")", "key=f\"welcome-{job.args['customer']}-{job.attempts}\")")],
        hint="Look at the key `welcome_email()` hands the mail server: is it the same "
             "at every attempt?",
        shows=r"got (?!1 welcome)\d+ welcome emails",
        stops_at=("test_the_audit_passes_under_chaos",)),

    Mistake("capstone/shop.py", "a key the bank refuses, retried as if the network lost it", [
        ("""\
        except KeyReused as error:
            raise tinyq.Permanent(error) from error
        maybe_crash(job, "after the charge, before the ack")""", """\
        except KeyReused as error:
            raise
        maybe_crash(job, "after the charge, before the ack")""")],
        hint="Look at what `signup_fee()` does when the bank answers `KeyReused`: "
             "would trying again ever help?",
        stops_at=("test_a_key_reused_with_other_inputs_is_dead_after_one_claim",)),

    Mistake("capstone/shop.py", "an email without UNIQUE: a double-clicked signup makes two customers", [
        ("    email   TEXT NOT NULL UNIQUE,", "    email   TEXT NOT NULL,")],
        hint="Look at the `customers` table in `CUSTOMERS`: what stops one address from "
             "signing up twice?",
        stops_at=("test_a_double_clicked_signup_makes_one_customer_and_three_jobs",)),

    Mistake("capstone/shop.py", "a fee key made from the claim's token", [
        ("key=f\"fee-{job.args['customer']}\")", "key=f\"fee-{job.token}\")")],
        hint="Look at the key `signup_fee()` hands the bank: is it the same when the "
             "job is claimed again?",
        shows=r"paid \$(?!5\.00)\d+\.\d\d",
        stops_at=("test_the_audit_passes_under_chaos",)),

    Mistake("capstone/shop.py", "a signup of separate statements instead of one transaction", [
        ("    with queue.transaction() as db:\n        (customer,) = db.execute(",
         "    if True:\n        db = queue.db\n        (customer,) = db.execute(")],
        hint="Look at `signup()`: do the customer and their three jobs commit together?",
        stops_at=("test_a_signup_that_fails_halfway_leaves_no_customer_and_no_job",)),

    Mistake("capstone/chaos.py", "an audit that looks only for duplicates, never for what is missing", [
        ("            elif got != owed:", "            elif got > owed:")],
        hint="Look at how `audit()` compares what a customer got with what a done job "
             "owes: is a missing effect a problem?",
        stops_at=("test_the_audit_fails_on_too_little_as_well_as_too_much",)),

    Mistake("capstone/chaos.py", "an idle worker that sleeps instead of calling the queue's wait()", [
        ("        queue.wait(POLL_SECONDS)", "        time.sleep(POLL_SECONDS)")],
        hint="Look at how `work()` waits when no job is due yet.",
        stops_at=("test_an_idle_worker_waits_in_the_queues_wait",)),

    Mistake("capstone/chaos.py", "a worker that quits when no job is due, leaving retries behind", [
        ('''        counts = queue.counts()
        if counts["queued"] + counts["running"] == 0:
            return''', '''        return''')],
        hint="Look at when `work()` returns: what about the jobs still waiting for "
             "their backoff?",
        stops_at=("python3 chaos.py --seed 1",)),
]
