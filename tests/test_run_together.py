"""The ini option run_together: file patterns whose tests run one after
another in one xdist worker (tools/harness/plugin.py), and the refusal of a
test that opens a browser page in a file no pattern matches."""
from types import SimpleNamespace

import pytest

from tools.harness.plugin import refuse_browser_tests_run_apart, runs_together

PATTERNS = ["tests/test_pages.py", "tools/sims/test_page*.py", "tools/sims/*/test_page.py"]
CONFIG = SimpleNamespace(getini=lambda name: PATTERNS)


def an_item(nodeid, *fixtures):
    return SimpleNamespace(nodeid=nodeid, fixturenames=list(fixtures))


@pytest.mark.parametrize("path", ["tests/test_pages.py", "tools/sims/test_pages.py",
                                  "tools/sims/test_page_runtime.py",
                                  "tools/sims/queue_depth/test_page.py"])
def test_the_browser_test_files_and_a_new_simulations_run_together(path):
    assert runs_together(CONFIG, path)


@pytest.mark.parametrize("path", ["tests/test_build.py", "tools/sims/race/test_engine.py"])
def test_other_files_run_apart(path):
    assert not runs_together(CONFIG, path)


def test_a_page_opened_outside_the_patterns_is_refused_by_name():
    inside = an_item("tools/sims/queue_depth/test_page.py::test_tasks", "watched", "page")
    apart = an_item("tests/test_new.py::test_x", "site_url")
    refuse_browser_tests_run_apart(CONFIG, [inside, apart])          # no page: fine
    stray = an_item("tests/test_new.py::test_y", "browser")
    with pytest.raises(pytest.UsageError, match="tests/test_new.py opens a browser page"):
        refuse_browser_tests_run_apart(CONFIG, [inside, stray])
