"""The course's own code, which the simulations drive, loaded from its file.

The simulations run what learners run: code/capstone/tinyq.py,
code/ex05_two_workers.py, code/ex09_charge_worker.py. code/ sits two
folders above this file, in the repository and in course.zip alike, so an
engine names the file it drives and gets its module:

    from .. import course
    tinyq = course.module("capstone/tinyq.py")

Loaded by its path, not looked for on sys.path: nothing has to put code/ on
the path first, and a file of the same name elsewhere (a learner's
tinyq.py) is never taken instead. Each file is loaded once, and its
`if __name__ == "__main__":` part does not run.

An engine that sets a module's constants, as a reader does in a Study
Drill (`LOST_REPLY = 0`), asks for a copy of its own with `fresh`, so that
one run's settings never leak into another run, or into another engine.
"""
import importlib.util
from pathlib import Path

CODE = Path(__file__).resolve().parents[2] / "code"
loaded = {}                     # path inside code/ -> its module


def module(path):
    """The module in code/PATH (a path like "capstone/tinyq.py"), loaded
    once and shared."""
    if path not in loaded:
        loaded[path] = fresh(path)
    return loaded[path]


def fresh(path):
    """A new copy of the module in code/PATH, shared with no one: its
    constants (module globals) can be set without changing anyone else's."""
    spec = importlib.util.spec_from_file_location(Path(path).stem, CODE / path)
    made = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(made)
    return made
