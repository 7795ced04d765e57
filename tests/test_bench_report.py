"""Issue 16's bench case RPT: the HTML report of P-4's run against ``status``.

Never a timing assertion: the case runs at tiny size and prints both figures,
their ratio, and in the detail the page's size and how the grid was shown (P-4:
a run past the grid's limit is shown in bands of tasks).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from bench.report_time import MAX_BYTES
from bench.targets import select

ROOT = Path(__file__).resolve().parents[1]
FIGURE = re.compile(r"^[0-9.]+[kM]? \([0-9.]+[kM]?-[0-9.]+[kM]?\) (ms|s)$")
RATIO = re.compile(r"^[0-9.e+-]+x \([0-9.e+-]+-[0-9.e+-]+\)$")


def test_p4_rpt_runs_at_tiny_size_with_both_figures_and_the_page_size(
    tmp_path: Path,
) -> None:
    out = tmp_path / "RESULTS.md"
    command = [sys.executable, "-m", "bench", "--quick", "--tiny", "--only", "RPT"]
    command += ["--out", str(out), "--workdir", str(tmp_path / "work")]
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("| RPT ")]
    _, _, ours, baseline, ratio, _, _, met = line.strip("|").split(" | ")
    assert FIGURE.match(ours), ours
    assert FIGURE.match(baseline), baseline
    assert RATIO.match(ratio), ratio
    assert met.strip() in ("yes", "NO")
    text = out.read_text()
    (detail,) = [x for x in text.splitlines() if x.startswith("- RPT ours: ")]
    found = re.search(r"(\d+) rollouts, \d+ events; page ([0-9.]+) MiB", detail)
    assert found is not None, detail
    assert int(found[1]) == 40
    assert float(found[2]) * 2**20 < MAX_BYTES
    assert "one cell per rollout" in detail


def test_rpt_is_its_own_target() -> None:
    assert [t.id for t in select("rpt")] == ["RPT"]
