"""Issue 19's bench case RUN: rows recorded by following a collector's file.

Never a timing assertion: the case runs at tiny size and prints both figures
(ours: following the file as a collector appends, CLI-5's recording path;
the baseline: P-7's AsyncRecorder on the same rows) and their ratio.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from bench.targets import select

ROOT = Path(__file__).resolve().parents[1]
FIGURE = re.compile(r"^[0-9.]+[kM]? \([0-9.]+[kM]?-[0-9.]+[kM]?\) ev/s$")


def test_cli_5_p7_run_follows_a_collector_at_tiny_size(tmp_path: Path) -> None:
    """Every row the appender wrote is recorded: the events of P-7's rows."""
    out = tmp_path / "RESULTS.md"
    command = [sys.executable, "-m", "bench", "--quick", "--tiny", "--only", "RUN"]
    command += ["--out", str(out), "--workdir", str(tmp_path / "work")]
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("| RUN ")]
    _, _, ours, baseline, *_ = line.strip("|").split(" | ")
    assert FIGURE.match(ours), ours
    assert FIGURE.match(baseline), baseline
    text = out.read_text()
    (mine,) = [x for x in text.splitlines() if x.startswith("- RUN ours: ")]
    (theirs,) = [x for x in text.splitlines() if x.startswith("- RUN baseline: ")]
    events = re.search(r"\((\d+) events from 300 rows", mine)
    assert events is not None, mine
    assert f"({events[1]} events from 300 rows" in theirs  # the same events


def test_run_is_its_own_target() -> None:
    assert [t.id for t in select("run")] == ["RUN"]
