"""The contract every simulation's engine keeps (tools/sims/engine.py),
checked for each folder sims.folders() finds, so that a new folder cannot
be left out; and a throwaway folder, built from the example engine in
CONTRIBUTING.md, to show that the discovery, the API and the contract all
pick a new one up, and that the contract fails an engine that breaks it."""
import importlib
import json
import re

import pytest

from tests.helpers import run_program
from tools import sims
from tools.harness import catalogue
from tools.sims import api, package

FOLDERS = sims.folders()


def keeps_the_contract(engine):
    """Assert what every engine class promises the page: made with its
    defaults, or as the page makes it, its state is JSON with its tasks,
    none earned yet, and two made alike say the same; it closes."""
    for options in ({}, engine.PAGE_STARTS_WITH):
        keeps_the_contract_made_with(engine, options)


def keeps_the_contract_made_with(engine, options):
    first, second = engine(**options), engine(**options)
    try:
        state = first.state()
        assert json.loads(json.dumps(state)) == state, "state() must be JSON-ready data"
        assert state["tasks"] == first.tasks(), "state()['tasks'] must be self.tasks()"
        assert [task["id"] for task in state["tasks"]] == list(engine.TASKS)
        assert not first.earned, (f"{engine.__name__} earned {sorted(first.earned)} "
                                  f"before the reader did anything")
        assert json.dumps(second.state()) == json.dumps(state), "two made alike must agree"
    finally:
        first.close()
        second.close()


def refuses_what_is_not_an_action(page, name):
    """Only "new", "close", state and the engine's @action methods answer."""
    def ask(method):
        request = {"sim": name, "instance": "contract", "method": method}
        return json.loads(page.call(json.dumps(request)))
    try:
        assert ask("new")["ok"], "new, with the engine's defaults"
        for method in ("no_such_method", "tasks", "page_calls", "__init__"):
            answer = ask(method)
            assert not answer["ok"] and "unknown method" in answer["error"], method
        assert ask("state")["ok"]
    finally:
        assert ask("close") == {"ok": True, "state": None, "result": True}


@pytest.mark.parametrize("name", FOLDERS)
def test_every_engine_keeps_the_contract(name):
    keeps_the_contract(api.SIMS[name])


@pytest.mark.parametrize("name", FOLDERS)
def test_the_page_may_call_only_an_engines_actions(name, instances):
    refuses_what_is_not_an_action(api.PAGE, name)


@pytest.mark.parametrize("name", FOLDERS)
def test_every_engine_has_a_text_program(name):
    assert run_program(name).strip()


def test_the_api_serves_exactly_the_folders():
    assert set(api.SIMS) == set(FOLDERS)


def test_the_build_writes_each_first_state_as_the_page_makes_it(tmp_path):
    """first.json, in each simulation's folder of the site: the options the
    page makes its engine with, and that engine's state."""
    package.write_first_pictures(tmp_path)
    for name, folder in FOLDERS.items():
        engine = api.SIMS[name]
        made = engine(**engine.PAGE_STARTS_WITH)
        try:
            state = json.loads(json.dumps(made.state()))
        finally:
            made.close()
        written = json.loads((tmp_path / folder.name / "first.json").read_text())
        assert written == {"options": engine.PAGE_STARTS_WITH, "state": state}, name


# ---- a throwaway simulation, from CONTRIBUTING.md's example

EXAMPLE = re.search(r"```python\n# tools/sims/queue_depth/engine\.py\n(.*?)```",
                    (catalogue.ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8"), re.S)

# The example, broken: it earns its task before the reader does anything.
EARNS_AT_THE_START = """
        self.earned.add("backlog")

    @action"""


def throwaway_package(tmp_path, monkeypatch, engine_source):
    """The name of a package of simulation folders made in tmp_path (a name
    of its own, so that no test meets another's), importable, holding one
    folder, queue_depth, whose engine.py is engine_source; and its folder."""
    name = "throwaway_" + re.sub(r"\W", "_", tmp_path.name)
    folder = tmp_path / name / "queue_depth"
    folder.mkdir(parents=True)
    for path in (folder.parent / "__init__.py", folder / "__init__.py"):
        path.write_text("")
    (folder / "engine.py").write_text(engine_source)
    monkeypatch.syspath_prepend(str(tmp_path))
    return name, folder.parent


def test_contributings_example_engine_is_there():
    assert EXAMPLE, "CONTRIBUTING.md §Simulations lacks its example engine.py"


def test_a_new_folder_is_found_served_and_checked(tmp_path, monkeypatch, capsys):
    package, root = throwaway_package(tmp_path, monkeypatch, EXAMPLE.group(1))
    assert sims.folders(root) == {"queue-depth": root / "queue_depth"}
    engines = api.engines(package)
    keeps_the_contract(engines["queue-depth"])
    page = api.Api(engines)
    refuses_what_is_not_an_action(page, "queue-depth")
    page.call('{"sim": "queue-depth", "instance": "q", "method": "new"}')
    for _ in range(10):
        answer = json.loads(page.call('{"sim": "queue-depth", "instance": "q", "method": "tick"}'))
    assert answer["ok"] and answer["state"]["tasks"][0]["done"]
    page.close(("queue-depth", "q"))
    importlib.import_module(f"{package}.queue_depth.engine").main([])
    assert "counts" in capsys.readouterr().out


def test_the_contract_fails_an_engine_that_earns_a_task_at_the_start(tmp_path, monkeypatch):
    broken = EXAMPLE.group(1).replace("\n\n    @action", EARNS_AT_THE_START, 1)
    assert broken != EXAMPLE.group(1)
    package, _ = throwaway_package(tmp_path, monkeypatch, broken)
    with pytest.raises(AssertionError, match=r"earned \['backlog'\] before the reader"):
        keeps_the_contract(api.engines(package)["queue-depth"])


def test_an_engine_py_with_no_engine_class_is_named_in_the_error(tmp_path, monkeypatch):
    package, root = throwaway_package(tmp_path, monkeypatch, "def main(argv=None):\n    pass\n")
    engine_py = re.escape(str(root / "queue_depth" / "engine.py"))
    with pytest.raises(LookupError, match=rf"{engine_py} must define one class on "
                                          r"tools.sims.engine.Engine; it defines 0"):
        api.engines(package)


def test_a_first_state_that_cannot_be_made_fails_the_build_by_name(tmp_path, monkeypatch):
    """An engine the page would make with a setting it refuses stops the
    build with a sentence naming the simulation, the options and why."""
    refused = EXAMPLE.group(1).replace('    SETTINGS = {"arrivals": (int, 1, 5)}\n',
                                       '    SETTINGS = {"arrivals": (int, 1, 5)}\n'
                                       '    PAGE_STARTS_WITH = {"arrivals": 9}\n', 1)
    assert refused != EXAMPLE.group(1)
    name, _ = throwaway_package(tmp_path, monkeypatch, refused)
    with pytest.raises(package.PackagingError, match=re.escape(
            "the queue-depth simulation's first state could not be made with "
            "{'arrivals': 9}: ValueError: arrivals must be a whole number from 1 to 5, not 9")):
        package.write_first_pictures(tmp_path / "site", name)
    assert not (tmp_path / "site" / "queue_depth" / "first.json").exists()
