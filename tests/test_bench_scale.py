"""SC-7's benchmark (``python -m bench.scale``) runs and reports every figure.

Never a timing assertion: a tiny run must produce each side's rate and each
paired ratio, write only its own section of RESULTS.md, and leave no run of
its own behind in the store.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from bench.scale import END, START, write_section
from tests.internals import SCHEMA

ROOT = Path(__file__).resolve().parents[1]
SIDES = (
    "SQLite, 1 writer",
    "PostgreSQL, 1 writer",
    "PostgreSQL, 8 writers",
    "replay, SQLite",
    "replay, PostgreSQL",
)
FIGURE = re.compile(r"^[0-9.]+[kM]? ev/s \([0-9.]+[kM]? ev/s - [0-9.]+[kM]? ev/s\)$")
RATIO = re.compile(r": [0-9.e+-]+x \([0-9.e+-]+-[0-9.e+-]+\)$")
RATIOS = {
    "PostgreSQL, 1 writer": "PostgreSQL / SQLite",
    "PostgreSQL, 8 writers": "8 writers / (8 x 1 writer)",
    "replay, PostgreSQL": "PostgreSQL / SQLite",
}
BEFORE = "# Benchmark results (quality.md, P-1..P-7)\n\nthe harness's figures\n"
AFTER = "\n<!-- Kept by the harness: everything below is written by hand. -->\nnotes\n"


# -- SC-7: only the section between the markers is written --------------------------


def test_sc_7_the_section_is_appended_when_absent_and_replaced_when_present() -> None:
    first = write_section(BEFORE, f"{START}\nold\n{END}\n")
    assert first == f"{BEFORE}\n{START}\nold\n{END}\n"
    middle = BEFORE + f"\n{START}\nold\n{END}" + AFTER
    second = write_section(middle, f"{START}\nnew\n{END}\n")
    assert second == BEFORE + f"\n{START}\nnew\n{END}" + AFTER
    assert write_section("", f"{START}\nx\n{END}\n") == f"{START}\nx\n{END}\n"
    with pytest.raises(ValueError, match="without"):
        write_section(f"{START}\nunterminated", f"{START}\nx\n{END}\n")


def _bench_runs(admin: psycopg.Connection[Any]) -> set[str]:
    rows = admin.execute(
        f"SELECT run FROM {SCHEMA}.runs WHERE run LIKE 'bench-sc7-%'"
    ).fetchall()
    return {row[0] for row in rows}


def _cells(stdout: str) -> dict[str, list[str]]:
    rows = {}
    for line in stdout.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if cells and cells[0] in SIDES:
            rows[cells[0]] = cells
    return rows


@pytest.mark.slow
def test_sc_7_a_tiny_run_reports_every_figure_and_writes_its_section(
    pg_url: str, pg_admin: psycopg.Connection[Any], tmp_path: Path
) -> None:
    out = tmp_path / "RESULTS.md"
    out.write_text(BEFORE + f"\n{START}\nstale figures\n{END}" + AFTER)
    before = _bench_runs(pg_admin)
    command = [sys.executable, "-m", "bench.scale", "--tiny", "--store"]
    command += [pg_url, "--out", str(out), "--workdir", str(tmp_path / "w")]
    done = subprocess.run(
        command,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    rows = _cells(done.stdout)
    assert sorted(rows) == sorted(SIDES)
    for side, cells in rows.items():
        assert FIGURE.match(cells[2]), (side, cells[2])
        if side in RATIOS:
            assert cells[3].startswith(RATIOS[side]), (side, cells[3])
            assert RATIO.search(cells[3]), (side, cells[3])
    text = out.read_text()
    assert text.startswith(BEFORE)
    assert text.endswith(AFTER)
    assert text.count(START) == text.count(END) == 1
    assert "stale figures" not in text
    written = text[text.index(START) : text.index(END)]
    assert "python -m bench.scale --tiny" in written  # the command
    assert "`nproc`" in written  # the machine
    assert "PostgreSQL server" in written
    for side in SIDES:
        assert f"| {side} |" in written
    assert _bench_runs(pg_admin) <= before  # its runs were dropped
