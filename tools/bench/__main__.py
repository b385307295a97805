"""Benchmarks: print numbers, never pass or fail.  Usage: make bench
(which runs `.venv/bin/python -m tools.bench`)

- build time: tools/build.py against one bare pandoc run over the same
  expanded guide (the goal is at most 1.5 times);
- page weight: the bytes a reader downloads to see the first chapter
  (HTML, CSS, fonts, scripts, icon; the goal is at most 150 KB);
- Chapter 4's race without its deliberate gap: how many of 2,000 jobs four
  naive ex05 workers send more than once (Study Drill 2 of Exercise 5 has the
  reader count their own);
- queues (tools/bench/queues.py, whose docstring says how): jobs/s draining
  10,000 no-op jobs with 1 and 4 worker processes, for tinyq, huey and
  litequeue (the goal is tinyq at least 3 times huey); tinyq's rate with
  100,000 jobs queued against 1,000 (at least 0.8 times); tinyq beside
  tinyq_pg on a private PostgreSQL server with 1, 2, 4 and 8 workers (tinyq_pg
  with 4 at least 2 times its rate with 1), and tinyq_pg slowed by a
  transaction held open; and the wall time
  of code/capstone/chaos.py (at most 3 s). make bench installs huey and
  litequeue from requirements-bench.txt;
- simulations (tools/bench/sims.py): click to interactive against a bare
  Pyodide boot in Chromium, cold (at most 0.8 times) and pointed at first
  (clicked half a second after the pointer reached Start), main-thread
  blocking while a simulation starts (none), Start once the service worker
  has kept Python, on the next chapter and offline (at most 0.5 s), the
  first pictures drawn before they come into view (all), what a page
  fetches before the reader points at Start (no Python), and boxes that
  scroll sideways without showing it (none);
- Lighthouse (tools/bench/lighthouse.py): performance and accessibility
  scores, FCP, LCP, TBT, CLS and Speed Index of the first chapter and the
  heaviest simulation page, phone and desktop presets (the goal: both
  scores at least 95), and the audits that fail; `--site FOLDER` measures
  sites built already (an older commit's beside this tree's) instead of
  this tree's;
- checking time (tools/bench/grading.py): each exercise of a copy of code/
  checked with check.py, as a learner checks it, then the whole folder as
  make check WORK= grades it, wall and CPU seconds (the goals: 10 s an
  exercise, 20 s a capstone file, 45 s the folder).

Name sections to run only those: `python -m tools.bench grading queues`
(build, lighthouse, race, queues, grading; all of them by default).
"""
import argparse
import collections
import gzip
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from html.parser import HTMLParser
from pathlib import Path

from tools import build
from tools.bench import first_chapter, grading, lighthouse, queues, sims
from tools.guide import expand
from tools.sims import folders as sim_folders

ROOT = Path(__file__).resolve().parents[2]
RUNS = 7


def median_seconds(command, stdin=None):
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        subprocess.run(command, input=stdin, check=True, capture_output=True, text=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


class Tags(HTMLParser):
    """Every start tag of a page, with its attributes."""

    def __init__(self, path):
        super().__init__()
        self.tags = []
        self.feed(path.read_text(encoding="utf-8"))

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def assets(self):
        """What the page makes the browser fetch: stylesheets, scripts, icons."""
        return [attrs.get("href") or attrs.get("src") for tag, attrs in self.tags
                if (tag == "link" and attrs.get("rel") in ("stylesheet", "icon"))
                or (tag == "script" and attrs.get("src"))]


def build_and_pages():
    pandoc = build.find_pandoc()
    markdown, _ = expand((ROOT / "guide.md").read_text(encoding="utf-8"), ROOT,
                         sim_folders())
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "site"
        bare = median_seconds([pandoc, "--from=markdown", "--to=html5", "--standalone",
                               "--metadata=title:bench"], stdin=markdown)
        pages = median_seconds([sys.executable, build.__file__, "--out", str(out),
                                "--no-extras"])
        whole = median_seconds([sys.executable, build.__file__, "--out", str(out)])
        print(f"build time, median of {RUNS} runs:")
        print(f"  bare pandoc, expanded guide to one HTML page  {bare:6.2f} s")
        print(f"  tools/build.py --no-extras (HTML pages)       {pages:6.2f} s"
              f"   {pages / bare:4.2f}x bare")
        print(f"  tools/build.py (HTML, EPUB and PDF)           {whole:6.2f} s"
              f"   {whole / bare:4.2f}x bare")

        first = out / first_chapter(out)
        files = [first] + [out / href for href in Tags(first).assets()]
        files += [css.parent / url for css in files if css.suffix == ".css"
                  for url in re.findall(r'url\("([^"]+)"\)', css.read_text())]
        raw = sum(f.stat().st_size for f in files)
        packed = sum(len(gzip.compress(f.read_bytes())) for f in files)
        print(f"first chapter ({first.name}) and what it loads, {len(files)} files:")
        print(f"  {raw:,} bytes ({raw / 1024:.1f} KB); {packed:,} bytes gzipped")
        sims.main(out)


def race_without_the_gap(jobs=2000, workers=4, runs=3):
    """ex05's naive claim with RACE_GAP_SECONDS = 0 and instant sends, in a
    temporary copy: the workers do nothing but claim, as fast as they can."""
    source = (ROOT / "code" / "ex05_two_workers.py").read_text(encoding="utf-8")
    source = source.replace("RACE_GAP_SECONDS = 0.3", "RACE_GAP_SECONDS = 0")
    source = source.replace("MAIL_SERVER_SECONDS = 2", "MAIL_SERVER_SECONDS = 0")
    print(f"ex05 naive claim without the gap, {workers} workers, {jobs} jobs:")
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / "ex05_two_workers.py").write_text(source, encoding="utf-8")
            twice = count_duplicates(Path(tmp), jobs, workers)
            print(f"  {twice} jobs sent more than once ({twice / jobs:.1%})")


def count_duplicates(folder, jobs, workers):
    script = [sys.executable, "ex05_two_workers.py"]
    subprocess.run(script + ["reset"], cwd=folder, check=True, capture_output=True)
    db = sqlite3.connect(folder / "ex05.db", isolation_level=None)
    db.execute("BEGIN")
    db.executemany("INSERT INTO jobs (kind, args) VALUES ('welcome_email', ?)",
                   [(f'{{"address": "user{n}@example.com"}}',) for n in range(jobs)])
    db.execute("COMMIT")
    running = [subprocess.Popen(script + ["work", "naive"], cwd=folder,
                                stdout=subprocess.DEVNULL) for _ in range(workers)]
    while db.execute("SELECT count(*) FROM jobs WHERE status != 'done'").fetchone()[0]:
        time.sleep(0.05)
    for worker in running:
        worker.send_signal(signal.SIGINT)
        worker.wait()
    lines = (folder / "outbox.txt").read_text().splitlines()
    sent = collections.Counter(line.split(",")[0] for line in lines)
    return sum(1 for count in sent.values() if count > 1)


SECTIONS = {"build": lambda args: build_and_pages(),
            "lighthouse": lambda args: lighthouse.main(args.site or ()),
            "race": lambda args: race_without_the_gap(),
            "queues": lambda args: queues.main(),
            "grading": lambda args: grading.main()}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tools.bench",
                                     description="Print the course's numbers; no pass or fail.")
    parser.add_argument("sections", nargs="*", metavar="SECTION",
                        help=f"run only these ({', '.join(SECTIONS)}); all by default")
    parser.add_argument("--site", action="append", metavar="FOLDER",
                        help="lighthouse: measure this built site (again for more, in one "
                             "table) instead of building this tree's pages")
    args = parser.parse_args(argv)
    for name in args.sections:
        if name not in SECTIONS:
            parser.error(f"no section {name!r}: choose from {', '.join(SECTIONS)}")
    for name in args.sections or SECTIONS:
        SECTIONS[name](args)


if __name__ == "__main__":
    main()
