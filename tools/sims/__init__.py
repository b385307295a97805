"""The course's interactive simulations, one folder each.

A simulation's folder holds its engine (engine.py: plain Python on a virtual
clock, no threads, no sleeping, no wall-clock reads, on the base class of
engine.py), its view (view.js: what the page draws) with its styles
(view.css), and its tests (test_engine.py; test_page.py, with the moves the
shared page tests make). Its name, as the guide's `::: {.sim name="..."}`
and the page spell it, is its folder's with hyphens for underscores: folder
killable_queue is "killable-queue". Beside the folders is what they share:
engine.py, the contract every engine keeps; api.py, the one function the
page calls (through Pyodide); the page's own modules (sims.js, runtime.js,
worker.mjs, dom.js, picture.js); and package.py, which lays them out in the
site.

Every list of simulations (the guide's check, the API, the build, the
tests) comes from folders(), so adding a simulation is adding a folder.

Engines drive the course's own code, loaded from its file by tools/course.py.
Run one in a terminal, from the course's folder (__main__.py), or list
them all:

    python3 -m tools.sims race --jobs 2
    python3 -m tools.sims
"""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def folders(root=HERE):
    """Each simulation's name and its folder: every folder of root (this
    one, unless another is given) with an engine.py, named as its folder
    with hyphens for underscores."""
    return {path.name.replace("_", "-"): path
            for path in sorted(root.iterdir()) if (path / "engine.py").is_file()}
