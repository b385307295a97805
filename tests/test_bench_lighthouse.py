"""make bench's Lighthouse part (tools/bench/lighthouse.py), without
running Lighthouse: how it reads a report, picks the median run, finds the
pages and says what is missing.

The reports in tests/bench_lighthouse/ are real runs of Lighthouse 12.2.3
in Chromium 156 (mobile preset), trimmed to what the bench reads:
made-to-fail.json of made-to-fail.html beside it (served with a 10-pixel
dot.png), idempotency-mobile.json of the heaviest simulation page as built
on 7 December.
"""
import json
from pathlib import Path

import pytest

from tools.bench import lighthouse, sims

REPORTS = Path(__file__).parent / "bench_lighthouse"


def report(name):
    return json.loads((REPORTS / name).read_text(encoding="utf-8"))


def test_a_failing_page_is_read_with_its_audits_and_elements():
    """The failing accessibility audits come out with their ids, titles and
    selectors, and the scores out of 100."""
    run = lighthouse.read_report(report("made-to-fail.json"))
    assert (run.performance, run.accessibility) == (100, 41)
    failing = {audit.id: audit for audit in run.inaccessible}
    assert sorted(failing) == ["button-name", "color-contrast", "html-has-lang",
                               "image-alt", "link-name"]
    assert failing["color-contrast"].items == ["body > main > p.faint"]
    assert failing["button-name"].items == ["body > main > button#mute"]
    assert failing["image-alt"].title == "Image elements do not have `[alt]` attributes"
    assert run.versions == "Lighthouse 12.2.3, Chromium 156, axe-core 4.14.1"


def test_a_site_page_is_read_with_its_metrics_and_costliest_audits():
    """The five metrics in ms (CLS unitless), the performance audits under
    0.9 costliest first with the files they name as paths, and the audits
    Lighthouse could not run."""
    run = lighthouse.read_report(report("idempotency-mobile.json"))
    assert (run.performance, run.accessibility) == (99, 100)
    assert run.inaccessible == []
    assert round(run.metrics["FCP"]) == 1503
    assert round(run.metrics["LCP"]) == 1653
    assert (run.metrics["TBT"], run.metrics["CLS"]) == (0, 0)
    costly = [audit.id for audit in run.costly]
    assert costly[0] == "uses-text-compression"
    assert set(costly) == {"uses-text-compression", "unminified-javascript", "unminified-css",
                           "unused-javascript", "uses-long-cache-ttl"}
    first = run.costly[0]
    assert first.savings == {"FCP": 150, "LCP": 300}
    assert first.items[0] == "/idempotency-making-repeats-harmless.html"
    assert "render-blocking-resources" in {audit.id for audit in run.errors}


def test_the_median_run_is_the_middle_one_by_score_then_lcp():
    """Of three runs, the one in the middle by performance score, the
    slower LCP counting as the lower; one that could not score is lowest."""
    def run(score, lcp):
        return lighthouse.Run(score, 100, {"LCP": lcp}, [], [], [])
    slow, fast = run(99, 1700), run(99, 1500)
    assert lighthouse.median_run([run(100, 1100), slow, fast]) is fast
    assert lighthouse.median_run([run(None, None), slow, fast]) is slow


def test_the_range_is_of_every_runs_performance_score():
    """97-100 for runs that scored 99, 97 and 100; one run alone, its score."""
    def run(score):
        return lighthouse.Run(score, 100, {"LCP": 1000}, [], [], [])
    assert lighthouse.spread([run(99), run(97), run(100)]) == "97-100"
    assert lighthouse.spread([run(99)]) == "99"
    assert lighthouse.spread([run(None), run(98)]) == "0-98"


def test_the_pages_are_the_start_link_and_the_heaviest(tmp_path):
    """The first chapter is the page the index's Start reading link opens."""
    (tmp_path / "index.html").write_text(
        '<a href="all.html">all</a><a class="start" href="first.html">Start reading</a>')
    (tmp_path / "first.html").write_text("")
    (tmp_path / sims.HEAVIEST).write_text("")
    assert lighthouse.pages(tmp_path) == ["first.html", sims.HEAVIEST]
    (tmp_path / sims.HEAVIEST).unlink()
    with pytest.raises(SystemExit, match=f"has no {sims.HEAVIEST}"):
        lighthouse.pages(tmp_path)


def test_a_missing_tool_stops_the_bench_saying_what_to_run(tmp_path, monkeypatch):
    """Without Lighthouse or Chromium, main exits (status 1) naming what to run."""
    monkeypatch.setattr(lighthouse, "LIGHTHOUSE", tmp_path / "lighthouse")
    monkeypatch.setattr(lighthouse, "CHROMIUM", str(tmp_path / "chromium"))
    with pytest.raises(SystemExit) as stopped:
        lighthouse.main([tmp_path])
    said = str(stopped.value.code)
    assert "make node_modules/installed" in said
    assert "apt-get install chromium" in said


def test_the_lines_printed_name_each_failure_and_not_the_servers_files():
    """A page's row in the table, then each failing audit with its
    elements; the local server's own failures without their files."""
    bad = lighthouse.read_report(report("made-to-fail.json"))
    found = {("bad.html", "mobile"): [bad],
             ("idempotency.html", "mobile"): [lighthouse.read_report(report("idempotency-mobile.json"))]}
    lines = lighthouse.report_lines("made here", found)
    assert lines[0] == "  made here:"
    assert lines[2].split() == ["bad.html", "mobile", "100", "100", "41", "0.7", "s", "0.7", "s",
                                "52", "ms", "0.000", "0.7", "s"]
    at = lines.index("      accessibility color-contrast: Background and foreground colors"
                     " do not have a sufficient contrast ratio.")
    assert lines[at + 1] == "        body > main > p.faint"
    compression = next(at for at, line in enumerate(lines)
                       if "performance uses-text-compression" in line)
    assert lines[compression].endswith("(costs FCP 150 ms, LCP 300 ms): http.server does not compress")
    assert lines[compression + 1].startswith("      performance unminified-javascript")
