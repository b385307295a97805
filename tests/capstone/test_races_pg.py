"""capstone/races_pg.py: chapter 12's races, on the private PostgreSQL
server of conftest.py. Its output is held line by line: these are the facts
the chapter states about PostgreSQL."""
import subprocess
import sys

import pytest

from tests.helpers import require
from tools import course

pytestmark = pytest.mark.exercise("capstone/races_pg.py")


@pytest.fixture
def run(source_folder):
    """Run the folder under test's races_pg.py with these arguments."""
    program = require(source_folder, "capstone/races_pg.py")
    return lambda *args: subprocess.run([sys.executable, str(program), *args],
                                        capture_output=True, text=True, timeout=60)


def test_the_races_come_out_as_chapter_11_says(run, postgresql):
    result = run(postgresql)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "Claims: jobs 1, 2 and 3 are queued. A claims and keeps its transaction open; B claims.",
        "  without FOR UPDATE       A: job 1   B: job 1, after waiting for A"
        "   <- one job, two workers",
        "  FOR UPDATE               A: job 1   B: job 2, after waiting for A",
        "  FOR UPDATE SKIP LOCKED   A: job 1   B: job 2, at once",
        "",
        "Admission: North has 4 operations waiting and may have 5. A and B each ask for"
        " one more.",
        "  one statement                 A: admitted   B: admitted, at once",
        "                                6 waiting   <- over the limit",
        "  a row per tenant first        A: admitted   B: refused, after waiting for A",
        "                                5 waiting",
        "  one statement, SERIALIZABLE   A: admitted   B: could not serialize; again: refused",
        "                                5 waiting",
    ]


def test_it_leaves_no_table_behind(run, postgresql):
    import psycopg
    assert run(postgresql).returncode == 0
    with psycopg.connect(postgresql) as db:
        assert db.execute("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'race_%'"
                          ).fetchone() == (0,)


def test_without_an_address_it_says_how_to_run_it(run):
    result = run()
    assert result.returncode != 0
    assert result.stderr == "usage: python3 races_pg.py postgresql://HOST/DATABASE\n"


def test_a_server_it_cannot_reach_is_named_in_one_line(run, tmp_path):
    nowhere = f"host={tmp_path} dbname=scratch"      # no server listens there
    result = run(nowhere)
    assert result.returncode == 1
    assert result.stderr.startswith(f"cannot connect to {nowhere}: ")
    assert "Traceback" not in result.stderr


def test_a_transaction_tried_again_keeps_its_isolation_level(source_folder, postgresql):
    """SERIALIZABLE's second try is SERIALIZABLE too, not the server's default."""
    import psycopg
    races_pg = course.load(require(source_folder, "capstone/races_pg.py"))
    with psycopg.connect(postgresql, autocommit=True) as admin:
        admin.execute("CREATE TABLE race_work (id text PRIMARY KEY, tenant text NOT NULL);"
                      "INSERT INTO race_work SELECT 'N' || n, 'North'"
                      " FROM generate_series(1, 4) AS n")
    levels = []

    def admit(db, worker):
        levels.append((worker, db.execute("SHOW transaction_isolation").fetchone()[0]))
        return races_pg.admit(db, worker)

    got = races_pg.a_then_b(postgresql, admit, "SERIALIZABLE")
    assert got["B"] == "could not serialize; again: refused"
    assert levels == [("A", "serializable"), ("B", "serializable"), ("B", "serializable")]
