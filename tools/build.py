"""Build the course site: guide.md and code/ become a static site in site/.

Usage:  python3 tools/build.py [--guide FILE] [--out DIR] [--no-extras]

It runs in the course's virtual environment, .venv/, which `make site`
makes once from requirements.txt: started by any other Python, it starts
itself again with .venv/bin/python. Before `make` has set .venv/ up, it
builds with a Python that can import what it needs (NEEDS), and any other
stops with exit status 1 and says to run `make site` (python_for_build).

The recipe, in main():
1. find the pinned pandoc (3.9, from pypandoc-binary) and refuse any other;
2. read guide.md with tools/guide.py: check every div, simulation name and
   include, and expand each include into the listing it names (the
   expanded guide is also published as site/guide.md);
3. run pandoc once, with tools/site.lua as a custom writer: it applies the
   block filters of tools/blocks.lua (transcripts, diagrams, numbered
   listings, folded answers, simulation mounts, exercise headings, the
   Python boxes and their examples), splits the guide into one page per
   chapter, points each #anchor link at the page that holds it, and returns
   everything as JSON;
4. put each page into tools/templates/ (jinja2), copy tools/static/ and the
   given files (site/given/); copy the simulations' page code from
   tools/sims/ into site/static/sims/, Pyodide from node_modules/pyodide
   into site/pyodide/, and pack the simulations' Python into
   site/static/sims/course.zip, beside their standard library, stdlib.zip
   (tools/sims/package.py); index the chapters for search with Pagefind
   (node_modules/.bin/pagefind) into site/pagefind/; write the service
   worker that keeps the site for reading offline (tools/sw.js, on
   Workbox's files, copied to site/workbox/);
5. meanwhile, in threads of their own, make the EPUB (pandoc -t epub3) and
   the PDF (pandoc -t typst, set by the typst package), with the same
   filters;
6. build all of this in a temporary folder beside the output, and swap it
   in only when every step succeeded, so a failed build leaves the previous
   site as it was.

Problems in guide.md are reported as guide.md:LINE: message, with exit
status 1. Pandoc runs with --fail-if-warnings, and any warning it prints
stops the build too; its line numbers, of the expanded text, are mapped
back to guide.md's (point_at_guide).
"""
import argparse
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
# What the build imports from requirements.txt, and the course's own package
# (pyproject.toml); Python's standard library is all it needs before it knows
# it runs in the right place.
NEEDS = ("jinja2", "pypandoc", "typst", "tools")
TOOLS = ROOT / "tools"
PANDOC_VERSION = "3.9"
HIGHLIGHT_STYLE = "haddock"        # passes axe's contrast check (see notes)


class BuildError(Exception):
    pass


def python_for_build(prefix=sys.prefix, venv=VENV, has_needs=None):
    """The Python to build with: None for the one running, else the path of
    the one to start again with. The running one will do if it is .venv's;
    else .venv's, once `make site` has set it up (it touches .venv/installed);
    else the running one if it can import all the build NEEDS. Otherwise
    there is nothing to build with, and the reader is told what to run."""
    if Path(prefix).resolve() == venv.resolve():
        return None
    if (venv / "installed").is_file():
        return venv / "bin" / "python"
    if has_needs is None:
        has_needs = all(importlib.util.find_spec(name) for name in NEEDS)
    if has_needs:
        return None
    raise BuildError(f"{display(venv)}/, the course's virtual environment, is not set up: "
                     "run `make site` once (it makes .venv/ from requirements.txt, "
                     "installs the npm packages and builds the site); after that "
                     "`python3 tools/build.py` uses .venv/ by itself")


def display(path):
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


# Before the course's own modules are imported: .venv/ holds them (the
# package `tools`, pyproject.toml), so another Python starts .venv's first.
if __name__ == "__main__":
    try:
        python = python_for_build()
    except BuildError as error:
        print(f"build failed: {error}", file=sys.stderr)
        sys.exit(1)
    if python:
        os.execv(python, [str(python), str(Path(__file__).resolve()), *sys.argv[1:]])

from tools import sims  # noqa: E402  (after the restart above)
from tools.guide import SIM_MOUNT, GuideError, expand  # noqa: E402
from tools.sims.package import (PackagingError, copy_pyodide, copy_sim_pages,  # noqa: E402
                                make_stdlib, python_download, write_first_pictures,
                                write_sim_archive)


def main(argv=None):
    args = parse_args(argv)
    started = time.perf_counter()
    try:
        pandoc = find_pandoc()
        guide = args.guide.read_text(encoding="utf-8")
        markdown, origin = expand(guide, args.guide.parent, sims.folders())
        with tempfile.TemporaryDirectory(prefix=".site-", dir=args.out.parent) as tmp, \
                ThreadPoolExecutor(max_workers=3) as pool:
            tmp, staging = Path(tmp), Path(tmp) / "site"
            stdlib = pool.submit(make_stdlib)
            extras = [] if args.no_extras else [
                pool.submit(make_epub, pandoc, markdown, tmp),
                pool.submit(make_pdf, pandoc, markdown, tmp)]
            check_given_links(guide)
            book = render(pandoc, markdown, origin, guide)
            copy_given(staging / "given")
            copy_static(staging)
            copy_sim_pages(staging / "static" / "sims")
            write_first_pictures(staging / "static" / "sims")
            copy_pyodide(staging / "pyodide")
            write_sim_archive(staging / "static" / "sims" / "course.zip")
            shutil.copy(stdlib.result(), staging / "static" / "sims" / "stdlib.zip")
            write_pages(book, staging, python_download(staging))
            index_for_search(staging)
            (staging / "guide.md").write_text(markdown, encoding="utf-8")
            write_service_worker(staging)
            for extra in extras:
                shutil.move(extra.result(), staging)
            swap_in(staging, args.out)
    except (GuideError, BuildError, PackagingError) as error:
        print(f"build failed: {error}", file=sys.stderr)
        return 1
    pages = sum(1 for _ in args.out.glob("*.html"))
    size = sum(f.stat().st_size for f in args.out.rglob("*") if f.is_file())
    print(f"built {pages} pages, {size:,} bytes in {time.perf_counter() - started:.2f} s "
          f"-> {display(args.out)}")
    return 0



def parse_args(argv):
    parser = argparse.ArgumentParser(description="Build the course site.")
    parser.add_argument("--guide", type=Path, default=ROOT / "guide.md",
                        help="the guide (default: guide.md); includes are read "
                             "relative to its folder")
    parser.add_argument("--out", type=Path, default=ROOT / "site",
                        help="output folder (default: site/)")
    parser.add_argument("--no-extras", action="store_true",
                        help="skip the EPUB and PDF (faster, for checking pages)")
    args = parser.parse_args(argv)
    args.out, args.guide = args.out.resolve(), args.guide.resolve()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    return args


def find_pandoc():
    """The pinned pandoc from pypandoc-binary, refusing any other version."""
    try:
        import pypandoc
        path = pypandoc.get_pandoc_path()
    except (ImportError, OSError) as error:
        raise BuildError(f"pandoc {PANDOC_VERSION} not found ({error}); "
                         "run `make site`, which installs pypandoc-binary") from None
    first_line = run([path, "--version"]).splitlines()[0]
    if first_line.split()[-1] != PANDOC_VERSION:
        raise BuildError(f"need pandoc {PANDOC_VERSION}, found {first_line!r} at {path}")
    return path


def run(command, stdin=None):
    """Run a tool; any failure or warning stops the build with its message."""
    result = subprocess.run(command, input=stdin, capture_output=True, text=True)
    if result.returncode != 0 or result.stderr.strip():
        raise BuildError(f"{Path(command[0]).name} failed:\n{result.stderr.strip()}")
    return result.stdout


def render(pandoc, markdown, origin, guide):
    """Every page's HTML from one pandoc run, as a dict (see tools/site.lua)."""
    command = [pandoc, "--from=markdown", f"--to={TOOLS / 'site.lua'}",
               "--section-divs", f"--syntax-highlighting={HIGHLIGHT_STYLE}",
               "--fail-if-warnings"]
    try:
        book = json.loads(run(command, stdin=markdown))
    except BuildError as error:
        raise BuildError(point_at_guide(str(error), origin)) from None
    for anchor in dict.fromkeys(book["broken_links"]):
        raise GuideError(line_of(guide, f"(#{anchor})"), f"link to #{anchor}, "
                         "which no heading or block in the guide has")
    return book


def point_at_guide(message, origin):
    """Rewrite pandoc's '... at line N column M' (of the expanded text) as
    guide.md:LINE: ..., one line per warning."""
    out = []
    for text in message.splitlines():
        match = re.search(r"^\[(?:WARNING|ERROR)\] (.*?) at line (\d+) column \d+", text)
        if match:
            line = origin[min(int(match[2]), len(origin)) - 1]
            text = f"guide.md:{line}: {match[1]}"
        out.append(text)
    return "\n".join(out)


def line_of(text, needle):
    for number, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return number
    return 1


def write_pages(book, staging, download):
    import jinja2
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TOOLS / "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    page = env.get_template("page.html")
    chapters = book["chapters"]
    common = dict(title=book["title"], subtitle=book["subtitle"], chapters=chapters,
                  download=download)
    for number, chapter in enumerate(chapters):
        write(staging / chapter["file"], page.render(
            common, current=chapter, body=chapter["html"], sims=sims_on(chapter["html"]),
            previous=chapters[number - 1] if number else None,
            next=chapters[number + 1] if number + 1 < len(chapters) else None))
    write(staging / "index.html", env.get_template("index.html").render(
        common, current=None, sims=False))
    write(staging / "all.html", page.render(
        common, current=None, body=book["all_in_one"], sims=sims_on(book["all_in_one"]),
        previous=None, next=None))


# Pagefind (npm, package.json) indexes the pages it is given: each chapter's
# <main> (data-pagefind-body, on a page with a current chapter), not
# all.html, which repeats them all, nor the cover. Its
# index and its search script go to site/pagefind/; site.js fetches them
# when the reader first types into the search box.
PAGEFIND = ROOT / "node_modules" / ".bin" / "pagefind"


def index_for_search(staging):
    if not PAGEFIND.is_file():
        raise BuildError(f"{PAGEFIND.relative_to(ROOT)} not found: run `npm ci` "
                         "(make site does) to install Pagefind, which indexes the pages "
                         "for search")
    # Not the headings' "#" links, nor the diagrams' box-drawing lines.
    run([str(PAGEFIND), "--site", str(staging), "--output-subdir", "pagefind", "--silent",
         "--exclude-selectors", ".anchor", "--exclude-selectors", "pre.diagram"])
    for unused in (staging / "pagefind").glob("pagefind-*"):   # its own ready-made UIs
        if unused.name not in ("pagefind-entry.json", "pagefind-worker.js"):
            unused.unlink()


# Reading offline: tools/sw.js, with the list of what it keeps written in,
# as site/sw.js; Workbox's files from node_modules, as workbox-sw loads them.
SERVICE_WORKER = TOOLS / "sw.js"
SITE_LINE = "const SITE = null;"
WORKBOX = {name: ROOT / "node_modules" / package / "build" / name for package, name in [
    ("workbox-sw", "workbox-sw.js"), ("workbox-core", "workbox-core.prod.js"),
    ("workbox-precaching", "workbox-precaching.prod.js"),
    ("workbox-routing", "workbox-routing.prod.js"),
    ("workbox-strategies", "workbox-strategies.prod.js")]}


def write_service_worker(staging):
    """site/sw.js: every file of the site for Workbox to keep from the first
    visit, each with a revision (a hash of its bytes), but Python, which it
    keeps once the reader starts it, under a version of all of it."""
    missing = [path for path in WORKBOX.values() if not path.is_file()]
    if missing:
        raise BuildError(f"{missing[0].relative_to(ROOT)} not found: run `npm ci` (make site "
                         "does) to install Workbox, which keeps the site for reading offline")
    source = SERVICE_WORKER.read_text(encoding="utf-8")
    if source.count(SITE_LINE) != 1:
        raise BuildError(f"{SERVICE_WORKER.relative_to(ROOT)} must have the line "
                         f"`{SITE_LINE}` once, for the build to fill in")
    (staging / "workbox").mkdir()
    for name, path in WORKBOX.items():
        shutil.copy(path, staging / "workbox" / name)
    revisions = {path.relative_to(staging).as_posix():
                 hashlib.sha256(path.read_bytes()).hexdigest()[:16]
                 for path in sorted(staging.rglob("*")) if path.is_file()}
    python = [url for url in revisions if url.startswith("pyodide/")
              or url in ("static/sims/course.zip", "static/sims/stdlib.zip")]
    site = {"pages": [{"url": url, "revision": revision} for url, revision in revisions.items()
                      if url not in python],
            "python": {"files": python, "version": hashlib.sha256(
                " ".join(revisions[url] for url in python).encode()).hexdigest()[:16]}}
    (staging / "sw.js").write_text(
        source.replace(SITE_LINE, f"const SITE = {json.dumps(site, indent=1)};"),
        encoding="utf-8")


def kept_offline(site):
    """What a built site's sw.js keeps, as write_service_worker wrote it in:
    {"pages": [{url, revision}], "python": {files, version}}."""
    source = (site / "sw.js").read_text(encoding="utf-8")
    return json.loads(re.search(r"^const SITE = (\{.*?^\});$", source, re.S | re.M).group(1))


def sims_on(html):
    """The folders of the simulations a page holds, each once: the page
    needs their script, and asks for what draws their first pictures as it
    begins to load. None, on a page without one."""
    names = re.findall(f'<div class="{SIM_MOUNT}" data-sim="([a-z0-9-]+)"', html)
    return sorted({name.replace("-", "_") for name in names})


def write(path, text):
    path.write_text(text, encoding="utf-8")


GIVEN_LINK = re.compile(r"\]\(given/([^)\s]+)\)")


def check_given_links(guide):
    """Given files are files a learner downloads from the site and never
    types: code/'s files whose names end in _given.py. The guide links to
    each where the learner needs it, as [NAME](given/NAME). A link to one
    that code/ lacks stops the build, at the link's line."""
    for number, line in enumerate(guide.splitlines(), 1):
        for name in GIVEN_LINK.findall(line):
            if not name.endswith("_given.py") or not (ROOT / "code" / name).is_file():
                raise GuideError(number, f"link to given/{name}, but code/{name} is not "
                                         "a given file (a file in code/ named *_given.py)")


def copy_given(folder):
    """Every given file of code/ at given/ (its path inside code/), byte for byte."""
    code = ROOT / "code"
    for source in sorted(code.rglob("*_given.py")):
        target = folder / source.relative_to(code)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)


def copy_static(staging):
    shutil.copytree(TOOLS / "static", staging / "static")


def make_epub(pandoc, markdown, tmp):
    epub = tmp / "guide.epub"
    run([pandoc, "--from=markdown", "--to=epub3", f"--lua-filter={TOOLS / 'blocks.lua'}",
         f"--syntax-highlighting={HIGHLIGHT_STYLE}", "--fail-if-warnings",
         f"--output={epub}"], stdin=markdown)
    return epub


def make_pdf(pandoc, markdown, tmp):
    """PDF without LaTeX: pandoc writes Typst, and the typst package sets it."""
    import typst
    source, pdf = tmp / "guide.typ", tmp / "guide.pdf"
    source.write_text(run([pandoc, "--from=markdown", "--to=typst", "--standalone",
                           f"--lua-filter={TOOLS / 'blocks.lua'}", "--fail-if-warnings"],
                          stdin=markdown), encoding="utf-8")
    try:
        typst.compile(str(source), output=str(pdf))
    except RuntimeError as error:
        raise BuildError(f"typst failed: {error}") from None
    return pdf


def swap_in(staging, out):
    """Replace the old site with the new one in two renames."""
    old = staging.parent / "old"
    if out.exists():
        out.rename(old)
    staging.rename(out)


if __name__ == "__main__":
    sys.exit(main())
