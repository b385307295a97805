"""Fixtures shared by the tests: the site, built once per test process, and
its pages served locally to Chromium (a page that watches for errors); a
private PostgreSQL server and a new database on it for each test that asks;
the simulations' instances, closed after each test; the count of classic
mistakes graded, printed at the end."""
import fcntl
import functools
import http.server
import re
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tools.harness import postgres
from tests.browser import CHROMIUM
from tests.helpers import new_database
from tests.mutations import MISTAKES
from tools.sims import api

ROOT = Path(__file__).resolve().parent


def build(out, *options):
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "build.py"), "--out", str(out),
                             *options], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert re.fullmatch(r"built \d+ pages, [\d,]+ bytes in [\d.]+ s -> \S+\n", result.stdout)
    return out


@pytest.fixture(scope="session")
def site(tmp_path_factory):
    """The whole site, EPUB and PDF too, built from guide.md and code/ into a
    temporary folder."""
    return build(tmp_path_factory.mktemp("build") / "site")


@pytest.fixture(scope="session")
def site_pages(tmp_path_factory):
    """The site without its EPUB and PDF, which only tests/test_build.py
    reads: what the browser is served, built in a few seconds."""
    return build(tmp_path_factory.mktemp("build") / "site", "--no-extras")


# The files whose tests take longest, longest first. They start first, so
# that with -n the last tests to start are short ones and the workers finish
# together; a file not named here keeps its place after them.
SLOWEST_FIRST = ["test_grading.py", "test_pages.py", "test_page.py", "test_page_runtime.py",
                 "test_pace.py", "test_chaos.py"]


def pytest_collection_modifyitems(items):
    def rank(item):
        name = item.path.name
        return SLOWEST_FIRST.index(name) if name in SLOWEST_FIRST else len(SLOWEST_FIRST)
    items.sort(key=rank)                     # stable: each file keeps its own order


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="session")
def site_url(site_pages):
    """The built site, served over HTTP on a free localhost port."""
    handler = functools.partial(QuietHandler, directory=str(site_pages))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    if not CHROMIUM.exists():
        pytest.fail("Chromium is missing: `apt-get install chromium` "
                    "(make check installs it when it runs as root)")
    # Playwright's own browser cannot be downloaded here; this machine's
    # closed network also refuses Chromium's background connections.
    return {**browser_type_launch_args, "executable_path": str(CHROMIUM),
            "args": ["--disable-background-networking", "--disable-component-update",
                     "--no-first-run", "--disable-sync"]}


@pytest.fixture
def watched(page, site_url):
    """A page whose console errors and off-site requests are collected."""
    problems = []
    page.on("console", lambda message: message.type == "error"
            and problems.append(f"console: {message.text}"))
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))

    def only_localhost(route):
        if urlsplit(route.request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            problems.append(f"request off localhost: {route.request.url}")
            route.abort()
    page.route("**/*", only_localhost)
    page.problems = problems
    return page


@pytest.fixture
def instances():
    """The simulations' live instances; every one is closed after the test."""
    yield api.instances
    for key in list(api.instances):
        api.close(key)


@pytest.fixture(scope="session")
def postgresql_server():
    """A private PostgreSQL server (tools/harness/postgres.py), one per test
    process, stopped at the end. fsync off: nothing here outlives the run."""
    try:
        with postgres.server(fsync="off") as dsn:
            yield dsn
    except postgres.Unavailable as error:
        pytest.fail(str(error))


@pytest.fixture
def postgresql(postgresql_server):
    """The address of a new, empty database on that server, dropped after
    the test."""
    with new_database(postgresql_server) as address:
        yield address


CAUGHT = "classic mistakes caught"      # a user property of a test's report
CAUGHT_IN_THIS_RUN = set()              # of the reports that reach this process


@pytest.fixture
def mistakes_caught(record_property):
    """The classic mistakes (tests/mutations.py) that a test graded and saw
    fail: it appends them, and the summary at the end counts them. They
    travel in a report's user properties, which xdist's workers send on."""
    caught = []
    yield caught
    if caught:
        record_property(CAUGHT, [f"{mistake.file}: {mistake.what}" for mistake in caught])


def pytest_runtest_logreport(report):
    for name, value in report.user_properties:
        if name == CAUGHT:
            CAUGHT_IN_THIS_RUN.update(value)


def pytest_terminal_summary(terminalreporter):
    caught = CAUGHT_IN_THIS_RUN
    if caught:
        terminalreporter.write_line(
            f"classic mistakes: {len(caught)} graded and caught, of the {len(MISTAKES)} in "
            f"tests/mutations.py (make mutations grades every one)")
