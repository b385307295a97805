#!/usr/bin/env python3
"""Check your exercise: run this from the folder where you type them.

    python3 ~/jobs-course/check.py              the file you changed last
    python3 ~/jobs-course/check.py ex05         that exercise
    python3 ~/jobs-course/check.py --watch      again each time you save it
    python3 ~/jobs-course/check.py --help       everything else

It runs the guide's transcripts and the tests of one exercise against your
file, step by step, and stops at the first step that fails (tools/check.py
does that). This file only makes sure the checker's tools are there: the
first time, it sets up the virtual environment .venv beside it, as
`make check` does; that needs the network once.
"""
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PYTHON = VENV / "bin" / "python"
# What each set-up installs, the file it touches once .venv holds it, and
# the files it reads (a newer one makes it stale): checking needs only
# pytest and its kin (about 16 MB); make needs the whole list (the site's
# pandoc and typst, the browser tests' Playwright: about 470 MB more), and
# its touch file is the Makefile's $(INSTALLED).
CHECKING = (ROOT / "requirements-check.txt", VENV / "check-installed",
            [ROOT / "requirements-check.txt", ROOT / "pyproject.toml"])
EVERYTHING = (ROOT / "requirements.txt", VENV / "installed",
              [ROOT / "requirements.txt", ROOT / "requirements-check.txt",
               ROOT / "requirements-lab.txt", ROOT / "pyproject.toml"])


def set_up(requirements, touch):
    """Build .venv afresh from a requirements file and the course's own
    package `tools`."""
    if sys.version_info < (3, 10):
        sys.exit(f"Python 3.10 or newer is needed; {sys.executable} is "
                 f"{sys.version.split()[0]}")
    print(f"setting up the course's tools in {VENV} (once; it needs the network)…",
          file=sys.stderr, flush=True)
    if VENV.is_symlink():
        VENV.unlink()                     # the link, never what it points to
    elif VENV.exists():
        shutil.rmtree(VENV)
    steps = [[sys.executable, "-m", "venv", str(VENV)],
             # Python 3.11's venv brings setuptools (9 MB) that nothing here
             # uses: pip builds the editable install with a setuptools of its
             # own. (-qq: from 3.12 there is none, and nothing to say.)
             [str(PYTHON), "-m", "pip", "uninstall", "--yes", "-qq", "setuptools"],
             [str(PYTHON), "-m", "pip", "install", "--quiet", "-r", str(requirements)],
             [str(PYTHON), "-m", "pip", "install", "--quiet", "--no-deps", "--editable",
              str(ROOT)]]
    for step in steps:
        if subprocess.run(step, cwd=ROOT).returncode != 0:
            sys.exit(f"setting up {VENV} failed at: {' '.join(step)}\n"
                     f"(its error is above); run this again once it is fixed")
    touch.touch()


def ready():
    """Whether .venv holds what checking needs: its own set-up, or make's."""
    return any(touch.is_file() and all(need.stat().st_mtime <= touch.stat().st_mtime
                                       for need in reads)
               for _, touch, reads in (CHECKING, EVERYTHING))


if __name__ == "__main__":
    if sys.argv[1:] == ["--set-up"]:          # the Makefile's $(INSTALLED)
        set_up(*EVERYTHING[:2])
        sys.exit(0)
    if not ready():
        set_up(*CHECKING[:2])
    os.execv(PYTHON, [str(PYTHON), "-m", "tools.check", *sys.argv[1:]])
