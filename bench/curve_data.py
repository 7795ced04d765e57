"""The cost curve's runs: written by ``gen_run.py``, imported, resumed once.

Per size, under the harness's workdir (``curve/<rollouts>/``):

- ``gen/``: the run as NeMo Gym 0.7.0 leaves it (``gen_run.py --repeats 4
  --seed 7``, 2-8 KB rows), no ledger. Both 0.7.0 sides and the imitation
  read it; every round's ``import`` starts from a hard-linked copy of it.
- ``closed/``: a linked copy, imported (``rollout-ledger import``), then
  resumed once for real with ``--allow-unsafe`` (an imported run's first
  resume needs it: its configuration was never recorded), which records the
  configuration, releases the plan and saves the snapshot of the head: the
  state a clean close leaves.
- ``killed/``: imported and resumed as ``closed/`` is, then its collector
  recorded half of the plan that resume released (``rollout-ledger record``
  of result rows made from the plan file's first half), then died: the
  snapshot is the last resume's, and the log after it holds that half's
  reservations and outcomes. Its collector files are copies (``record``
  appends to them).
- ``nosnap/``: ``closed/`` with every stored snapshot deleted: the worst case,
  a run no command ever left a snapshot of (a snapshot is an optimization,
  EV-14), whose resume replays the whole log. Shown, not judged.

A resume only reads ``OUT`` and the sidecar, so the other copies link them;
the materialized inputs are always copied (``linked_copy``).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.commands import run_cli
from ledger.paths import RunPaths

__all__ = [
    "REPEATS",
    "CurveRun",
    "config_args",
    "generate",
    "linked_copy",
    "prepare_size",
]

REPEATS, GEN_SEED = 4, 7
OUT_NAME = "rollouts.jsonl"  # compare_dispatch.py reads rollouts_failures.jsonl
Log = Callable[[str], None]


@dataclass(frozen=True)
class CurveRun:
    """One size's runs, and how they were made."""

    rollouts: int
    gen: Path  # OUT of the run 0.7.0 wrote, no ledger
    closed: Path  # OUT, imported and resumed once: a snapshot at the head
    killed: Path  # OUT, half the released plan recorded since that snapshot
    nosnap: Path  # OUT, the closed ledger without its snapshots
    notes: tuple[str, ...]


def config_args(tools: Path) -> list[str]:
    """The configuration both sides resume under (the tools' two files)."""
    return [
        "--config",
        str(tools / "collection.yaml"),
        "--global-config",
        str(tools / "servers.yaml"),
    ]


def generate(out: Path, *, rollouts: int, tools: Path) -> dict[str, Any]:
    """``gen_run.py OUT --tasks N/4 --repeats 4 --seed 7``; returns its summary."""
    out.parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, str(tools / "gen_run.py"), str(out)]
    argv += ["--tasks", str(max(1, rollouts // REPEATS))]
    argv += ["--repeats", str(REPEATS), "--seed", str(GEN_SEED)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"gen_run.py exited {done.returncode}:\n{done.stderr}")
    summary: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return summary


def linked_copy(out: Path, folder: Path, *, copy_outputs: bool = False) -> Path:
    """``out``'s collector files in ``folder``, its ledger copied if any.

    ``OUT`` and its sidecar are linked (``copy_outputs``: copied, a command
    will append to them). The materialized inputs are always copied: a link
    changes the inode's change time, which a resume reads to trust what the
    last full read of the inputs found (``ledger.collector_files.inputs_seen``), so a
    link made while another copy is measured would make that one hash its
    inputs again at every resume.
    """
    source, target = RunPaths.of(out), RunPaths.of(folder / out.name)
    folder.mkdir(parents=True, exist_ok=True)
    outputs = {source.out, source.sidecar}
    for old, new in zip(
        source.collector_files(), target.collector_files(), strict=True
    ):
        if not old.exists():
            continue
        if old not in outputs or copy_outputs:
            shutil.copy2(old, new)
            continue
        try:
            os.link(old, new)
        except OSError:
            shutil.copy2(old, new)
    if source.ledger_dir.is_dir():
        shutil.copytree(source.ledger_dir, target.ledger_dir)
    return target.out


def drop_snapshots(out: Path) -> int:
    """Delete the run's stored snapshots (bench only); returns how many there were."""
    conn = sqlite3.connect(RunPaths.of(out).db)
    try:
        with conn:
            return conn.execute("DELETE FROM snapshots").rowcount
    finally:
        conn.close()


def prepare_size(rollouts: int, workdir: Path, tools: Path, log: Log) -> CurveRun:
    """Write, import and resume the run of ``rollouts`` under ``workdir``."""
    base = workdir / "curve" / str(rollouts)
    log(f"curve: writing the run of {rollouts} rollouts (gen_run.py) ...")
    started = time.perf_counter()
    gen = base / "gen" / OUT_NAME
    summary = generate(gen, rollouts=rollouts, tools=tools)
    wrote = time.perf_counter() - started
    # Copies of their own, never links: a link made to a file later (another
    # round's import of gen/, nosnap/ of closed/) changes its change time, and
    # status would then check every row's digest (issue 25) on closed/.
    closed = linked_copy(gen, base / "closed", copy_outputs=True)
    time.sleep(2.1)  # older than a clock tick when imported: its rows are noted
    imported = run_cli(["import", str(closed), "-q"])
    first = run_cli(["resume", str(closed), *config_args(tools), "--allow-unsafe"])
    # Its own import and first resume: the snapshot knows its own inputs' file.
    killed = linked_copy(gen, base / "killed", copy_outputs=True)
    run_cli(["import", str(killed), "-q"])
    plan = base / "plan.jsonl"
    run_cli(
        ["resume", str(killed), *config_args(tools), "--allow-unsafe", "-o", str(plan)]
    )
    outcomes = base / "outcomes.jsonl"
    half = _half_recorded(plan, outcomes)
    recorded = run_cli(["record", str(killed), str(outcomes)])
    nosnap = linked_copy(closed, base / "nosnap", copy_outputs=True)
    dropped = drop_snapshots(nosnap)
    files = summary.get("bytes", {})
    notes = (
        f"gen_run.py --tasks {summary['tasks']} --repeats {REPEATS} "
        f"--seed {GEN_SEED}: {summary['result_rows']} result rows, "
        f"{summary['sidecar_rows']} sidecar rows, "
        f"{sum(files.values()) / 2**20:.0f} MiB, written in {wrote:.1f} s",
        f"set up by `rollout-ledger import` ({imported.wall_s:.1f} s) "
        f"and one real `resume --allow-unsafe` ({first.wall_s:.1f} s, its snapshot "
        f"saved); after a kill: {half} results of the plan it released recorded "
        f"by `rollout-ledger record` ({recorded.wall_s:.1f} s) since that "
        f"snapshot; no snapshot: that ledger with its {dropped} snapshot(s) deleted",
    )
    return CurveRun(rollouts, gen, closed, killed, nosnap, notes)


def _half_recorded(plan: Path, outcomes: Path) -> int:
    """Result rows for the first half of a plan file's rows to dispatch."""
    rows = []
    with plan.open("rb") as lines:
        for line in lines:
            row = json.loads(line)
            if "rejudge" not in row:
                rows.append(row)
    half = rows[: len(rows) // 2]
    with outcomes.open("w", encoding="utf-8") as out:
        for index, row in enumerate(half):
            row["reward"] = float(index % 2)
            row["response"] = {"id": f"resp-{index}", "output": []}
            out.write(json.dumps(row) + "\n")
    return len(half)
