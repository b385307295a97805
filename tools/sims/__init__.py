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

On the page, sims.js turns each mount the build leaves (<div
class="sim-mount" data-sim="NAME">) into a first picture and a start
button. It fetches the simulation's view.js, view.css and first.json from
its folder as the page loads and, as the reader nears the mount, has the
view draw first.json's state: the engine's first state, which the build
computed with the options the page makes it with
(package.write_first_pictures). That picture is inert
until Start makes the same engine in Python, which then draws every state
(the mount's selector, MOUNTS, and the rule from a name to its folder,
folderOf, are each written once, there). Beside the button it says
what starting downloads: the build measures Pyodide, course.zip and
stdlib.zip (package.python_download) and puts the total, in bytes, in the
page's <meta name="sims-download">. While Python loads, a progress bar
counts the bytes received against that total: worker.mjs counts each body
Pyodide fetches as it streams in, and its two .mjs files from the worker's
resource timing, and tells the page. Python starts loading before the
click once the reader points at Start or tabs to it, or on the click
when the browser asks to save data; the note beside Start says which. Once a
simulation runs, its status line says what to try first and acknowledges
each task as it is done, naming the next (from the state's tasks).
runtime.js starts one module worker per page (worker.mjs: Pyodide from
site/pyodide/ with the trimmed standard library, then course.zip unpacked
into /course) and sends it requests with ids, giving up on a boot after
60 s; sims.js throws Python away when a call stays unanswered for 15 s. A
page's calls go to Python one at a time, in the order made, so a click
made while another call is in flight waits its turn, and Play (dom.js)
never starts a step while the last is unanswered; the mount's data-busy is
"true" while any call waits or runs.

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
