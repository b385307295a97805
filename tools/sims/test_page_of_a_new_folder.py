"""CONTRIBUTING's promise, held in a browser: adding a simulation is one
folder and one line in the guide. Its example folder (the engine, view,
styles and page tests it shows), copied out of CONTRIBUTING.md into a copy
of tools/, and one `::: {.sim}` line in a guide of one chapter build a site
on which the new simulation starts, draws and earns its task, with nothing
else changed."""
import os
import re
import shutil
import subprocess
import sys

import pytest
from playwright.sync_api import expect

from tests.browser import make_moves, served, start_simulation
from tools.harness.catalogue import ROOT

CONTRIBUTING = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
# Each file of the example: a fenced block whose first line is a comment naming it.
EXAMPLE = dict(re.findall(r"```\w+\n(?:#|//|/\*) (tools/sims/queue_depth/[\w.]+)(?: \*/)?\n(.*?)```",
                          CONTRIBUTING, re.S))
GUIDE = '---\ntitle: T\n---\n\n# 1. One\n\n::: {.sim name="queue-depth"}\nJobs pile up.\n:::\n'


@pytest.fixture(scope="module")
def new_site(tmp_path_factory):
    """The site built from a copy of tools/ with the example folder added,
    and a guide whose one chapter shows it, served on a free port."""
    assert sorted(EXAMPLE) == [f"tools/sims/queue_depth/{name}" for name in
                               ("engine.py", "test_page.py", "view.css", "view.js")]
    root = tmp_path_factory.mktemp("new-simulation")
    # Without a queue_depth of the tree's own: a maintainer who follows the
    # example adds one, and this copy must hold the example's alone.
    shutil.copytree(ROOT / "tools", root / "tools",
                    ignore=shutil.ignore_patterns("__pycache__", "queue_depth"))
    # code/ copied, not linked: the standard library's measure runs Pyodide
    # under Node on this folder, and its file system does not follow a link out.
    shutil.copytree(ROOT / "code", root / "code", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "node_modules").symlink_to(ROOT / "node_modules")
    (root / "tools" / "sims" / "queue_depth").mkdir()
    (root / "tools" / "sims" / "queue_depth" / "__init__.py").write_text("")
    for path, text in EXAMPLE.items():
        (root / path).write_text(text, encoding="utf-8")
    (root / "guide.md").write_text(GUIDE, encoding="utf-8")
    result = subprocess.run([sys.executable, str(root / "tools" / "build.py"), "--no-extras"],
                            env={**os.environ, "PYTHONPATH": str(root)},   # the copy's tools
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    with served(root / "site") as url:
        yield url


def test_a_new_folder_and_one_guide_line_make_a_simulation_that_runs(page, new_site):
    problems = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("console", lambda message: message.type == "error" and problems.append(message.text))
    sim = start_simulation(page, new_site, "one.html", "queue-depth", keyboard=True)
    expect(sim.locator(".qd-depth")).to_have_text("0 jobs wait")
    backlog = sim.locator('[data-task="backlog"]')
    expect(backlog).not_to_have_class("done")
    make_moves(sim, ["Tick"] * 10)               # two jobs in, one out, each tick
    expect(sim.locator(".qd-depth")).to_have_text("10 jobs wait")
    expect(backlog).to_have_class("done")
    assert problems == []
