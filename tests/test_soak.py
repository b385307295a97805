"""tools/soak.py, behind `make soak`: every run reported, the hogs stopped."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tools.harness.catalogue import ROOT

SOAK = ROOT / "tools" / "soak.py"


def soak(tmp_path, test, runs):
    (tmp_path / "test_soaked.py").write_text(test)
    return subprocess.run([sys.executable, str(SOAK), "--runs", str(runs), "--hogs", "1",
                           "--workers", "0", "--", str(tmp_path / "test_soaked.py")],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("test, runs, status, last", [
    ("def test_ok(): pass\n", 2, 0, "soak: 2 of 2 runs passed"),
    ("def test_broken(): assert False\n", 1, 1, "soak: 0 of 1 runs passed; logs in "),
], ids=["green", "red"])
def test_soak_reports_each_run_and_stops_its_hogs(tmp_path, test, runs, status, last):
    """make soak reports how each run ended, stops its hogs by their ids, and
    exits 0 only if every run passed."""
    result = soak(tmp_path, test, runs)
    lines = result.stdout.splitlines()
    assert result.returncode == status, result.stdout + result.stderr
    verdict = "passed" if status == 0 else "FAILED"
    assert [line.split(" in ")[0] for line in lines[1:-2]] == [
        f"run {run} of {runs}: {verdict}" for run in range(1, runs + 1)]
    assert lines[-1].startswith(last)
    started = re.search(r"beside 1 hogs \(ids (\d+)\)", lines[0]).group(1)
    assert lines[-2] == f"hogs stopped: {started}"
    assert not Path(f"/proc/{started}").exists()     # killed and reaped
