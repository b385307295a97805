"""guide.md itself: its console blocks are all collected, its includes point
at real code, and mistakes in its markup give guide.md:LINE errors."""

import re
import subprocess
import sys

import pytest
from sybil import Document

import guide
from harness import catalogue, sessions

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
    markdown, origin = guide.expand(GUIDE.read_text(encoding="utf-8"), catalogue.ROOT)
    assert len(origin) == len(markdown.splitlines())


def test_the_guide_includes_every_exercise():
    included = {b.attributes["include"] for b in include_blocks()}
    assert {f"code/{p.name}" for p in CODE.glob("ex*.py")} <= included


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


def test_pandoc_attributes():
    assert guide.parse_attributes("console", 1) == (["console"], {})
    assert guide.parse_attributes('{.python #ex1 include="code/a.py" lines=3-9}', 1) == (
        ["python"], {"id": "ex1", "include": "code/a.py", "lines": "3-9"})
    assert guide.parse_attributes(r'{.console edit="f: say(\"hi\") => x"}', 1) == (
        ["console"], {"edit": 'f: say("hi") => x'})
    with pytest.raises(guide.GuideError, match="guide.md:7: cannot read attributes"):
        guide.parse_attributes('{.console edit="unterminated}', 7)


@pytest.mark.parametrize("markdown, message", [
    ('# A\n\n```{.python include="code/nope.py"}\n```\n',
     "guide.md:3: included file not found: code/nope.py"),
    ('# A\n\n```{.python include="code/ex02_jobs.py" pyobject="nope"}\n```\n',
     "guide.md:3: pyobject 'nope' not found in ex02_jobs.py"),
    ('# A\n\n```{.python include="code/ex02_jobs.py" lines="5-900"}\n```\n',
     "guide.md:3: lines=5-900 is outside code/ex02_jobs.py"),
    ('# A\n\n```{.python include="code/ex02_jobs.py"}\nx = 1\n```\n',
     "guide.md:3: an include block must be empty"),
    ('# A\n\n```python\nprint(1)\n```\n',
     "guide.md:3: Python listings are included from code/, never pasted"),
    ('# A\n\n::: warning\nx\n:::\n', "guide.md:3: unknown div class 'warning'"),
    ('# A\n\n::: {.sim name="pinball"}\nx\n:::\n', "guide.md:3: unknown simulation name 'pinball'"),
    ('# A\n\n::: check\nx\n\n::: answer\ny\n:::\n', "guide.md:3: div is never closed"),
    ('# A\n\nx\n:::\n', "guide.md:4: ':::' closes a div that was never opened"),
    ('# A\n\n```console\n$ true\n', "guide.md:3: code block is never closed"),
])
def test_markup_mistakes_name_their_line(markdown, message):
    with pytest.raises(guide.GuideError) as error:
        guide.expand(markdown, catalogue.ROOT)
    assert str(error.value).startswith(message)


def test_a_listing_expands_to_exactly_its_source():
    markdown, _ = guide.expand(
        '# A\n\n```{.python include="code/ex02_jobs.py" pyobject="make_job"}\n```\n',
        catalogue.ROOT)
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

GLOSSARY_HEADING = "# 12. Glossary"
# The terms the syllabus requires at the least, by their anchors.
REQUIRED_TERMS = """ack at-least-once at-most-once atomic backoff backpressure check-then-act
claim dead-letter durable exactly-once fencing-token handler heartbeat idempotency-key
idempotent jitter job lease outbox poison-message producer consumer queue race-condition
retry-budget thundering-herd transient-failure permanent-failure ambiguous-failure
visibility-timeout worker admission-control deadline reconcile tenant""".split()


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


def test_tinyq_is_typed_whole_in_two_sittings_of_at_most_200_lines():
    """Chapter 9 has the reader type capstone/tinyq.py in two listings (a
    range of lines, then the Queue class): together they show every line
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
