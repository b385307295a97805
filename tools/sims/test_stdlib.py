"""tools/sims/stdlib.py's finder of last resort, under this machine's Python:
a module the trimmed standard library lacks is found in the whole one,
which is fetched once, and only for a module the whole one has. (That the
simulations never need it is tools/sims/test_pages.py's
test_started_from_the_keyboard_it_takes_the_focus_and_needs_only_the_trimmed_stdlib.)"""
import importlib
import sys
import zipfile

import pytest

from tools.sims import stdlib

NAMES = ("alpha_whole_only", "beta_both", "beta_both.sub_whole_only")


@pytest.fixture
def libraries(tmp_path, monkeypatch):
    """A trimmed and a whole library as zips, the trimmed one on sys.path,
    the finder installed; and the list of the whole one's fetches."""
    whole, trimmed = tmp_path / "whole.zip", tmp_path / "trimmed.zip"
    with zipfile.ZipFile(whole, "w") as library:
        library.writestr("alpha_whole_only.py", "FROM = 'whole'")
        library.writestr("beta_both/__init__.py", "FROM = 'whole'")
        library.writestr("beta_both/sub_whole_only.py", "FROM = 'whole'")
    with zipfile.ZipFile(trimmed, "w") as library:
        library.writestr("beta_both/__init__.py", "FROM = 'trimmed'")
        library.writestr(stdlib.WHOLE_NAMES, "alpha_whole_only\nbeta_both")
    fetches = []

    def fetch_whole():
        fetches.append(whole)
        return str(whole)

    monkeypatch.setattr(sys, "path", [str(trimmed), *sys.path])
    monkeypatch.setattr(sys, "meta_path",
                        [*sys.meta_path, stdlib.WholeLibrary(str(trimmed), fetch_whole)])
    yield fetches
    for name in NAMES:
        sys.modules.pop(name, None)


def test_the_trimmed_library_comes_first_and_the_whole_one_fills_its_gaps(libraries):
    package = importlib.import_module("beta_both")
    assert package.FROM == "trimmed" and libraries == []
    assert importlib.import_module("beta_both.sub_whole_only").FROM == "whole"
    assert importlib.import_module("alpha_whole_only").FROM == "whole"
    assert len(libraries) == 1, "the whole library was fetched more than once"


def test_a_module_neither_library_has_is_not_fetched_for(libraries):
    with pytest.raises(ImportError):
        importlib.import_module("gamma_in_neither")
    assert libraries == []
