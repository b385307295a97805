"""What several test files share: a clock and dice that the test controls,
a fresh copy of the folder under test, a new PostgreSQL database, a learner's file imported as a
module, the simulations asked as the page asks them and the tasks their
states say are done, and the guide's words. Tests import it as
tests.helpers."""
import contextlib
import importlib.util
import json
import random
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from tools.harness import catalogue, sandbox
from tools.sims import api


class Clock:
    """A clock that only moves when the test says so: clock.now += 120."""

    def __init__(self, now=1000.0):
        self.now = now

    def __call__(self):
        return self.now


class TopOfRange(random.Random):
    """Dice that always roll the longest wait, so the ceiling shows."""

    def uniform(self, low, high):
        return high


def require(folder, name):
    """folder/name, the file a test checks; the test fails at once,
    saying so, if the folder under test lacks it."""
    path = Path(folder) / name
    if not path.is_file():
        pytest.fail(f"{name} is missing from {folder}")
    return path


@contextlib.contextmanager
def fresh_copy(folder, exercise=None):
    """A copy of folder's sources in a scratch folder of its own, as
    scratch/work, removed afterwards; scratch/ has room for more (a clock).
    With an exercise, the reference files with folder's copy of that one
    (sandbox.copy_sources)."""
    with tempfile.TemporaryDirectory(dir=sandbox.SCRATCH) as scratch:
        copy = Path(scratch) / "work"
        sandbox.copy_sources(folder, copy, exercise)
        yield copy


@contextlib.contextmanager
def new_database(server):
    """The address of a new, empty database on the PostgreSQL server at
    address `server` (tools/harness/postgres.py), dropped afterwards."""
    import psycopg                       # only the PostgreSQL lab's tests need it
    name = f"test_{uuid.uuid4().hex[:12]}"
    address = server.replace("///postgres?", f"///{name}?")
    assert address != server, f"no database name to replace in {server}"
    with psycopg.connect(server, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield address
    finally:
        with psycopg.connect(server, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


def import_learner_file(path, name):
    """The Python file at path (a learner's, or code/'s) as a module called
    name. The file is first imported once in a child process with limits
    (sandbox.import_fails): one that hangs or crashes on import fails the
    test with the reason instead of stopping the run."""
    problem = sandbox.import_fails(path)
    if problem:
        pytest.fail(problem)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def ask(sim, instance, method, args=None):
    """A simulation's answer to one call, made as the page makes it."""
    request = {"sim": sim, "instance": instance, "method": method}
    if args is not None:
        request["args"] = args
    return json.loads(api.call(json.dumps(request)))


def run_program(name, *args):
    """What `python3 -m tools.sims NAME ARGS` prints, run from the course's folder."""
    result = subprocess.run([sys.executable, "-m", "tools.sims", name, *args],
                            cwd=catalogue.ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def tasks(state):
    """{task id: done or not}, from a simulation's state."""
    return {task["id"]: task["done"] for task in state["tasks"]}


def earned(state):
    """The ids of the tasks a simulation's state says are done."""
    return {task for task, done in tasks(state).items() if done}


GUIDE = (catalogue.ROOT / "guide.md").read_text(encoding="utf-8")
PROSE = " ".join(GUIDE.split())          # the guide's words, however its lines wrap
