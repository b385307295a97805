"""tools/build.py: the site it builds, and how it refuses broken input."""
import difflib
import hashlib
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

import tools.build
from tools.build import BuildError, python_for_build
from tools import guide, sims
from tests.pages import Page

ROOT = Path(__file__).resolve().parent.parent
BUILD = [sys.executable, str(ROOT / "tools" / "build.py")]
VNU = ROOT / "node_modules" / "vnu-jar" / "build" / "dist" / "vnu.jar"


def build(*args):
    return subprocess.run(BUILD + list(args), capture_output=True, text=True)


def chapter_titles():
    """The level-1 headings of guide.md, outside code blocks, in order."""
    text = (ROOT / "guide.md").read_text(encoding="utf-8")
    titles, lines, code_lines = [], text.splitlines(), set()
    for block in guide.blocks(text):
        code_lines.update(range(block.line, block.line + len(block.body) + 2))
    for number, line in enumerate(lines, 1):
        if line.startswith("# ") and number not in code_lines:
            titles.append(line[2:].split(" {")[0].strip())
    return titles


def html_files(site):
    return sorted(site.glob("*.html"))


def test_every_chapter_has_a_page_linked_in_order(site):
    index = Page(site / "index.html")
    pages = [href for href in index.chapter_links if href.endswith(".html")
             and href not in ("all.html",)]
    titles = chapter_titles()
    assert len(pages) == len(titles) >= 5
    for number, (href, title) in enumerate(zip(pages, titles)):
        text = (site / href).read_text(encoding="utf-8")
        assert f"<title>{title} · " in text.replace("&#39;", "'")
        # previous and next follow the guide's order
        if number:
            assert f'rel="prev" href="{pages[number - 1]}"' in text
        if number + 1 < len(pages):
            assert f'rel="next" href="{pages[number + 1]}"' in text


def heading_lines(text):
    """guide.md's heading lines outside fenced blocks, as (line, words): the
    words without their {attributes} or Markdown marks."""
    in_code = {n for block in guide.blocks(text)
               for n in range(block.line, block.line + len(block.body) + 2)}
    for number, line in enumerate(text.splitlines(), 1):
        heading = re.match(r"#{1,6} (.*?)\s*(\{[^}]*\})?$", line)
        if heading and number not in in_code:
            words = re.sub(r"\[([^]]*)\]\([^)]*\)", r"\1", heading.group(1))
            yield number, re.sub(r"[`*]", "", words)


def test_every_heading_line_is_a_heading_on_the_page(site_pages):
    """A heading line that pandoc reads as part of the paragraph or list
    item above it (no blank line before it) vanishes from the site, the
    EPUB and the PDF alike: every one is a heading of the built guide, in
    the guide's order (all.html's headings, each without its # link)."""
    straight = str.maketrans("‘’“”", "''\"\"")      # pandoc's typographic quotes
    shown = [" ".join(words.translate(straight).split()).removesuffix("#")
             for words in Page(site_pages / "all.html").headings]
    lines = list(heading_lines((ROOT / "guide.md").read_text(encoding="utf-8")))
    matcher = difflib.SequenceMatcher(a=[words for _, words in lines], b=shown, autojunk=False)
    lost = [f"guide.md:{number}: {words}"
            for tag, start, end, _, _ in matcher.get_opcodes() if tag in ("delete", "replace")
            for number, words in lines[start:end]]
    assert lost == []


def test_every_internal_link_and_anchor_resolves(site):
    parsed = {path.name: Page(path) for path in html_files(site)}
    problems = []
    for name, page in parsed.items():
        for link in page.links:
            parts = urlsplit(link)
            if parts.scheme or link.startswith("//"):
                problems.append(f"{name}: link leaves the site: {link}")
                continue
            target = parts.path or name
            if not (site / target).exists():
                problems.append(f"{name}: no file {target}")
            elif parts.fragment and parts.fragment not in parsed[target].ids:
                problems.append(f"{name}: {target} has no #{parts.fragment}")
    assert not problems, "\n".join(problems)


def test_every_given_file_is_linked_and_downloads_as_it_is_in_code(site):
    """Each given file of code/ (named *_given.py: downloaded, never typed)
    is linked from the guide's pages, and the link leads to a byte-for-byte
    copy of it."""
    givens = sorted((ROOT / "code").rglob("*_given.py"))
    assert givens
    links = {link for path in html_files(site) for link in Page(path).links}
    for source in givens:
        name = source.relative_to(ROOT / "code").as_posix()
        assert f"given/{name}" in links, f"no page links to given/{name}"
        assert (site / "given" / name).read_bytes() == source.read_bytes()


def test_every_listing_is_exactly_its_source(site):
    """The listings of the one-page guide, in order, against the files they include."""
    includes = [block for block in guide.read_guide(ROOT / "guide.md")
                if "include" in block.attributes]
    shown = Page(site / "all.html").listing_texts()
    assert len(shown) == len(includes) > 0
    for block, text in zip(includes, shown):
        source, _ = guide.include(block, ROOT)
        assert text == source, f"guide.md:{block.line}: the listing differs from its file"


def test_every_div_writes_its_attributes_in_one_order(site):
    """The same guide builds the same bytes: the attributes of a listing, a
    Python box's example and a simulation come in the order blocks.lua
    writes them, not in the order of a Lua table's keys, which changes from
    run to run."""
    page = (site / "all.html").read_text("utf-8")
    for kind, order in [("listing", ("class", "style", "tabindex", "role", "aria-label")),
                        ("example", ("class", "tabindex", "role", "aria-label")),
                        ("sim", ("class", "data-sim"))]:
        opened = re.findall(f'<div class="{kind}"[^>]*>', page)
        assert opened, kind
        assert {tuple(re.findall(r'\s([\w-]+)=', tag)) for tag in opened} == {order}


def test_the_markdown_download_has_every_include_filled(site):
    text = (site / "guide.md").read_text(encoding="utf-8")
    expanded, _ = guide.expand((ROOT / "guide.md").read_text(encoding="utf-8"), ROOT,
                               sims.folders())
    assert text == expanded
    assert "def signup(address):" in text


def test_epub_and_pdf_are_built(site):
    assert (site / "guide.epub").read_bytes()[:2] == b"PK"
    assert (site / "guide.pdf").read_bytes()[:5] == b"%PDF-"


def test_search_indexes_every_chapter_once(site_pages):
    """Pagefind's index holds each chapter's page, not all.html, which
    repeats them, nor the cover; the site keeps only the files search uses."""
    entry = json.loads((site_pages / "pagefind" / "pagefind-entry.json").read_text())
    chapters = [page for page in html_files(site_pages)
                if page.name not in ("index.html", "all.html")]
    assert entry["languages"]["en"]["page_count"] == len(chapters) == len(chapter_titles())
    assert (site_pages / "pagefind" / "pagefind.js").is_file()
    assert not list((site_pages / "pagefind").glob("pagefind-*ui*"))


def test_a_page_asks_at_once_for_all_its_first_pictures_need(site_pages):
    """A page preloads, for each simulation it holds, the view, its styles
    and its first state, with the modules they share: files that exist.
    A page without a simulation preloads none of it."""
    for page in html_files(site_pages):
        html = page.read_text(encoding="utf-8")
        held = {name.replace("-", "_")
                for name in re.findall(r'class="sim-mount" data-sim="([^"]+)"', html)}
        preloaded = re.findall(r'<link rel="(?:module)?preload" href="([^"]+)"', html)
        own = {f"static/sims/{folder}/{part}"
               for folder in held for part in ("view.js", "view.css", "first.json")}
        shared = {f"static/sims/{name}.js" for name in ("runtime", "dom", "picture")}
        assert set(preloaded) == (own | shared if held else set()), page.name
        assert len(preloaded) == len(set(preloaded)), page.name
        missing = [href for href in preloaded if not (site_pages / href).is_file()]
        assert not missing, page.name


def test_the_guides_tables_are_tables_in_a_box_that_scrolls(site_pages):
    """A table in guide.md (the kinds of failure, the queue families side by
    side, ...) is an HTML table, in a box the keyboard can scroll sideways
    when a phone is too narrow for it, its columns as wide as their words
    need (no widths from the Markdown's dashes)."""
    html = (site_pages / "all.html").read_text(encoding="utf-8")
    boxed = re.findall(r'<div class="table-box" tabindex="0">\s*<table>', html)
    assert len(boxed) == html.count("<table") >= 4
    assert "<colgroup>" not in html


def test_without_pagefind_the_build_says_what_to_run(monkeypatch, tmp_path):
    monkeypatch.setattr(tools.build, "PAGEFIND", ROOT / "node_modules" / ".bin" / "gone")
    with pytest.raises(BuildError, match=r"node_modules/\.bin/gone not found: run `npm ci`"):
        tools.build.index_for_search(tmp_path)


def test_without_workbox_the_build_says_what_to_run(monkeypatch, tmp_path):
    monkeypatch.setitem(tools.build.WORKBOX, "workbox-sw.js",
                        ROOT / "node_modules" / "workbox-sw" / "gone.js")
    with pytest.raises(BuildError, match=r"node_modules/workbox-sw/gone\.js not found: "
                                         r"run `npm ci`"):
        tools.build.write_service_worker(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_the_service_worker_keeps_every_file_and_python_apart(site_pages):
    """sw.js lists every file of the site once, with the hash of its bytes:
    Python apart, under one version of it all, and the rest to keep from
    the first visit."""
    kept = tools.build.kept_offline(site_pages)
    files = {path.relative_to(site_pages).as_posix() for path in site_pages.rglob("*")
             if path.is_file()} - {"sw.js"}
    pages = [page["url"] for page in kept["pages"]]
    python = kept["python"]["files"]
    assert sorted(pages + python) == sorted(files)
    assert {"static/sims/course.zip", "static/sims/stdlib.zip",
            "pyodide/pyodide.asm.wasm"} <= set(python)
    assert {"index.html", "glossary.html", "pagefind/pagefind.js"} <= set(pages)
    for page in kept["pages"][:5]:
        assert page["revision"] == hashlib.sha256(
            (site_pages / page["url"]).read_bytes()).hexdigest()[:16]


def test_the_font_has_every_character_of_every_diagram_and_listing():
    """Course Mono must draw them all itself: a glyph from another font
    would be another width, and the columns of a diagram would slip."""
    from fontTools.ttLib import TTFont
    drawn = set(TTFont(ROOT / "tools" / "static" / "fonts" / "course-mono.woff2")
                .getBestCmap())
    text = guide.expand((ROOT / "guide.md").read_text(encoding="utf-8"), ROOT,
                        sims.folders())[0]
    used = {ord(c) for block in guide.blocks(text) for line in block.body for c in line}
    missing = sorted(chr(c) for c in used - drawn)
    assert not missing, f"not in tools/static/fonts/course-mono.woff2: {missing}"


def test_the_html_validates(site):
    if not VNU.exists():
        pytest.fail("the HTML validator is missing: run `npm ci` (make check does)")
    result = subprocess.run(["java", "-jar", str(VNU), "--errors-only", "--also-check-css",
                             *map(str, html_files(site))], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_a_simulation_block_gives_its_paragraph_and_a_mount_point(tmp_path):
    (tmp_path / "code").symlink_to(ROOT / "code")
    (tmp_path / "guide.md").write_text(
        '---\ntitle: T\n---\n\n# 1. One\n\n::: {.sim name="race"}\n'
        'Two workers claim one job.\n:::\n')
    result = build("--guide", str(tmp_path / "guide.md"), "--out", str(tmp_path / "site"),
                   "--no-extras")
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "site" / "one.html").read_text()
    assert f'<div class="{guide.SIM_MOUNT}" data-sim="race"></div>' in page
    assert "<p>Two workers claim one job.</p>" in page


# ---------------------------------------------------------------- broken input

@pytest.fixture
def broken(tmp_path):
    """A guide to break, with code/ beside it, and an old site that must survive."""
    (tmp_path / "code").symlink_to(ROOT / "code")
    old = tmp_path / "site"
    old.mkdir()
    (old / "index.html").write_text("the previous site")

    def build_guide(text):
        (tmp_path / "guide.md").write_text(text)
        result = build("--guide", str(tmp_path / "guide.md"), "--out", str(old))
        assert result.returncode == 1, result.stdout + result.stderr
        assert (old / "index.html").read_text() == "the previous site"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["code", "guide.md", "site"]
        return result.stderr
    return build_guide


GOOD_START = "---\ntitle: T\n---\n\n# 1. One\n\nText.\n\n"     # the next line is 9


@pytest.mark.parametrize("text, message", [
    ('```{.python include="code/missing.py"}\n```\n',
     "guide.md:9: included file not found: code/missing.py"),
    ('```{.python include="code/ex01_slow_signup.py" pyobject="nothing"}\n```\n',
     "guide.md:9: pyobject 'nothing' not found in ex01_slow_signup.py"),
    ('```{.python include="code/ex01_slow_signup.py" from="signup" to="nothing"}\n```\n',
     "guide.md:9: to 'nothing' not found in ex01_slow_signup.py"),
    ('::: {.sim name="pinball"}\nA paragraph.\n:::\n',
     "guide.md:9: unknown simulation name 'pinball'"),
    ('::: sidebar\nA paragraph.\n:::\n', "guide.md:9: unknown div class 'sidebar'"),
    ('::: check\nA question.\n', "guide.md:9: div is never closed"),
    ('See [the glossary](#gl-nothing).\n',
     "guide.md:9: link to #gl-nothing, which no heading or block in the guide has"),
    ('Download [it](given/ex09_missing_given.py).\n',
     "guide.md:9: link to given/ex09_missing_given.py, but code/ex09_missing_given.py is "
     "not a given file"),
    ('Download [it](given/ex09_charge_worker.py).\n',
     "guide.md:9: link to given/ex09_charge_worker.py, but code/ex09_charge_worker.py is "
     "not a given file"),
])
def test_broken_input_names_its_line_and_keeps_the_old_site(broken, text, message):
    stderr = broken(GOOD_START + text)
    assert f"build failed: {message}" in stderr


def test_a_pandoc_warning_points_at_the_guide_line(broken):
    """pandoc reads the expanded guide: its line numbers are mapped back."""
    listing = '```{.python include="code/ex01_slow_signup.py"}\n```\n\n'
    stderr = broken(GOOD_START + listing + "## Twice {#same}\n\n## Again {#same}\n")
    assert "\nguide.md:14: Duplicate identifier 'same'\n" in stderr, stderr


# ---------------------------------------------------------------- the Python it runs in

def pythons_outside_the_venv():
    """The Python that made .venv/, and the system's, if it has another."""
    found = {Path(sys.base_prefix) / "bin" / "python3", Path("/usr/bin/python3")}
    return sorted(str(path) for path in found if path.is_file())


@pytest.mark.parametrize("python", pythons_outside_the_venv())
def test_python3_tools_build_py_works_as_typed(python, tmp_path):
    """The README's command, run by a Python without the build's packages,
    builds the site with .venv's Python."""
    result = subprocess.run([python, str(ROOT / "tools" / "build.py"), "--no-extras",
                             "--out", str(tmp_path / "site")], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("built ") and not result.stderr
    assert (tmp_path / "site" / "index.html").is_file()


@pytest.fixture
def venv(tmp_path):
    """A stand-in for .venv/, set up as `make site` leaves it."""
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "installed").touch()
    return tmp_path / ".venv"


def test_inside_the_venv_the_build_runs_where_it_is(venv):
    assert python_for_build(prefix=venv, venv=venv, has_needs=False) is None


def test_outside_the_venv_the_build_runs_again_in_it(venv, tmp_path):
    """Even where the running Python has the packages: .venv's are the pinned ones."""
    for has_needs in (False, True):
        assert python_for_build(prefix=tmp_path / "elsewhere", venv=venv,
                                      has_needs=has_needs) == venv / "bin" / "python"


def test_without_a_venv_a_python_with_the_packages_builds(tmp_path):
    assert python_for_build(prefix=tmp_path / "elsewhere", venv=tmp_path / ".venv",
                                  has_needs=True) is None


def test_a_venv_that_make_site_did_not_finish_is_not_used(venv, tmp_path):
    (venv / "installed").unlink()
    with pytest.raises(BuildError, match=r"not set up: run `make site` once"):
        python_for_build(prefix=tmp_path / "elsewhere", venv=venv, has_needs=False)


def test_without_a_venv_or_the_packages_it_says_what_to_run(tmp_path):
    """A checkout without .venv/, built by a Python without site-packages (-S):
    exit status 1, the command to run, and no site."""
    shutil.copytree(ROOT / "tools", tmp_path / "tools",
                    ignore=shutil.ignore_patterns("__pycache__", "static"))
    (tmp_path / "code").symlink_to(ROOT / "code")
    shutil.copy(ROOT / "guide.md", tmp_path)
    result = subprocess.run([sys.executable, "-S", str(tmp_path / "tools" / "build.py")],
                            capture_output=True, text=True)
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stderr.startswith("build failed: ") and "run `make site` once" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["code", "guide.md", "tools"]
