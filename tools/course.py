"""The course's own code, loaded from its file: the one way anything here
(the simulations, the tests, the benchmarks) turns a file of code/, or a
learner's copy of one, into a module.

The simulations run what learners run: code/capstone/tinyq.py,
code/ex05_two_workers.py, code/ex09_charge_worker.py, the given file
that replays it, code/ex09_practice_given.py, and the capstone's given
world, code/capstone/world_given.py. code/ sits one folder above this
file, in the repository and in course.zip alike, so a caller names the
file and gets its module:

    from tools import course
    tinyq = course.module("capstone/tinyq.py")

Loaded by its path, not looked for on sys.path: nothing has to put code/ on
the path first, and a file of the same name elsewhere (a learner's
tinyq.py) is never taken instead. Each file is loaded once, and its
`if __name__ == "__main__":` part does not run.

A caller that sets a module's constants, as a reader does in a Study
Drill (`LOST_REPLY = 0`), asks for a copy of its own with `fresh`, so that
one run's settings never leak into another run, or into another engine.

A file that imports another by name (a given file's `import
ex09_charge_worker as worker`, tinyq_pg's `import tinyq`) is handed the
module to use:

    ex09 = course.fresh("ex09_charge_worker.py")
    practice = course.fresh("ex09_practice_given.py", ex09_charge_worker=ex09)

`load` does the same for a file anywhere, a learner's copy included.
"""
import importlib.util
import sys
from pathlib import Path

CODE = Path(__file__).resolve().parents[1] / "code"
loaded = {}                     # path inside code/ -> its module


def module(path):
    """The module in code/PATH (a path like "capstone/tinyq.py"), loaded
    once and shared."""
    if path not in loaded:
        loaded[path] = fresh(path)
    return loaded[path]


def fresh(path, **imports):
    """A new copy of the module in code/PATH, shared with no one: its
    constants (module globals) can be set without changing anyone else's.
    IMPORTS are modules its own `import NAME` statements get, by NAME."""
    return load(CODE / path, **imports)


def load(file, name=None, **imports):
    """A new module made from the Python file at file, called name (the
    file's stem unless said). IMPORTS are modules its own `import NAME`
    statements get, by NAME, while it loads; sys.modules is as it was
    afterwards."""
    spec = importlib.util.spec_from_file_location(name or Path(file).stem, file)
    made = importlib.util.module_from_spec(spec)
    before = {each: sys.modules.get(each) for each in imports}
    sys.modules.update(imports)
    try:
        spec.loader.exec_module(made)
    finally:
        for each, previous in before.items():
            if previous is None:
                sys.modules.pop(each, None)
            else:
                sys.modules[each] = previous
    return made
