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
"""
import importlib.util
from pathlib import Path

CODE = Path(__file__).resolve().parents[2] / "code"
loaded = {}                     # path inside code/ -> its module


def module(path):
    """The module in code/PATH (a path like "capstone/tinyq.py")."""
    if path not in loaded:
        spec = importlib.util.spec_from_file_location(Path(path).stem, CODE / path)
        made = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(made)
        loaded[path] = made
    return loaded[path]
