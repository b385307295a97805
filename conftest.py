"""Fixtures shared by the tests: the site, built once per test process, and
its pages served locally to Chromium (a page that watches for errors); a
private PostgreSQL server and a new database on it for each test that asks;
the simulations' instances, and the engines a test opens, closed after each
test; for a test of a learner's file, a fresh copy of the folder under test,
terminals on a shared clock, and Exercise 9 as a module with its given
practice world; the harness tests' demo programs; the count of classic
mistakes graded, printed at the end."""
import contextlib
import io
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tools.harness import postgres
from tests.harness.demo import demo_programs
from tests.helpers import (SLOW_TIMEWARP, Terminals, fresh_copy, import_learner_file,
                           new_database, require)
from tools.mistakes import MISTAKES
from tools import course
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


@pytest.hookimpl(tryfirst=True)         # before pytest's tmp_path plugin reads the option
def pytest_configure(config):
    """The run's temporary folders (tmp_path) in memory, as sandbox.SCRATCH's
    copies are, where the machine has /dev/shm: the tests' SQLite databases
    then commit without waiting for a disk that other work keeps busy (the
    payment simulation's replays of ex07 and ex08: 64 s on a busy disk, 4 s
    here). One folder for the run, made here and removed at its end; xdist's
    test processes get folders inside it. --basetemp still chooses."""
    if config.option.basetemp or hasattr(config, "workerinput") \
            or not Path("/dev/shm").is_dir():
        return
    config.option.basetemp = config.made_basetemp = tempfile.mkdtemp(prefix="pytest-",
                                                                     dir="/dev/shm")


def pytest_unconfigure(config):
    if getattr(config, "made_basetemp", None):
        shutil.rmtree(config.made_basetemp, ignore_errors=True)


# The files whose tests take longest, longest first. They start first, so
# that with -n the last tests to start are short ones and the workers finish
# together; a file not named here keeps its place after them. The browser
# tests come first of all: they run one after another in one test process
# (pytest.ini's run_together), the longest unit of the run by far (450 s of
# a 500 s make check on a busy machine). xdist hands a test process its next
# units while it still runs one, so listed later it can wait there behind
# test_grading.py's long tests.
SLOWEST_FIRST = ["test_pages.py", "test_page.py", "test_page_runtime.py", "test_grading.py",
                 "test_pace.py", "test_chaos.py", "test_shop.py"]


def pytest_collection_modifyitems(items):
    def rank(item):
        name = item.path.name
        return SLOWEST_FIRST.index(name) if name in SLOWEST_FIRST else len(SLOWEST_FIRST)
    items.sort(key=rank)                     # stable: each file keeps its own order


@pytest.fixture(scope="session")
def site_url(site_pages):
    """The built site, served over HTTP on a free localhost port."""
    from tests.browser import served       # Playwright: not in a learner's checker
    with served(site_pages) as url:
        yield url



@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    from tests.browser import CHROMIUM
    if not CHROMIUM.exists():
        pytest.fail("Chromium is missing: `apt-get install chromium` "
                    "(make check installs it when it runs as root)")
    # Playwright's own browser cannot be downloaded here; this machine's
    # closed network also refuses Chromium's background connections. Each
    # test boots Pyodide in a new context, where V8 compiles its WebAssembly
    # again, and then again with its optimizing tier for the hot functions:
    # Liftoff's code alone runs the same Python, for a quarter less of the
    # browser tests' CPU (tools/sims/test_pages.py: 145 -> 108 CPU-s of the
    # machine). make bench times Python's start with V8 as it ships.
    return {**browser_type_launch_args, "executable_path": str(CHROMIUM),
            "args": ["--disable-background-networking", "--disable-component-update",
                     "--no-first-run", "--disable-sync", "--js-flags=--liftoff-only"]}


@pytest.fixture(scope="session")
def profile(playwright, browser_type_launch_args, browser_context_args, tmp_path_factory):
    """One Chromium profile, shared by the browser tests of a test process:
    Chromium keeps Pyodide's files in its HTTP cache, and V8 their compiled
    code beside them, so only the process's first Start fetches and compiles
    them. Measured on two cores (issue 47): Start took 2.7 s in a new context
    for each test, 2.1 s in a page of this profile, a chapter opened a
    quarter of a second sooner, and the 113 browser tests took 397 s, not
    581. Service workers are blocked here: the site's would answer later
    tests' requests from what it kept, past their routes (tests/test_offline.py
    runs it, each test in a context of its own)."""
    shared = playwright.chromium.launch_persistent_context(
        tmp_path_factory.mktemp("chromium-profile"), **browser_type_launch_args,
        **{**browser_context_args, "service_workers": "block"})
    yield shared
    shared.close()


@pytest.fixture
def context(profile):
    """The shared profile, in place of pytest-playwright's new context for
    each test. Each test gets pages of its own (page, new_page), closed
    after it; then all that their sites stored is wiped but the HTTP cache
    (the theme a page remembered in localStorage, a service worker). What
    is set on a page (its size, colour scheme, routes, init scripts) goes
    with it. A test that installs the context's clock, which would stay
    installed, takes watched_alone (or pytest-playwright's new_context)."""
    yield profile
    origins = set()
    for page in profile.pages:
        address = urlsplit(page.url)
        if address.scheme.startswith("http"):
            origins.add(f"{address.scheme}://{address.netloc}")
        page.close()
    wiper = profile.new_page()
    devtools = profile.new_cdp_session(wiper)
    for origin in origins:
        devtools.send("Storage.clearDataForOrigin", {"origin": origin, "storageTypes": "all"})
    wiper.close()


@pytest.fixture
def new_page(context):
    """new_page(width=1280, height=720, color_scheme="light"): a page of the
    shared profile at that size, in that colour scheme (closed after the test)."""
    def open_page(width=1280, height=720, color_scheme="light"):
        page = context.new_page()
        page.set_viewport_size({"width": width, "height": height})
        page.emulate_media(color_scheme=color_scheme)
        return page
    return open_page


@pytest.fixture
def watched(page, site_url):
    """A page whose console errors and off-site requests are collected."""
    from tests.browser import watch
    return watch(page)


@pytest.fixture
def watched_alone(new_context, site_url):
    """A watched page in a browser context of its own, for a test that
    installs Playwright's clock: the clock belongs to the context, and in
    the shared profile it would stay installed, paused, for every later test."""
    from tests.browser import watch
    return watch(new_context().new_page())


@pytest.fixture
def instances():
    """The simulations' live instances; every one is closed after the test."""
    yield api.instances
    for key in list(api.instances):
        api.close(key)


@pytest.fixture
def opened():
    """opened(Engine, ...) makes an engine and closes it (its connections
    and its files) after the test."""
    engines = []

    def open_engine(engine, *args, **options):
        engines.append(engine(*args, **options))
        return engines[-1]

    yield open_engine
    for engine in engines:
        engine.close()


@pytest.fixture
def demo(tmp_path):
    """A folder of small programs for the harness's tests (tests/harness/demo.py)."""
    return demo_programs(tmp_path)


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


# ---------------------------------------------------------------- a learner's files

@pytest.fixture
def folder(request, source_folder):
    """A fresh copy of the reference files with the source folder's copy of
    the test's exercise; fails if that exercise is missing."""
    exercise = request.node.get_closest_marker("exercise").args[0]
    require(source_folder, exercise)
    with fresh_copy(source_folder, exercise) as copy:
        yield copy


@pytest.fixture
def terminals(folder):
    """Commands side by side in the test's folder, on one shared clock,
    stopped after the test."""
    opened = Terminals(folder)
    yield opened
    opened.close()


@pytest.fixture
def slow_terminals(folder):
    """The same, at SLOW_TIMEWARP, for a test whose outcome hangs on how two
    processes' steps fall on the shared clock."""
    terminals = Terminals(folder, timewarp=SLOW_TIMEWARP)
    yield terminals
    terminals.close()


@pytest.fixture
def ex09(folder, monkeypatch):
    """The exercise as a module, so its interface can be driven directly
    (imported from the test's copy, which is also the current folder)."""
    monkeypatch.chdir(folder)
    with contextlib.redirect_stdout(io.StringIO()):      # the provider narrates
        yield import_learner_file(folder / "ex09_charge_worker.py", "ex09")


@pytest.fixture
def practice(ex09):
    """Exercise 9's given file, ex09_practice_given.py: the provider, the
    crash doubles, the clock and the replays, driving the learner's worker.
    Always code/'s copy, never the learner's: it is given, not typed."""
    with contextlib.redirect_stdout(io.StringIO()):
        return course.fresh("ex09_practice_given.py", ex09_charge_worker=ex09)


CAUGHT = "classic mistakes caught"      # a user property of a test's report
CAUGHT_IN_THIS_RUN = set()              # of the reports that reach this process


@pytest.fixture
def mistakes_caught(record_property):
    """The classic mistakes (tools/mistakes.py) that a test graded and saw
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
            f"tools/mistakes.py (make mutations grades every one)")
