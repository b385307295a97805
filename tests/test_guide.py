"""guide.md itself: its console blocks are all collected, its includes point
at real code, and mistakes in its markup give guide.md:LINE errors."""

import ast
import collections
import functools
import re
import sqlite3
import shutil
import subprocess
import sys
import threading

import pytest
from sybil import Document

from tools import guide, load, sims
from tools.harness import catalogue, sandbox, sessions

GUIDE = catalogue.ROOT / "guide.md"
CODE = catalogue.ROOT / "code"


def count_console_fences(text):
    """Console blocks found by walking the lines, independently of tools/guide.py."""
    count, closing = 0, None
    for line in text.splitlines():
        stripped = line.strip()
        if closing:
            if stripped.startswith(closing) and set(stripped) == {closing[0]}:
                closing = None
        elif stripped.startswith(("```", "~~~")):
            fence = stripped[:len(stripped) - len(stripped.lstrip(stripped[0]))]
            info = stripped[len(fence):].strip()
            count += info == "console" or bool(re.search(r"\{.*\.console\b", info))
            closing = fence
    return count


def sybil_console_blocks(text):
    return list(sessions.parse_console_blocks(Document(text, "guide.md")))


def test_every_console_block_is_collected():
    text = GUIDE.read_text(encoding="utf-8")
    expected = count_console_fences(text)
    print(f"guide.md has {expected} console blocks")
    assert expected > 0
    assert len(sybil_console_blocks(text)) == expected
    # and pytest really collects them (a wrong Sybil path would silently skip guide.md)
    listing = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "guide.md"], cwd=catalogue.ROOT, capture_output=True, text=True).stdout
    assert listing.count("guide.md::") == expected, listing


def test_the_fence_count_is_not_fooled():
    text = ("```console\n$ a\n```\n\n````markdown\n```console\n$ b\n```\n````\n\n"
            "   ~~~{.console edit=\"f: a => b\"}\n   $ c\n   ~~~\n\n```{.python}\n```\n")
    assert count_console_fences(text) == 2 == len(sybil_console_blocks(text))


def include_blocks():
    return [b for b in guide.read_guide(GUIDE) if "include" in b.attributes]


def test_every_include_resolves():
    """The build's own reader expands every include of guide.md without error."""
    markdown, origin = guide.expand(GUIDE.read_text(encoding="utf-8"), catalogue.ROOT,
                                    sims.folders())
    assert len(origin) == len(markdown.splitlines())


def test_the_guide_includes_every_exercise():
    included = {b.attributes["include"] for b in include_blocks()}
    assert {f"code/{p.name}" for p in CODE.glob("ex*.py")
            if not p.stem.endswith("_given")} <= included


WIDEST_LINE = 79       # PEP 8's limit, and what a page of print or PDF holds


def test_every_block_the_guide_writes_out_fits_in_79_columns():
    """Every line of guide.md's diagrams, tables in text and commands is at
    most 79 characters long, like the listings. Transcripts are what the
    code prints, and may be wider: they scroll sideways, and say so."""
    too_long = [f"guide.md:{block.line + number}: {len(line)} characters"
                for block in guide.read_guide(GUIDE)
                if "console" not in block.classes and "include" not in block.attributes
                for number, line in enumerate(block.body, 1) if len(line) > WIDEST_LINE]
    assert too_long == []


def test_every_line_of_code_fits_in_79_columns():
    """Every line of every Python file in code/, typed or given, is at most
    79 characters long, so a listing is wrapped where the reader types it,
    never by the page, and never scrolls sideways in print or in the PDF."""
    too_long = [f"code/{path.relative_to(CODE).as_posix()}:{number}: {len(line)} characters"
                for path in sorted(CODE.rglob("*.py"))
                for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                if len(line) > WIDEST_LINE]
    if too_long:                 # every one, where an assert's message would be cut short
        pytest.fail(f"{len(too_long)} lines of code/ are longer than {WIDEST_LINE} characters:\n"
                    + "\n".join(too_long), pytrace=False)


def included_lines(path):
    """The lines of code/PATH that the guide's listings show, counting from 1."""
    shown = set()
    for block in include_blocks():
        if block.attributes["include"] == f"code/{path}":
            text, first = guide.include(block, catalogue.ROOT)
            shown.update(range(first, first + len(text.splitlines())))
    return shown


def test_a_given_file_is_linked_never_listed_whole_and_says_it_is_given():
    """A given file (code/**/*_given.py) is downloaded, never typed: the
    guide links to it, and its opening comment says so. No listing shows the
    whole file: a listing may show a piece of it (a function, by pyobject)
    for reading, in a section that says not to type it."""
    text = GUIDE.read_text(encoding="utf-8")
    lines = text.splitlines()
    givens = sorted(CODE.rglob("*_given.py"))
    assert givens
    for path in givens:
        name = path.relative_to(CODE).as_posix()
        assert f"](given/{name})" in text, f"guide.md never links to given/{name}"
        assert "GIVEN" in path.read_text(encoding="utf-8").split("\n\n")[0], name
        code = [number for number, line in enumerate(path.read_text().splitlines(), 1)
                if line.strip()]
        assert not set(code) <= included_lines(name), f"guide.md lists all of {name}"
        for block in include_blocks():
            if block.attributes["include"] == f"code/{name}":
                assert "pyobject" in block.attributes, \
                    f"guide.md:{block.line}: {name} is given: show a piece, by pyobject"
                section = lines[:block.line]
                heading = max(n for n, line in enumerate(section) if line.startswith("## "))
                assert "do not type" in " ".join(section[heading:]), \
                    f"guide.md:{block.line}: no word before this piece of {name} " \
                    "says it is for reading: do not type it"


def test_the_listings_of_exercise_9_are_the_whole_worker():
    """Exercise 9 is typed in pieces, beside the prose: together the pieces
    are every line of the file but the blank lines between them."""
    path = "ex09_charge_worker.py"
    lines = (CODE / path).read_text(encoding="utf-8").splitlines()
    shown = included_lines(path)                 # once: it reads every include of the guide
    missing = [number for number, line in enumerate(lines, 1)
               if line.strip() and number not in shown]
    assert not missing, f"lines of {path} no listing shows: {missing}"


def test_exercise_9_is_typed_in_sittings_of_at_most_200_lines():
    """Chapter 10 has the first part of ex09's listings and Chapter 11 the
    rest, split by a run of `admission`, and no sitting (the lines typed
    between two runs, as tools/load.py counts them) asks for more than 200."""
    text = GUIDE.read_text(encoding="utf-8").splitlines()
    chapters = [number for number, line in enumerate(text, 1) if line.startswith("# ")]
    titles = {text[max(c for c in chapters if c <= block.line) - 1].split(" ")[1]
              for block in include_blocks()
              if block.attributes["include"] == "code/ex09_charge_worker.py"}
    assert titles == {"10.", "11."}, titles
    sittings = load.sittings(guide.blocks(GUIDE.read_text(encoding="utf-8")))
    assert len(sittings["ex09_charge_worker.py"]) == 3
    assert max(sittings["ex09_charge_worker.py"]) <= 200, sittings["ex09_charge_worker.py"]


def first_listings(before):
    """The listings of ex09 that the guide shows before the line `before`,
    joined as a reader who typed only those would have them."""
    text = GUIDE.read_text(encoding="utf-8").splitlines()
    limit = next(number for number, line in enumerate(text, 1) if line.startswith(before))
    typed = [guide.include(block, catalogue.ROOT)[0] for block in include_blocks()
             if block.attributes["include"] == "code/ex09_charge_worker.py"
             and block.line < limit]
    return "\n\n\n".join(typed) + "\n"


@pytest.mark.parametrize("before, commands", [
    ("# 11. Limits: Bounding the Work",
     ["o7", "crash before-call", "crash after-commit", "crash after-record"]),
    ("That is all that admission needs. Run it", ["admission"])])
def test_after_each_sitting_its_commands_run(tmp_path, before, commands):
    """The reader runs a sitting's commands with only the listings shown so
    far typed: a file made of them, beside the given file, prints what the
    whole worker prints (Chapter 10's o7 and crash points; Chapter 11's
    admission, run between its two sittings)."""
    part = tmp_path / "part"
    part.mkdir()
    (part / "ex09_charge_worker.py").write_text(first_listings(before))
    shutil.copy(CODE / "ex09_practice_given.py", part)
    whole = tmp_path / "whole"
    shutil.copytree(CODE, whole, ignore=sandbox.LEFTOVERS)
    for command in commands:
        run = f"python3 ex09_charge_worker.py {command}"
        assert sandbox.run(run, part) == sandbox.run(run, whole), command


def test_find_object(tmp_path):
    path = tmp_path / "q.py"
    path.write_text("class Queue:\n    @staticmethod\n    def claim():\n        pass\n\n"
                    "def work():\n    return 1\n\nSCHEMA = \"\"\"\nCREATE\n\"\"\"\n")
    assert guide.find_object(path, "Queue", 1) == (1, 4)
    assert guide.find_object(path, "Queue.claim", 1) == (2, 4)
    assert guide.find_object(path, "work", 1) == (6, 7)
    assert guide.find_object(path, "SCHEMA", 1) == (9, 11)
    with pytest.raises(guide.GuideError, match="guide.md:9: pyobject 'Queue.work' not found"):
        guide.find_object(path, "Queue.work", 9)


PARTS = """\
# What the file does.
import json
from pathlib import Path

LIMIT = 3                        # a constant: its comment
                                 # goes on below it


# ---- Part two: a heading for what follows

SCHEMA = "a"
SCHEMA += "b"


class Queue:
    # the claim
    @staticmethod
    def claim():
        pass


if __name__ == "__main__":
    print(LIMIT)
"""


@pytest.mark.parametrize("attributes, lines", [
    ({"pyobject": "import json"}, (2, 2)),
    ({"pyobject": "from pathlib import Path"}, (3, 3)),
    ({"pyobject": "SCHEMA +="}, (12, 12)),
    ({"pyobject": "__main__"}, (22, 23)),
    ({"to": "from pathlib import Path"}, (1, 3)),          # the file's top
    ({"pyobject": "LIMIT"}, (5, 6)),                       # its comment goes on below
    ({"from": "LIMIT", "to": "LIMIT"}, (5, 6)),            # and no heading is above it
    ({"from": "SCHEMA", "to": "SCHEMA +="}, (9, 12)),      # its heading comes with it
    ({"from": "Queue.claim", "to": "Queue.claim"}, (16, 19)),
    ({"from": "Queue", "to": "__main__"}, (15, 23)),
])
def test_an_include_shows_the_part_its_names_say(tmp_path, attributes, lines):
    (tmp_path / "parts.py").write_text(PARTS)
    block = guide.Block(1, "", "```", ["python"], {"include": "parts.py", **attributes})
    text, first = guide.include(block, tmp_path)
    assert (first, first + len(text.splitlines()) - 1) == lines
    assert text == "\n".join(PARTS.splitlines()[first - 1:lines[1]])


@pytest.mark.parametrize("attributes, message", [
    ({"pyobject": "Queue.work"}, "pyobject 'Queue.work' not found in parts.py"),
    ({"pyobject": "LIMIT", "from": "LIMIT"}, "use pyobject= or from=/to=, not both"),
    ({"from": "Queue"}, "from= needs a to="),
    ({"from": "Nope", "to": "Queue"}, "from 'Nope' not found in parts.py"),
    ({"from": "Queue", "to": "LIMIT"}, "to='LIMIT' comes before from='Queue'"),
    ({"pyobject": "LIMIT", "lines": "1-3"}, "unknown include attribute lines"),
])
def test_an_include_whose_names_do_not_fit_names_its_line(tmp_path, attributes, message):
    (tmp_path / "parts.py").write_text(PARTS)
    block = guide.Block(7, "", "```", ["python"], {"include": "parts.py", **attributes})
    with pytest.raises(guide.GuideError) as error:
        guide.include(block, tmp_path)
    assert str(error.value).startswith(f"guide.md:7: {message}")


def test_a_name_two_statements_have_is_an_error(tmp_path):
    (tmp_path / "parts.py").write_text(PARTS + "\nLIMIT = 4\n")
    block = guide.Block(7, "", "```", ["python"], {"include": "parts.py", "to": "LIMIT"})
    with pytest.raises(guide.GuideError, match=r"^guide.md:7: to 'LIMIT' is ambiguous in "
                                               r"parts.py: it names lines 5, 25$"):
        guide.include(block, tmp_path)


def test_the_reader_imports_no_simulation():
    """guide.py reads the markup and nothing else: the build hands it the
    simulations' names, so what reads the guide without building the site
    (the harness, grading, load.py) never loads tools/sims/."""
    check = ("import sys, tools.guide, tools.harness.plugin, tools.load, tools.grade\n"
             "print([m for m in sys.modules if m == 'tools.sims' or m.startswith('tools.sims.')])")
    run = subprocess.run([sys.executable, "-c", check], cwd=catalogue.ROOT,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "[]\n"


def test_blocks_lua_renders_the_markup_guide_py_lists():
    """blocks.lua keeps lists of its own, in Lua: they must be guide.py's table."""
    lua = (catalogue.ROOT / "tools" / "blocks.lua").read_text(encoding="utf-8")
    [stripped] = re.findall(r"for _, name in ipairs\(\{(.*)\}\) do\n\s*block\.attributes", lua)
    assert set(re.findall(r'"(\w+)"', stripped)) == guide.INCLUDE_ATTRS | {guide.LISTING_START}
    divs = re.findall(r'(?:div|inner)\.classes:includes\("([\w-]+)"\)', lua)
    assert set(divs) == guide.DIV_CLASSES
    assert re.findall(r'<div class="([\w-]+)" data-sim=', lua) == [guide.SIM_MOUNT]


def test_pandoc_attributes():
    assert guide.parse_attributes("console", 1) == (["console"], {})
    assert guide.parse_attributes('{.python #ex1 include="code/a.py" to=Job}', 1) == (
        ["python"], {"id": "ex1", "include": "code/a.py", "to": "Job"})
    assert guide.parse_attributes(r'{.console edit="f: say(\"hi\") => x"}', 1) == (
        ["console"], {"edit": 'f: say("hi") => x'})
    with pytest.raises(guide.GuideError, match="guide.md:7: cannot read attributes"):
        guide.parse_attributes('{.console edit="unterminated}', 7)


@pytest.mark.parametrize("markdown, message", [
    ('# A\n\n```{.python include="code/nope.py"}\n```\n',
     "guide.md:3: included file not found: code/nope.py"),
    ('# A\n\n```{.python include="code/ex02_jobs.py" pyobject="nope"}\n```\n',
     "guide.md:3: pyobject 'nope' not found in ex02_jobs.py"),
    ('# A\n\n```{.python include="code/ex02_jobs.py" lines="5-9"}\n```\n',
     "guide.md:3: unknown include attribute lines"),
    ('# A\n\n```{.python include="code/ex02_jobs.py" from="make_job" to="nope"}\n```\n',
     "guide.md:3: to 'nope' not found in ex02_jobs.py"),
    ('# A\n\n```{.python include="code/ex02_jobs.py" from="make_job"}\n```\n',
     "guide.md:3: from= needs a to="),
    ('# A\n\n```{.python include="code/ex02_jobs.py" pyobject="make_job" to="main"}\n```\n',
     "guide.md:3: use pyobject= or from=/to=, not both"),
    ('# A\n\n```{.python include="code/ex02_jobs.py"}\nx = 1\n```\n',
     "guide.md:3: an include block must be empty"),
    ('# A\n\n```python\nprint(1)\n```\n',
     "guide.md:3: Python listings are included from code/, never pasted"),
    ('# A\n\n```output\nx\n```\n', "guide.md:3: an output block belongs in a `python` box"),
    ('# A\n\n::: python\nx\n\n```{.python include="code/ex02_jobs.py"}\n```\n:::\n',
     "guide.md:6: a `python` box holds only its example"),
    ('# A\n\n::: python\nx\n\n```console\n$ true\n```\n:::\n',
     "guide.md:6: a `python` box holds only its example"),
    ('# A\n\n::: python\nx\n:::\n\n```python\nprint(1)\n```\n',
     "guide.md:7: Python listings are included from code/, never pasted"),
    ('# A\n\n::: warning\nx\n:::\n', "guide.md:3: unknown div class 'warning'"),
    ('# A\n\n::: {.sim name="pinball"}\nx\n:::\n', "guide.md:3: unknown simulation name 'pinball'"),
    ('# A\n\n::: check\nx\n\n::: answer\ny\n:::\n', "guide.md:3: div is never closed"),
    ('# A\n\nx\n:::\n', "guide.md:4: ':::' closes a div that was never opened"),
    ('# A\n\n```console\n$ true\n', "guide.md:3: code block is never closed"),
])
def test_markup_mistakes_name_their_line(markdown, message):
    with pytest.raises(guide.GuideError) as error:
        guide.expand(markdown, catalogue.ROOT, {"race"})
    assert str(error.value).startswith(message)


def test_a_python_box_may_hold_an_example_and_its_output():
    text = '# A\n\n::: python\n**x**\n\n```python\nprint(1)\n```\n\n```output\n1\n```\n:::\n'
    markdown, _ = guide.expand(text, catalogue.ROOT, set())
    assert markdown == text
    [(line, inside, blocks)] = guide.python_boxes(text)
    assert line == 3 and inside.startswith("**x**") and inside.endswith("```")
    assert [(block.line, block.classes) for block in blocks] == [(6, ["python"]), (10, ["output"])]


def test_a_listing_expands_to_exactly_its_source():
    markdown, _ = guide.expand(
        '# A\n\n```{.python include="code/ex02_jobs.py" pyobject="make_job"}\n```\n',
        catalogue.ROOT, set())
    source = (CODE / "ex02_jobs.py").read_text().splitlines()
    first = next(n for n, line in enumerate(source, 1) if line.startswith("def make_job"))
    body = markdown.split("```")[1].split("\n", 1)[1]
    assert body == "\n".join(source[first - 1:first + 3]) + "\n"
    assert f'startFrom="{first}"' in markdown


def fixture_block(info, body="$ python3 ex99_demo.py\n...\n"):
    """A one-block guide: the block's fence is on line 3."""
    blocks = sybil_console_blocks(f"# Fixture\n\n```{info}\n{body}```\n")
    assert len(blocks) == 1
    return blocks[0].parsed


@pytest.fixture
def demo_folder(tmp_path):
    (tmp_path / "ex99_demo.py").write_text("print('hello')\nprint('hello again')\n")
    return tmp_path


def test_unknown_console_attribute_fails_loudly(demo_folder):
    block = fixture_block('{.console colour="green"}')
    assert sessions.check_block(block, demo_folder) == \
        "guide.md:3: unknown console attribute colour"


@pytest.mark.parametrize("edit, complaint", [
    ("ex99_demo.py: goodbye => hi", "ex99_demo.py holds 'goodbye' 0 times, not once"),
    ("ex99_demo.py: hello => hi", "ex99_demo.py holds 'hello' 2 times, not once"),
    ("ex98_other.py: a => b", "there is no ex98_other.py to edit"),
    ("ex99_demo.py: hello", "is not of the form FILE: OLD => NEW"),
])
def test_bad_edit_fails_with_guide_line(demo_folder, edit, complaint):
    message = sessions.check_block(fixture_block(f'{{.console edit="{edit}"}}'), demo_folder)
    assert message.startswith("guide.md:3: ") and complaint in message


def test_a_good_edit_changes_only_the_copy(demo_folder):
    block = fixture_block('{.console edit="ex99_demo.py: hello again => bye"}',
                          "$ python3 ex99_demo.py\nhello\nbye\n")
    assert sessions.check_block(block, demo_folder) is None
    assert "hello again" in (demo_folder / "ex99_demo.py").read_text()


def test_a_missing_exercise_file_fails_the_block(tmp_path):
    assert sessions.check_block(fixture_block("console"), tmp_path) == \
        f"guide.md:3: ex99_demo.py is missing from {tmp_path}"


def test_output_before_any_command_is_an_error(demo_folder):
    message = sessions.check_block(fixture_block("console", "hello\n$ true\n"), demo_folder)
    assert message == "guide.md:4: output before the first `$ ` command"


# ---------------------------------------------------------------- the glossary

GLOSSARY_HEADING = "# 13. Glossary"
# The terms the syllabus requires at the least, by their anchors.
REQUIRED_TERMS = """ack at-least-once at-most-once atomic backoff backpressure check-then-act
claim dead-letter durable exactly-once fencing-token handler heartbeat idempotency-key
idempotent jitter job lease outbox poison-message producer consumer queue race-condition
retry-budget thundering-herd transient-failure permanent-failure ambiguous-failure
visibility-timeout worker admission-control deadline reconcile tenant decoupling thread""".split()


def glossary_and_chapters():
    text = GUIDE.read_text(encoding="utf-8")
    start = text.index(GLOSSARY_HEADING)
    return text[start:], text[:start]


def test_every_glossary_entry_is_linked_from_a_chapter_and_every_link_has_an_entry():
    glossary, chapters = glossary_and_chapters()
    entries = re.findall(r"^### .+ \{#(gl-[\w-]+)\}$", glossary, re.M)
    links = set(re.findall(r"\]\(#(gl-[\w-]+)\)", chapters))
    assert len(entries) == len(set(entries))
    assert [entry for entry in entries if entry not in links] == []
    assert sorted(links - set(entries)) == []


def test_the_glossary_has_every_required_term_in_alphabetical_order():
    glossary, _ = glossary_and_chapters()
    terms = re.findall(r"^### (.+) \{#gl-([\w-]+)\}$", glossary, re.M)
    assert [name for name in REQUIRED_TERMS if name not in {anchor for _, anchor in terms}] == []
    names = [term.lower() for term, _ in terms]
    assert names == sorted(names)


def test_just_enough_sql_says_what_sqlite_does(tmp_path):
    """Just Enough SQL's claims: a reader sees only committed work; a second
    writer waits for the first one's commit, and, waiting no longer, fails
    with `database is locked`."""
    path = tmp_path / "jobs.db"
    first = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    first.execute("CREATE TABLE jobs (id INTEGER PRIMARY KEY)")
    impatient = sqlite3.connect(path, isolation_level=None, timeout=0)
    patient = sqlite3.connect(path, isolation_level=None)      # the default wait
    first.execute("BEGIN")
    first.execute("INSERT INTO jobs DEFAULT VALUES")
    assert impatient.execute("SELECT count(*) FROM jobs").fetchone() == (0,)
    with pytest.raises(sqlite3.OperationalError, match="^database is locked$"):
        impatient.execute("INSERT INTO jobs DEFAULT VALUES")
    commit = threading.Timer(0.2, first.execute, ["COMMIT"])
    commit.start()
    patient.execute("INSERT INTO jobs DEFAULT VALUES")         # waits for the commit
    commit.join()
    assert impatient.execute("SELECT count(*) FROM jobs").fetchone() == (2,)


def test_tinyq_is_typed_whole_in_two_sittings_of_at_most_200_lines():
    """Chapter 9 has the reader type capstone/tinyq.py in two listings (the
    file's top to Job, then the Queue class): together they show every line
    of the file but the blank ones between them, none twice, and neither
    is longer than one sitting's 200 lines."""
    tinyq = "code/capstone/tinyq.py"
    sittings = [b for b in include_blocks() if b.attributes["include"] == tinyq][:2]
    shown = []
    for block in sittings:
        text, first = guide.include(block, catalogue.ROOT)
        lines = text.split("\n")
        assert len(lines) <= 200, f"guide.md:{block.line}: {len(lines)} lines at one sitting"
        shown += range(first, first + len(lines))
    source = (catalogue.ROOT / tinyq).read_text(encoding="utf-8").splitlines()
    left_out = [n for n in range(1, len(source) + 1) if n not in shown and source[n - 1].strip()]
    assert left_out == [] and len(shown) == len(set(shown)), (left_out, sittings)


def drill_sections(text):
    """Each Study Drills and Break It section of the guide: (line, text),
    the text up to the next heading."""
    lines = text.splitlines()
    for start, line in enumerate(lines):
        if line in ("### Study Drills", "### Break It"):
            end = next((n for n in range(start + 1, len(lines)) if lines[n].startswith("#")),
                       len(lines))
            yield start + 1, "\n".join(lines[start + 1:end])


def test_every_setting_a_drill_changes_it_says_to_put_back():
    """A drill or Break It that sets one of the file's settings ends by
    saying to put it back, by name: three exercises start as a copy of the
    one before, and a setting left changed rides into the copy (Exercise
    8 with MAX_ATTEMPTS = 2 ends "2 done, 3 dead")."""
    forgotten = []
    for line, section in drill_sections(GUIDE.read_text(encoding="utf-8")):
        changed = set(re.findall(r"\b(?:[Ss]et|[Cc]hange) `([A-Z][A-Z_]+)", section))
        sentences = re.split(r"[.?!]\s", " ".join(section.split()))
        backs = [sentence for sentence in sentences if re.search(r"\bback\b", sentence)]
        put_back = {name for name in changed for sentence in backs if f"`{name}" in sentence}
        forgotten += [f"guide.md:{line}: {name}" for name in sorted(changed - put_back)]
        # and the value it goes back to is the one a listing gives it
        for sentence in backs:
            for name, value in re.findall(r"`([A-Z][A-Z_]+)(?:` back to `?| = )(\d[\d.]*\d|\d)",
                                          sentence):
                if float(value) not in listed_settings().get(name, ()):
                    forgotten.append(f"guide.md:{line}: {name} back to {value}")
    assert forgotten == []


@functools.cache
def listed_settings():
    """Each setting's values in code/'s files: NAME -> {numbers}."""
    values = collections.defaultdict(set)
    for path in [*catalogue.CODE.glob("*.py"), *catalogue.CODE.glob("capstone/*.py")]:
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) \
                    and isinstance(node.value.value, (int, float)):
                values[node.targets[0].id].add(node.value.value)
    return values


# The products whose defaults the guide states. A default changes between
# versions, so the text names the version (or, for a managed service, the
# year) it was checked against, in the same paragraph.
PRODUCTS = (r"RabbitMQ", r"\bSQS\b", r"Pub/Sub", r"\bKafka\b", r"\bLambda\b", r"\bOban\b",
            r"\bRiver\b", r"Good ?Job", r"Solid Queue", r"Procrastinate", r"BullMQ", r"Sidekiq",
            r"Celery", r"\bRQ\b", r"Stripe", r"PostgreSQL", r"SQLite", r"\bPython\b",
            r"\bnginx\b", r"\bgRPC\b", r"\bRedis\b")
DEFAULT = r"\bdefault\b|\bunless you (?:set|pass|configure|give)\b"
# a pin: the product and its version ("Celery 5.6", "Sidekiq (as of version
# 8.1"), "version 1.5", or a year
PIN = (r"(?:{product})(?:'s)? (?:\(?(?:as of )?version )?\d+(?:\.\d+)*"
       r"|\bversion \d+(?:\.\d+)*|\b20\d\d\b")


def test_every_product_default_names_its_version_or_year():
    """A sentence that states a product's default (the word "default", or
    "unless you set", and the product's name) stands in a paragraph that
    names the version of that product, or the year, the default was checked
    against: "as of Sidekiq 8.1", "(2026)". Where a sentence names several
    products, one of them is the default's owner, and its pin is enough."""
    text = GUIDE.read_text(encoding="utf-8")
    chapters = text[:text.index(GLOSSARY_HEADING)]
    unpinned = []
    for paragraph in re.finditer(r"(?:.+\n?)+", chapters):
        words = " ".join(paragraph.group().split())
        line = chapters.count("\n", 0, paragraph.start()) + 1
        for sentence in re.split(r"(?<=[.:;])\s", words):
            named = [name for name in PRODUCTS if re.search(name, sentence)]
            if re.search(DEFAULT, sentence) and named and not any(
                    re.search(PIN.format(product=name), words) for name in named):
                unpinned.append(f"guide.md:{line}: {sentence}")
    assert unpinned == []


def test_the_postgresql_defaults_the_guide_names_are_the_labs(postgresql_server):
    """Chapters 4, 11 and 12 say that PostgreSQL 15, the lab's version,
    runs at READ COMMITTED and waits for each commit to reach the disk
    (synchronous_commit on) unless told otherwise: so the lab's server does."""
    import psycopg                       # the lab's library, as its tests import it
    with psycopg.connect(postgresql_server) as db:
        assert db.info.server_version // 10000 == 15
        assert [db.execute(f"SHOW {setting}").fetchone()[0] for setting in
                ("default_transaction_isolation", "synchronous_commit")] == ["read committed", "on"]
    assert "PostgreSQL 15" in " ".join(GUIDE.read_text(encoding="utf-8").split())
