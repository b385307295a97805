"""Fixtures shared by the tests: the site, built once per run and served
locally; the simulations' instances, closed after each test; the count of
classic mistakes graded, printed at the end."""
import functools
import http.server
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from mutations import MISTAKES
from sims import api

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def site(tmp_path_factory):
    """The site, built once from guide.md and code/ into a temporary folder."""
    out = tmp_path_factory.mktemp("build") / "site"
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "build.py"), "--out", str(out)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert re.fullmatch(r"built \d+ pages, [\d,]+ bytes in [\d.]+ s -> \S+\n", result.stdout)
    return out


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def site_url(site):
    """The built site, served over HTTP on a free localhost port."""
    handler = functools.partial(QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def instances():
    """The simulations' live instances; every one is closed after the test."""
    yield api.instances
    for key in list(api.instances):
        api.close(key)


CAUGHT = pytest.StashKey[list]()


@pytest.fixture(scope="session")
def mistakes_caught(pytestconfig):
    """The classic mistakes (tests/mutations.py) that this run graded and
    saw fail; tests append to it, and the summary counts them."""
    return pytestconfig.stash.setdefault(CAUGHT, [])


def pytest_terminal_summary(terminalreporter, config):
    caught = config.stash.get(CAUGHT, [])
    if caught:
        terminalreporter.write_line(
            f"classic mistakes: {len(caught)} graded and caught, of the {len(MISTAKES)} in "
            f"tests/mutations.py (make mutations grades every one)")
