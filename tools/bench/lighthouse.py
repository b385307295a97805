"""Lighthouse, a part of `make bench` (issue 49): numbers, never pass or fail.

Lighthouse (the npm package, pinned in package.json; node_modules/.bin/
lighthouse) drives Debian's Chromium, headless, against a built site that
this process serves on localhost as sims.py serves it: Python's
http.server, which neither compresses nor sets a cache lifetime, as `make
serve` does not either. So Lighthouse's uses-text-compression and
uses-long-cache-ttl fail here whatever the pages hold (they are printed
without the files they name); GitHub Pages, where .github/workflows/
pages.yml publishes the site, compresses.

- Two pages: the first chapter (the page the index's "Start reading" link
  opens, as the page-weight bench counts it) and the heaviest simulation
  page (sims.HEAVIEST, the one with the most simulations).
- Two presets, since a run costs about 14 s: Lighthouse's default, a
  mid-range phone (412 px wide, its CPU 4 times slower, a slow 4G), and
  `--preset=desktop` (1350 px, a fast line, no CPU slowdown).
- Lighthouse's default throttling, simulated: the page loads at full speed
  and Lighthouse computes from what it recorded how long that phone or
  desktop would take; left as it is, so these numbers compare with anyone
  else's Lighthouse.
- Only the performance and accessibility categories.
Each page and preset runs RUNS times, each with a fresh Chromium profile
(nothing cached), because one page's FCP varied from 1.1 to 1.6 s over five
runs here; sites measured together take turns, run by run. The median run
(by performance score, then LCP) is printed whole, beside the range of the
performance scores of all the runs: both scores out of 100 (the goal: at
least 95), FCP, LCP, TBT, CLS
and Speed Index; then every failing accessibility audit (id, title, the
selectors of its elements); the performance audits under 0.9 (Lighthouse's
line between passed and not), costliest first by the milliseconds
Lighthouse estimates they cost FCP, LCP and TBT, with the files or
elements they name; and the audits Lighthouse could not run. Simulated
throttling computes TBT from the main thread's tasks as they ran here, four
times longer on the phone, so other processes on this machine raise it:
the heaviest page on the phone scored 94 (TBT 169 ms) once while other work
kept 2 cores busy (load average 7 to 12), and 97 to 100 (TBT under 30 ms)
otherwise. The last line gives the load average before and after.

With Lighthouse 12.2.3 and Chromium 156, six audits cannot run at all
(render-blocking-resources, layout-shifts, largest-contentful-paint-element
and three that need it): Chromium's PipelineReporter trace events no longer
carry the chrome_frame_reporter that this Lighthouse's trace reader
(@paulirish/trace_engine 0.0.32) reads. The five metrics are still
computed, and those audits weigh nothing in the scores, but render-blocking
resources and the LCP element go unreported.

`python -m tools.bench lighthouse` builds this tree's pages (build.py
--no-extras) into a temporary folder and measures them; with `--site
FOLDER` (again for more) it measures sites built already instead, in one
table: a site built from an older commit beside this tree's, for example.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from tools import build
from tools.bench import first_chapter, sims

ROOT = Path(__file__).resolve().parents[2]
LIGHTHOUSE = ROOT / "node_modules" / ".bin" / "lighthouse"
CHROMIUM = sims.CHROMIUM
PRESETS = ("mobile", "desktop")
CATEGORIES = ("performance", "accessibility")
RUNS = 3
GOAL = 95
METRICS = {"FCP": "first-contentful-paint", "LCP": "largest-contentful-paint",
           "TBT": "total-blocking-time", "CLS": "cumulative-layout-shift",
           "SI": "speed-index"}
PASSED = 0.9          # a score from here up is a pass in Lighthouse's report
# What fails because of the server here, not the pages (printed without their files)
SERVERS_DOING = {"uses-text-compression": "http.server does not compress",
                 "uses-long-cache-ttl": "http.server sets no cache lifetime"}
ITEMS_SHOWN = 4       # the largest files or elements named for each audit
SECONDS_PER_RUN = 300


def missing_tools():
    """What to install before measuring, said as what to run; None when
    nothing is missing."""
    needs = []
    if not Path(LIGHTHOUSE).is_file():
        needs.append(f"Lighthouse is not installed ({LIGHTHOUSE} is missing): "
                     f"run `make node_modules/installed` (npm ci) in {ROOT}")
    if not os.access(CHROMIUM, os.X_OK):
        needs.append(f"no Chromium at {CHROMIUM}: run `make packages` "
                     "(or apt-get install chromium)")
    return "\n".join(needs) or None


def pages(site):
    """The pages measured in a built site: the first chapter, the heaviest
    simulation page."""
    index = site / "index.html"
    if not index.is_file():
        raise SystemExit(f"{site} is not a built site: it has no index.html")
    first = first_chapter(site)
    if first is None:
        raise SystemExit(f"{index} has no \"Start reading\" link (<a class=\"start\">)")
    for name in (first, sims.HEAVIEST):
        if not (site / name).is_file():
            raise SystemExit(f"{site} has no {name}")
    return [first, sims.HEAVIEST]


def chrome_flags():
    # Chromium refuses to run as root inside its sandbox.
    return "--headless" + (" --no-sandbox" if os.geteuid() == 0 else "")


def run_lighthouse(url, preset):
    """One Lighthouse run of one page, its report parsed from JSON."""
    command = [str(LIGHTHOUSE), url, f"--only-categories={','.join(CATEGORIES)}",
               "--output=json", "--output-path=stdout", f"--chrome-flags={chrome_flags()}"]
    if preset != "mobile":                        # mobile is Lighthouse's default
        command.append(f"--preset={preset}")
    done = subprocess.run(command, capture_output=True, text=True, timeout=SECONDS_PER_RUN,
                          env={**os.environ, "CHROME_PATH": CHROMIUM})
    if done.returncode != 0 or not done.stdout.strip():
        said = "\n".join(done.stderr.strip().splitlines()[-15:])
        raise RuntimeError(f"Lighthouse failed on {url} ({preset}), exit status "
                           f"{done.returncode}:\n{said}")
    return json.loads(done.stdout)


@dataclass
class Audit:
    id: str
    title: str
    said: str = ""                               # Lighthouse's displayValue, or why it failed
    savings: dict = field(default_factory=dict)  # estimated ms saved, by metric
    items: list = field(default_factory=list)    # files or elements it names


@dataclass
class Run:
    """What the bench prints of one Lighthouse report."""
    performance: int | None                      # out of 100; None when it could not score
    accessibility: int | None
    metrics: dict                                # METRICS' keys: ms, but CLS unitless
    inaccessible: list                           # failing accessibility audits
    costly: list                                 # performance audits under PASSED, costliest first
    errors: list                                 # audits Lighthouse could not run
    problem: str = ""                            # why the whole run failed, if it did
    versions: str = ""


def item_names(details, origin):
    """The files (as paths on the site), elements (as selectors) or kinds
    of work an audit's details name, largest first where it says how
    large."""
    items = sorted((details or {}).get("items", []),
                   key=lambda item: -(item.get("wastedBytes") or item.get("totalBytes") or 0))
    names = []
    for item in items:
        node = item.get("node") or {}
        url = item.get("url")
        if node.get("selector"):
            names.append(node["selector"])
        elif item.get("groupLabel"):              # the main thread's work, by kind
            names.append(f"{item['groupLabel']}: {item.get('duration', 0):.0f} ms")
        elif isinstance(url, str):
            names.append(url[len(origin):] if url.startswith(origin) else url)
    return names


def read_report(report):
    """A Lighthouse JSON report (as parsed) as a Run."""
    audits = report["audits"]
    origin = "{0.scheme}://{0.netloc}".format(urlsplit(report.get("finalDisplayedUrl", "")))

    def score(category):
        value = report["categories"][category]["score"]
        return None if value is None else round(value * 100)

    def referenced(category):
        return [(ref, audits[ref["id"]]) for ref in report["categories"][category]["auditRefs"]]

    inaccessible = [Audit(audit["id"], audit["title"],
                          items=item_names(audit.get("details"), origin))
                    for _, audit in referenced("accessibility")
                    if audit["score"] is not None and audit["score"] < 1]
    costly = []
    for ref, audit in referenced("performance"):
        if ref.get("group") in ("metrics", "hidden") or audit["score"] is None:
            continue
        if audit["score"] < PASSED:
            costly.append(Audit(audit["id"], audit["title"], audit.get("displayValue", ""),
                                {metric: ms for metric, ms in
                                 (audit.get("metricSavings") or {}).items()
                                 if metric != "CLS" and ms},
                                item_names(audit.get("details"), origin)))
    costly.sort(key=lambda audit: -sum(audit.savings.values()))
    errors = [Audit(audit["id"], audit["title"], audit.get("errorMessage", ""))
              for category in CATEGORIES for _, audit in referenced(category)
              if audit["scoreDisplayMode"] == "error"]
    environment = report.get("environment", {})
    chromium = environment.get("hostUserAgent", "").partition("Chrome/")[2].split(".")[0]
    return Run(score("performance"), score("accessibility"),
               {short: audits[name].get("numericValue") for short, name in METRICS.items()},
               inaccessible, costly, errors,
               problem=(report.get("runtimeError") or {}).get("message", ""),
               versions=f"Lighthouse {report.get('lighthouseVersion', '?')}, "
                        f"Chromium {chromium or '?'}, axe-core "
                        f"{environment.get('credits', {}).get('axe-core', '?')}")


def median_run(runs):
    """The middle run by performance score, then by LCP (a run that could
    not score counts as the worst)."""
    ordered = sorted(runs, key=lambda run: (-1 if run.performance is None else run.performance,
                                            -(run.metrics.get("LCP") or 0)))
    return ordered[len(ordered) // 2]


def measure(sites):
    """{site: {(page, preset): its runs}}, the sites taking turns run by run,
    so that a minute when other work slows the machine falls on each alike."""
    measured = {site: pages(site) for site in sites}
    servers = {site: sims.serve(site) for site in sites}
    found = {site: {} for site in sites}
    try:
        for _ in range(RUNS):
            for at in range(len(measured[sites[0]])):
                for preset in PRESETS:
                    for site, server in servers.items():
                        page = measured[site][at]
                        url = f"http://127.0.0.1:{server.server_port}/{page}"
                        found[site].setdefault((page, preset), []).append(
                            read_report(run_lighthouse(url, preset)))
        return found
    finally:
        for server in servers.values():
            server.shutdown()
            server.server_close()


def shown(value, metric):
    if value is None:
        return "-"
    if metric == "CLS":
        return f"{value:.3f}"
    if metric == "TBT":
        return f"{value:.0f} ms"
    return f"{value / 1000:.1f} s"


def spread(runs):
    """The lowest and highest performance scores of some runs: '97-100' (a
    run that could not score counts as 0)."""
    scores = [-1 if run.performance is None else run.performance for run in runs]
    low, high = min(scores), max(scores)
    return "-" if high < 0 else str(high) if low == high else f"{max(low, 0)}-{high}"


def report_lines(site_label, found):
    """The lines printed for one site, from {(page, preset): its runs}: the
    median runs' table (with every run's range of performance scores),
    then what failed in them."""
    medians = {key: median_run(runs) for key, runs in found.items()}
    lines = [f"  {site_label}:",
             f"    {'page':42} {'preset':8} {'perf':>4} {'range':>7} {'a11y':>4}"
             + "".join(f"{metric:>9}" for metric in METRICS)]
    for (page, preset), run in medians.items():
        perf, a11y = ("-" if score is None else score
                      for score in (run.performance, run.accessibility))
        lines.append(f"    {page:42} {preset:8} {perf:>4} {spread(found[page, preset]):>7}"
                     f" {a11y:>4}"
                     + "".join(f"{shown(run.metrics[metric], metric):>9}" for metric in METRICS))
    for (page, preset), run in medians.items():
        said = []
        if run.problem:
            said.append(f"      the run failed: {run.problem}")
        for audit in run.inaccessible:
            said.append(f"      accessibility {audit.id}: {audit.title}")
            said += [f"        {name}" for name in audit.items]
        for audit in run.costly:
            cost = ", ".join(f"{metric} {ms:.0f} ms" for metric, ms in audit.savings.items())
            said.append(f"      performance {audit.id}: {audit.said or audit.title}"
                        + (f" (costs {cost})" if cost else ""))
            if audit.id in SERVERS_DOING:
                said[-1] += f": {SERVERS_DOING[audit.id]}"
                continue
            more = len(audit.items) - ITEMS_SHOWN
            said += [f"        {name}" for name in audit.items[:ITEMS_SHOWN]]
            if more > 0:
                said.append(f"        and {more} more")
        if said:
            lines.append(f"    {page}, {preset}:")
            lines += said
    return lines


def main(sites=()):
    """Measure these built sites, or this tree built into a temporary folder."""
    problem = missing_tools()
    if problem:
        raise SystemExit(problem)
    started, load = time.perf_counter(), os.getloadavg()[0]
    if sites:
        folders = [Path(site) for site in sites]
        results = list(zip(map(str, sites), measure(folders).values()))
    else:
        with tempfile.TemporaryDirectory() as temp:
            out = Path(temp) / "site"
            subprocess.run([sys.executable, build.__file__, "--out", str(out), "--no-extras"],
                           check=True, capture_output=True)
            results = [("this tree (tools/build.py --no-extras)", measure([out])[out])]
    any_run = next(iter(results[0][1].values()))[0]
    print(f"Lighthouse, the median of {RUNS} runs of each page and preset, the sites taking"
          f" turns ({any_run.versions}; headless, throttling simulated; goal: both scores"
          f" at least {GOAL}):")
    for label, found in results:
        for line in report_lines(label, found):
            print(line)
    errors = {audit.id: audit.said for _, found in results for runs in found.values()
              for run in runs for audit in run.errors}
    if errors:
        print("  audits Lighthouse could not run (they weigh nothing in the scores):")
        for name, said in errors.items():
            print(f"    {name}: {said.splitlines()[0][:100]}")
    runs = sum(len(runs) for _, found in results for runs in found.values())
    # TBT counts what the main thread did, slowed down 4 times on a phone:
    # other processes on the machine lengthen it.
    print(f"  {time.perf_counter() - started:.0f} s for {runs} runs; load average"
          f" {load:.1f} before, {os.getloadavg()[0]:.1f} after, on {os.cpu_count()} cores")
