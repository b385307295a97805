"""The Python you need: each construct a listing uses beyond a little Python
is explained in a `python` box of guide.md, just before its first use, and
each box's example prints what the box shows."""

import ast
import functools
import os
import re
import subprocess
import sys

import pytest

from tools import guide
from tools.harness import catalogue

GUIDE = catalogue.ROOT / "guide.md"


def include_blocks():
    return [b for b in guide.read_guide(GUIDE) if "include" in b.attributes]


# The Python a listing uses beyond "a little Python", each with a pattern that
# finds it in a listing's code (comment lines left out) and the words a
# `python` box must hold to explain it. The box must stand before the first
# listing, in guide order, that uses it, and in the same section (`## `): at
# the first use, not chapters earlier. CLOSURE and TRY_ELSE are found with
# ast instead.
CLOSURE = "a def inside a def"
TRY_ELSE = "a try with an else"
CONSTRUCTS = {
    "format spec": (r"\{[^{}\s:]+:[<>^]?\d*(?:\.\d+)?[dfgs]?\}", ["format spec"]),
    "**args": (r"\*\*[a-z_]", ["**args", "keyword argument"]),
    # a line that is only the second of two strings side by side
    "strings side by side": (r'^\s+f?"[^"]*"\)?,?$', ["bracket", "joined into one"]),
    "with": (r"^\s*with\s[^#]*:", ["`with`", "context manager"]),
    "argparse": (r"\bargparse\b", ["argparse", "parse_args", "store_true"]),
    "argparse's lists, groups and defaults": (
        r"nargs=\"\*\"|add_mutually_exclusive_group|%\(default\)s",
        ['nargs="*"', "add_mutually_exclusive_group()", "%(default)s"]),
    "sqlite3 rows": (r"\.fetchone\(\)|\.lastrowid\b",
                     ["cursor", "fetchone()", "None", "lastrowid", "`for` loop"]),
    "try/else": (TRY_ELSE, ["`try`", "`else:`"]),
    "one value unpacked": (r"^\s*\(\w+,\)\s*=", ["`(due,) = row`", "tuple of one"]),
    "executescript": (r"\.executescript\(", ["executescript"]),
    "os._exit": (r"\bos\._exit\(", ["os._exit", "sys.exit"]),
    "decorator": (r"^\s*@", ["decorator", "@"]),
    # its use, or where tinyq's docstring shows it (a string, not a comment)
    "decorator with arguments": (r"@[\w.]+\(", ["decorator", "arguments of its own"]),
    "closure": (CLOSURE, ["closure"]),
    "contextlib.contextmanager": (r"\bcontextlib\.contextmanager\b",
                                  ["@contextlib.contextmanager", "context manager"]),
    "yield": (r"\byield\b", ["`yield`", "generator"]),
    "contextlib.suppress": (r"\bcontextlib\.suppress\(", ["contextlib.suppress"]),
    "multiprocessing": (r"\bmultiprocessing\b", ["multiprocessing", "exitcode", "sentinel"]),
    "deque": (r"\bdeque\(", ["deque", "popleft"]),
}


@functools.cache
def listings():
    """Each listing in guide order: (guide line, file, [(file line, code)]),
    as the build expands it, with comment lines left out."""
    found = []
    for block in include_blocks():
        code, first = guide.include(block, catalogue.ROOT)
        rows = [(first + n, line) for n, line in enumerate(code.splitlines())
                if not line.lstrip().startswith("#")]
        found.append((block.line, block.attributes["include"], rows))
    return found


def nested_def_lines(path):
    """Lines of the functions defined inside another function of a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {inner.lineno for outer in ast.walk(tree) if isinstance(outer, ast.FunctionDef)
            for inner in ast.walk(outer)
            if inner is not outer and isinstance(inner, ast.FunctionDef)}


def section_line(text, line):
    """The line of the `## ` heading whose section holds guide.md's line."""
    in_code = {n for block in guide.blocks(text)
               for n in range(block.line, block.line + len(block.body) + 2)}
    return max(n for n, row in enumerate(text.splitlines()[:line], 1)
               if row.startswith("## ") and n not in in_code)


def try_else_lines(path):
    """Lines of the try statements of a file that have an else block."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.lineno for node in ast.walk(tree) if isinstance(node, ast.Try) and node.orelse}


FOUND_BY_AST = {CLOSURE: nested_def_lines, TRY_ELSE: try_else_lines}


def first_use(pattern, found):
    """(index into found, file, file line, code) of the first listing line
    that uses a construct, or None."""
    for index, (_, path, rows) in enumerate(found):
        by_ast = pattern in FOUND_BY_AST
        lines = FOUND_BY_AST[pattern](catalogue.ROOT / path) if by_ast else set()
        for number, code in rows:
            if (number in lines) if by_ast else re.search(pattern, code):
                return index, path, number, code
    return None


@pytest.mark.parametrize("construct", CONSTRUCTS)
def test_the_python_a_listing_needs_is_explained_just_before_it(construct):
    """Each Python construct beyond the basics is explained in a `python` box
    just before the first listing that uses it."""
    pattern, words = CONSTRUCTS[construct]
    found = listings()
    use = first_use(pattern, found)
    assert use, f"no listing uses {construct}: remove its box, or this entry"
    index, path, number, code = use
    text = GUIDE.read_text(encoding="utf-8")
    section = section_line(text, found[index][0])
    boxes = [line for line, inside, _ in guide.python_boxes(text)
             if all(word in " ".join(inside.split()) for word in words)]
    assert any(section < line < found[index][0] for line in boxes), (
        f"{path}:{number} uses {construct} ({code.strip()!r}), first shown at "
        f"guide.md:{found[index][0]}: a `python` box holding {words} must stand before "
        f"it, in its section (guide.md:{section}); boxes with those words: {boxes}")


def test_every_python_box_explains_a_construct():
    """No box explains nothing: each one holds the words of some construct."""
    boxes = guide.python_boxes(GUIDE.read_text(encoding="utf-8"))
    assert boxes
    for line, text, _ in boxes:
        assert text.startswith("**The Python you need: "), f"guide.md:{line}"
        text = " ".join(text.split())
        assert any(all(word in text for word in words) for _, words in CONSTRUCTS.values()), \
            f"guide.md:{line}: this box explains none of CONSTRUCTS"


@pytest.mark.parametrize("line", [box[0] for box in
                                  guide.python_boxes(GUIDE.read_text(encoding="utf-8"))])
def test_a_python_box_example_prints_what_the_box_shows(line, tmp_path):
    """A `python` box's example, run as a file, prints exactly its output block."""
    _, _, blocks = next(box for box in guide.python_boxes(GUIDE.read_text(encoding="utf-8"))
                        if box[0] == line)
    assert [block.classes for block in blocks] == [["python"], ["output"]], \
        f"guide.md:{line}: a box holds one ```python example, then its ```output"
    example, output = blocks
    (tmp_path / "example.py").write_text(example.source, encoding="utf-8")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    run = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, env=environment,
                         capture_output=True, text=True, timeout=60)
    assert run.stderr == ""
    assert run.stdout == output.source, f"guide.md:{example.line}"
