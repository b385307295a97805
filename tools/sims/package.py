"""The simulations' part of the site, as the build lays it out: their page
code and styles, Pyodide, the course's Python as one zip, and a standard
library trimmed to what they import. tools/build.py calls these; they know
nothing of the build, and a problem is a PackagingError, which the build
reports as its own."""
import hashlib
import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

from .api import engines

SIMS = Path(__file__).resolve().parent      # one folder each, and what they share
ROOT = SIMS.parent.parent
PYODIDE = ROOT / "node_modules" / "pyodide"
# What the browser needs of Pyodide: the loader, the interpreter, its standard
# library, the package index it reads at boot, and the licence.
PYODIDE_FILES = ["pyodide.mjs", "pyodide.asm.mjs", "pyodide.asm.wasm", "python_stdlib.zip",
                 "pyodide-lock.json", "package.json"]
# The simulations' standard library, trimmed and precompiled by Pyodide under
# Node (tools/sims/stdlib.py), is kept here between builds, by its inputs.
STDLIB_CACHE = ROOT / "node_modules" / ".cache" / "course-stdlib"
STDLIB_MAKER = ROOT / "tools" / "stdlib.mjs"
PAGE_FILES = (".js", ".mjs", ".css")


class PackagingError(Exception):
    pass


def copy_sim_pages(folder):
    """The simulations' page code and styles, laid out as in tools/sims/: the
    shared modules at the top, each view and its styles in its folder."""
    for source in sorted(SIMS.rglob("*")):
        if source.suffix in PAGE_FILES:
            target = folder / source.relative_to(SIMS)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def copy_pyodide(folder):
    """Pyodide, from the npm package, so the site needs no CDN. Hard links
    when they can be made: the interpreter is 13 MB."""
    missing = [name for name in PYODIDE_FILES if not (PYODIDE / name).is_file()]
    if missing:
        raise PackagingError(f"{PYODIDE.relative_to(ROOT)} lacks {', '.join(missing)}: "
                             "run `npm ci` (make site does) to install Pyodide")
    folder.mkdir()
    for name in PYODIDE_FILES:
        try:
            (folder / name).hardlink_to(PYODIDE / name)
        except OSError:
            shutil.copy2(PYODIDE / name, folder / name)


def course_python():
    """The .py files that the browser runs: the package tools' own
    __init__.py and course.py (which loads code/), tools/sims and code/; not
    Python's caches, nor the simulations' tests and this packing."""
    tools = ROOT / "tools"
    return sorted([tools / "__init__.py", tools / "course.py", *(
        file for folder in (SIMS, ROOT / "code") for file in folder.rglob("*.py")
        if "__pycache__" not in file.parts and not runs_only_here(file))])


def runs_only_here(file):
    return file.parent.is_relative_to(SIMS) and (file.name.startswith("test_")
                                                  or file == SIMS / "package.py")


def make_stdlib():
    """The path of the simulations' standard library: Pyodide's, trimmed to
    what they import and precompiled (tools/sims/stdlib.py), made by
    tools/stdlib.mjs unless a build has made it from the same inputs."""
    inputs = hashlib.sha256()
    for source in [PYODIDE / "python_stdlib.zip", PYODIDE / "package.json", STDLIB_MAKER,
                   *course_python()]:
        inputs.update(source.relative_to(ROOT).as_posix().encode() + b"\0" + source.read_bytes())
    made = STDLIB_CACHE / f"{inputs.hexdigest()[:16]}.zip"
    if not made.is_file():
        run_stdlib_maker(made)
    return made


def run_stdlib_maker(made):
    node = shutil.which("node")
    if node is None:
        raise PackagingError("node is missing: install Node.js 18 or later (it comes with "
                             "npm, which installs Pyodide)")
    STDLIB_CACHE.mkdir(parents=True, exist_ok=True)
    partial = made.with_suffix(f".{os.getpid()}.partial")
    try:
        result = subprocess.run([node, str(STDLIB_MAKER), str(partial)],
                                capture_output=True, text=True)
        if result.returncode != 0 or result.stderr.strip():
            raise PackagingError(f"{STDLIB_MAKER.name} failed:\n{result.stderr.strip()}")
        partial.chmod(0o644)         # Pyodide's files are written for everyone
        partial.replace(made)        # whole or not at all, even with two builds at once
    finally:
        partial.unlink(missing_ok=True)
    for old in sorted(STDLIB_CACHE.glob("*.zip"), key=lambda file: file.stat().st_mtime)[:-10]:
        old.unlink(missing_ok=True)  # the ten newest are enough to go back and forth


def write_sim_archive(path):
    """The simulations' Python and the course code they drive, as one zip
    unpacked in the browser. Laid out as in the repository (tools/sims/,
    code/), so an engine finds code/ where it does here. Fixed timestamps,
    so the same sources always give the same bytes."""
    files = course_python()
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for source in files:
            archive.writestr(zipfile.ZipInfo(source.relative_to(ROOT).as_posix(),
                                             date_time=(2026, 1, 1, 0, 0, 0)),
                             source.read_bytes())


def write_first_pictures(folder, package=__package__):
    """Each simulation's first state, as its page makes it, in its folder as
    first.json: {"options": what the page makes it with, "state": its
    state()}. The view draws it as the page loads, so the reader sees the
    system before any Python is downloaded; Start makes the same engine in
    the browser, with the same options."""
    for name, engine in engines(package).items():
        options = engine.PAGE_STARTS_WITH
        try:
            made = engine(**options)
            try:
                first = {"options": options, "state": made.state()}
            finally:
                made.close()
            text = json.dumps(first, separators=(",", ":"))
        except Exception as error:
            raise PackagingError(f"the {name} simulation's first state could not be made "
                                 f"with {options}: {type(error).__name__}: {error}") from error
        target = folder / name.replace("-", "_") / "first.json"    # its folder's name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def python_download(staging):
    """What starting a simulation downloads, in bytes, for the Start control
    and the progress bar: Pyodide (all but its licence, and its standard
    library, which only a module missing from ours fetches) and the course's
    code and standard library."""
    files = [staging / "pyodide" / name for name in PYODIDE_FILES
             if name not in ("package.json", "python_stdlib.zip")]
    files += [staging / "static" / "sims" / name for name in ("course.zip", "stdlib.zip")]
    return sum(file.stat().st_size for file in files)
