"""The course's interactive simulations, one folder each.

A simulation's folder holds its engine (engine.py: plain Python on a virtual
clock, no threads, no sleeping, no wall-clock reads) and its view (view.js:
what the page draws). Its name, as the guide's `::: {.sim name="..."}` and
the page spell it, is its folder's with hyphens for underscores: folder
killable_queue is "killable-queue". Beside the folders is what they share:
api.py, the one function the page calls (through Pyodide), and the page's
own modules (sims.js, runtime.js, worker.mjs, dom.js).

Every list of simulations (the guide's check, the API, the build) comes
from folders(), so adding a simulation is adding a folder.

Engines drive the course's own code, loaded from its file by course.py.
Run one in a terminal, from the course's folder (__main__.py):

    python3 -m tools.sims killable-queue   workers, leases and a kill (Chapters 4-5)
    python3 -m tools.sims race             two claims, one statement at a time (Chapter 4)
    python3 -m tools.sims crash-timing     every crash moment against every protection (5-8)
    python3 -m tools.sims payment          the flaky bank, retries and keys (6-8)
    python3 -m tools.sims o7               Chapter 10's O7, step by step
    python3 -m tools.sims herd             a thundering herd, and the jitter that breaks it (6)
    python3 -m tools.sims retry-budget     retries that multiply an outage, and a budget (10)
"""
from pathlib import Path

HERE = Path(__file__).resolve().parent


def folders():
    """Each simulation's name and its folder: every folder here with an
    engine.py, named as its folder with hyphens for underscores."""
    return {path.name.replace("_", "-"): path
            for path in sorted(HERE.iterdir()) if (path / "engine.py").is_file()}
