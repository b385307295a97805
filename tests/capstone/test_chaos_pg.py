"""The capstone under fire on PostgreSQL: `chaos_pg.py` runs code/'s
chaos.py and shop.py on the folder under test's tinyq_pg.py,
each run on a new database of a private server. The audit passes as on
SQLite, Break It fails it as on SQLite, and a seed replays SQLite's run."""
import concurrent.futures
import dataclasses
import os
import re
from pathlib import Path

import pytest

from tools.harness import postgres, sandbox
from tests.capstone.chaos_helpers import (ONE_WORKER, SEEDS, absorbed, chaos_by_seed,
                                          check_without_keys, passed_for_every_seed, run_chaos)

pytestmark = pytest.mark.exercise("capstone/tinyq_pg.py")

# The optional lab's audits and Break It run 5 of the 20 seeds in make check
# (and a learner's check), all 20 in make soak and make mutations, which set
# ALL_LAB_SEEDS=1: each seed is a chaos run on a database of its own.
LAB_SEEDS = SEEDS if os.environ.get("ALL_LAB_SEEDS") else SEEDS[:5]


@dataclasses.dataclass
class Server:
    """Where chaos.py's runs make their databases, and psycopg for the
    sandbox's Python, which does not see the tests' virtualenv."""
    address: str
    packages: Path


@pytest.fixture(scope="module")
def server(postgresql_server, tmp_path_factory):
    return Server(postgresql_server,
                  postgres.reader_packages(tmp_path_factory.mktemp("psycopg") / "packages"))


def test_the_audit_passes_on_postgresql_under_chaos(folder, server):
    """The same crashes, lost requests and lost replies as on SQLite: for
    each seed, everyone gets one email, pays $5 and holds 10 points."""
    runs = chaos_by_seed(folder, seeds=LAB_SEEDS, server=server)
    passed_for_every_seed(runs)
    assert all(sum(absorbed(output)) > 0 for _, output in runs.values())


def test_the_audit_passes_on_postgresql_under_three_times_the_chaos(folder, server):
    passed_for_every_seed(chaos_by_seed(folder, "--chaos 0.3", seeds=LAB_SEEDS, server=server))


def test_without_keys_on_postgresql_every_absorbed_duplicate_becomes_real(folder, server):
    """Break It, on PostgreSQL: every seed fails the audit on emails or
    charges, never on points, by exactly the duplicates its keys absorbed."""
    keyed = chaos_by_seed(folder, ONE_WORKER, seeds=LAB_SEEDS, server=server)
    keyless = chaos_by_seed(folder, ONE_WORKER, env="TINYQ_NO_KEYS=1", seeds=LAB_SEEDS,
                            server=server)
    check_without_keys(keyed, keyless)


def test_a_seed_on_postgresql_replays_its_run_on_sqlite(folder, server):
    """The dice belong to the seed, the job's id and the attempt, and the
    jobs get the same ids on both databases: the same crashes, retries and
    absorbed duplicates, whichever database holds the queue."""
    sandbox.apply_edit(folder, "capstone/shop.py", "LEASE_SECONDS = 0.5", "LEASE_SECONDS = 5")

    def story(**where):
        status, output = run_chaos(folder, "--seed 7 --chaos 0.3", **where)
        assert status == 0, output
        # The monkey's lines come in the order the workers die: kept, sorted.
        return sorted(re.findall(r"^(?!finished in).*$", output, re.M))

    # Side by side: each run spends most of its time waiting out leases.
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        on_postgresql = pool.submit(story, server=server)
        on_sqlite = story()
    assert any(line.startswith("worker crashes: ") for line in on_sqlite), on_sqlite
    assert on_postgresql.result() == on_sqlite


def test_chaos_names_a_database_it_cannot_reach(folder, server, tmp_path):
    """A $DATABASE that no server answers is named, with psycopg's reason:
    no traceback, and exit status 2, as for every run that gives no verdict."""
    nowhere = postgres.address(tmp_path)
    status, output = sandbox.run(
        f'PYTHONPATH="$PYTHONPATH:{server.packages}" DATABASE="{nowhere}" python3 chaos_pg.py',
        folder / "capstone")
    assert status == 2, output
    assert f"\ncannot open {nowhere}: " in output and "Traceback" not in output, output


@pytest.mark.parametrize("start_method", ["spawn", "forkserver"])
def test_workers_started_afresh_get_the_lab_queue_too(folder, server, start_method):
    """chaos_pg.py makes its substitutions at the top of the file, so a
    worker process that imports it anew (Python's spawn, the default on
    macOS and Windows; forkserver, Linux's from Python 3.14) works on the
    server as a forked one does: the same story as seed 1 on SQLite."""
    sandbox.apply_edit(folder, "capstone/chaos_pg.py", 'if __name__ == "__main__":\n',
                       'if __name__ == "__main__":\n    import multiprocessing\n'
                       f'    multiprocessing.set_start_method("{start_method}")\n')
    # A worker started afresh imports chaos_pg and psycopg anew at each
    # restart, which the time warp cannot shorten: on a busy machine the run
    # passed the supervisor's 60 s (issue 47). The limit is not what this is about.
    status, output = run_chaos(folder, "--seed 1 --customers 4 --chaos 0.3", server=server,
                               timeout=4 * sandbox.COMMAND_TIMEOUT, time_limit=600)
    assert status == 0 and "AUDIT PASSED: 4 customers" in output, output
    assert "worker crashes: 0" not in output, output
