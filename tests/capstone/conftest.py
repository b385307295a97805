"""The capstone suite's fixtures: one tinyq suite, two backends.

A test that asks for `tinyq` (or for a queue, which needs it) runs once per
backend. On SQLite it gets the folder under test's tinyq.py and is graded
for capstone/tinyq.py; on PostgreSQL it gets the folder under test's
tinyq_pg.py beside code/'s tinyq.py, a new database on the private server
(the root conftest's `postgresql`), and is graded for capstone/tinyq_pg.py.
Mark a test `sqlite_only` or `postgresql_only` to keep it on one backend.
"""
import random
import shutil
from pathlib import Path

import pytest

from tests.helpers import Clock, import_learner_file, require
from tools import course
from tools.harness import results, sandbox
from tools.harness.catalogue import CODE

TINYQ, TINYQ_PG = "capstone/tinyq.py", "capstone/tinyq_pg.py"
GRADED_FOR = {"sqlite": TINYQ, "postgresql": TINYQ_PG}
ONLY_ON = {"sqlite_only": "sqlite", "postgresql_only": "postgresql"}


def pytest_generate_tests(metafunc):
    """Every test that needs `backend` runs on each backend its marks allow,
    graded for that backend's file."""
    if "backend" not in metafunc.fixturenames:
        return
    only = [backend for mark, backend in ONLY_ON.items()
            if metafunc.definition.get_closest_marker(mark)]
    metafunc.parametrize("backend", [
        pytest.param(backend, marks=pytest.mark.exercise(GRADED_FOR[backend]))
        for backend in only or GRADED_FOR], indirect=True)


@pytest.fixture
def backend(request):
    """"sqlite" or "postgresql": the database this run of the test uses."""
    return request.param


@pytest.fixture
def tinyq(backend, source_folder, tmp_path, monkeypatch):
    """The library under test, imported afresh from copies in
    tmp_path/learner, with tmp_path as the current folder: tinyq on SQLite,
    tinyq_pg on PostgreSQL (its LeaseLost and Permanent are tinyq's)."""
    monkeypatch.chdir(tmp_path)
    learner = tmp_path / "learner"
    learner.mkdir()
    if backend == "sqlite":
        copy = shutil.copy(require(source_folder, TINYQ), learner)
        return import_learner_file(Path(copy), "tinyq")
    return import_tinyq_pg(require(source_folder, TINYQ_PG), learner)


def import_tinyq_pg(path, learner):
    """tinyq_pg from a copy of path, its `import tinyq` given code/'s tinyq.py,
    a copy of which stands beside it for the programs a test runs there."""
    shutil.copy(CODE / TINYQ, learner)
    copy = shutil.copy(path, learner)
    # Imported here, not first in a sandboxed child as other learner files
    # are: the child's Python lacks psycopg. A hang is stopped by pytest's timeout.
    try:
        return course.load(copy, "tinyq_pg", tinyq=course.fresh(TINYQ))
    except Exception as error:
        pytest.fail(sandbox.Failure(None, "tinyq_pg.py crashed when imported",
                                    f"{type(error).__name__}: {error}", kind=results.ERROR))


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def database(backend, request, tmp_path):
    """Where the queues keep their jobs: a SQLite file, or a new, empty
    PostgreSQL database, dropped after the test."""
    if backend == "postgresql":
        return request.getfixturevalue("postgresql")
    return tmp_path / "jobs.db"


@pytest.fixture
def make_queue(tinyq, database, clock):
    """Queue objects on one database, closed after the test."""
    queues = []

    def make(seed=1, **options):
        options.setdefault("rng", random.Random(seed))
        queue = tinyq.Queue(database, clock=clock, **options)
        queues.append(queue)
        return queue

    yield make
    for queue in queues:
        queue.close()


@pytest.fixture
def queue(make_queue):
    return make_queue()

