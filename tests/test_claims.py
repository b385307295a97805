"""The claims map, tests/CLAIMS.md, is kept true: it names every test that
grades a learner's file, and every test it names exists."""
import ast
import re
from pathlib import Path

from tools.harness import catalogue

ROOT = catalogue.ROOT
CLAIMS = ROOT / "tests" / "CLAIMS.md"
# A test's name in the map: test_ and words, but not a module's (test_ex01.py).
NAMED = re.compile(r"\b(test_\w+)\b(?!\.py)")


def defined_tests(path):
    """The names of the test functions defined in the Python file at path."""
    tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    return {node.name for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}


def test_the_claims_map_names_every_graded_test():
    """Every test of the modules that grade learners' files has its line in
    tests/CLAIMS.md, beside the promise it holds."""
    named = set(NAMED.findall(CLAIMS.read_text(encoding="utf-8")))
    missing = [f"{module}::{name}" for module in catalogue.GRADED_TESTS
               for name in sorted(defined_tests(ROOT / module) - named)]
    assert not missing, "tests/CLAIMS.md has no line for:\n" + "\n".join(missing)


def test_every_test_the_claims_map_names_exists():
    """A test renamed or deleted is renamed or deleted in the map too."""
    named = set(NAMED.findall(CLAIMS.read_text(encoding="utf-8")))
    existing = set().union(*(defined_tests(path) for folder in ("tests", "tools")
                             for path in (ROOT / folder).rglob("test_*.py")))
    assert named - existing == set(), sorted(named - existing)
