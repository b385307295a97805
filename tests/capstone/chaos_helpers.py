"""What the tests that run chaos.py share (test_chaos.py, test_shop.py and,
on PostgreSQL, test_chaos_pg.py): one run, or one per seed side by side,
each in its own copy of the folder with its own virtual clock, and readers
of the audit's output."""

import concurrent.futures
import contextlib
import os
import re
import sqlite3

from tools.harness import sandbox
from tests.helpers import fresh_copy, new_database

SEEDS = range(1, 21)
TIMEWARP = 10                    # a 0.5 s lease is 50 ms; a job takes a few
# Runs at once. A run spends most of its time waiting for leases and
# backoffs (about a second of wall time for a sixth of a second of CPU),
# so eight at once keep two cores busy without crowding them.
SIDE_BY_SIDE = 8


def run_chaos(folder, options, env="", timewarp=TIMEWARP, claims_capped=True,
              timeout=sandbox.COMMAND_TIMEOUT, server=None, time_limit=None):
    """(exit status, output) of one chaos.py run in a copy of folder. Unless
    told otherwise, it also proves that no job was claimed more than
    MAX_ATTEMPTS times. With a server (a PostgreSQL fixture of
    test_chaos_pg.py), chaos_pg.py runs it with the shop on a new database
    of its own there. A time_limit replaces the given supervisor's 60 s in
    the copy (a given file always comes from code/, so only the copy can
    have another)."""
    with fresh_copy(folder) as copy, contextlib.ExitStack() as stack:
        if time_limit is not None:
            sandbox.apply_edit(copy, "capstone/world_given.py", "TIME_LIMIT_SECONDS = 60",
                               f"TIME_LIMIT_SECONDS = {time_limit}")
        database, program = None, "chaos.py"
        if server:
            database, program = stack.enter_context(new_database(server.address)), "chaos_pg.py"
            env = (f'PYTHONPATH="$PYTHONPATH{os.pathsep}{server.packages}"'
                   f" DATABASE='{database}' {env}")
        status, output = sandbox.run(f"{env} python3 {program} {options}", copy / "capstone",
                                     timewarp=timewarp, timeout=timeout,
                                     clock=sandbox.new_clock(copy.parent / "clock"))
        if claims_capped:
            claims_within_the_limit(copy / "capstone", output, database)
        return status, output


def claims_within_the_limit(capstone_folder, output, database=None):
    limit = int(re.search(r"^MAX_ATTEMPTS = (\d+)", (capstone_folder / "shop.py").read_text(),
                          re.M)[1])
    if database:
        import psycopg
        with psycopg.connect(database) as db:
            (most,) = db.execute("SELECT max(attempts) FROM jobs").fetchone()
    elif (capstone_folder / "shop.db").exists():
        db = sqlite3.connect(capstone_folder / "shop.db")
        try:
            (most,) = db.execute("SELECT max(attempts) FROM jobs").fetchone()
        finally:
            db.close()
    else:
        return
    assert (most or 0) <= limit, f"a job was claimed {most} times; MAX_ATTEMPTS is {limit}\n{output}"


def side_by_side(folder, many_options, env="", timewarp=TIMEWARP, server=None):
    """[(exit status, output)] of run_chaos with each of many_options, in
    their order, SIDE_BY_SIDE runs at a time."""
    with concurrent.futures.ThreadPoolExecutor(SIDE_BY_SIDE) as pool:
        return list(pool.map(lambda options: run_chaos(folder, options, env, timewarp,
                                                       server=server), many_options))


def chaos_by_seed(folder, options="", env="", seeds=SEEDS, timewarp=TIMEWARP, server=None):
    """{seed: (exit status, output)} of `chaos.py --seed N OPTIONS` for each seed."""
    runs = side_by_side(folder, [f"--seed {seed} {options}" for seed in seeds], env, timewarp,
                        server)
    return dict(zip(seeds, runs))


def problems(output):
    """The audit's lines after AUDIT FAILED (and before any parked jobs)."""
    failed = output.partition("AUDIT FAILED")[2].partition("parked for a person")[0]
    return re.findall(r"^  (.*)$", failed, re.M)


# One worker at a time: a worker that a busy machine slows past its lease
# then has no rival to lose its job to, so a run's crashes, retries and
# duplicates follow from its seed alone, however loaded the machine is.
ONE_WORKER = "--workers 1"


def passed_for_every_seed(runs):
    failed = {seed: output for seed, (status, output) in runs.items()
              if status != 0 or "AUDIT PASSED: 20 customers" not in output}
    assert not failed, failed
    crashes = [int(re.search(r"worker crashes: (\d+)", output)[1]) for _, output in runs.values()]
    assert min(crashes) > 0, crashes                 # the monkey did bite, every time


def absorbed(output):
    """(emails, charges): the duplicates the keys absorbed in a run."""
    emails, charges = re.search(r"absorbed by keys: (\d+) emails?, (\d+) charges?", output).groups()
    return int(emails), int(charges)


def check_without_keys(keyed, keyless):
    """Every keyless run fails on emails or charges, never on points, with
    exactly the duplicates its seed's keyed run absorbed."""
    for seed, (status, output) in keyless.items():
        assert status == 1 and absorbed(output) == (0, 0), output
        extra_emails = extra_charges = 0
        for problem in problems(output):
            emails = re.fullmatch(r"customer\d+@example.com got (\d+) welcome emails", problem)
            paid = re.fullmatch(r"customer\d+@example.com paid \$([\d.]+)", problem)
            assert emails or paid, (seed, output)
            if emails:
                extra_emails += int(emails[1]) - 1
            else:
                extra_charges += round(float(paid[1]) / 5) - 1
        assert (extra_emails, extra_charges) == absorbed(keyed[seed][1]), (seed, output)


def parked(output):
    """[(customer, what the audit says)], a pair for each dead job that left
    a customer waiting for a person."""
    return re.findall(r"^  (customer\d+@example.com): (.*)$",
                      output.partition("parked for a person")[2], re.M)


def dead_jobs(output):
    return int(re.search(r"^jobs: \d+ done, (\d+) dead", output, re.M)[1])
