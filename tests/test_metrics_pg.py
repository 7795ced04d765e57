"""Issue 16's reward figures on a run in the store (SC-1: every command takes a URL).

``status`` leads with them and ``results --metrics`` writes NeMo Gym's
aggregate metrics file of a run named by ``postgresql://...?run=NAME``, as
for a file-based run (``tests/test_metrics.py``).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from tests.test_cli_support import CliRun, graded


def test_sc_1_status_and_results_metrics_on_a_run_url(
    tmp_path: Path, pg_url: str
) -> None:
    run = CliRun(tmp_path)
    run.out = f"{pg_url}?run=metrics-{uuid.uuid4().hex[:10]}"  # type: ignore[assignment]
    run.create()
    run.collect(lambda row: graded(1.0 if row["_ng_rollout_index"] == 0 else 0.0))
    lines = run.ok("status", run.out).stdout.splitlines()
    assert lines[:2] == [
        "6 of 6 complete (100.0%)",
        "mean reward 0.50 ± 0.22 (95% interval -0.07\u20131.07) over 6 scored rollouts"
        "; wider than the rewards' range (0 to 1)",
    ]
    figures = tmp_path / "figures.json"
    run.ok("results", run.out, "-o", tmp_path / "rows.jsonl", "--metrics", figures)
    (entry,) = json.loads(figures.read_text())
    assert entry["agent_metrics"]["mean/reward"] == 0.5
    assert entry["rollout_ledger"]["metrics"]["pass_at_k"]["values"][0] == {
        "k": 1,
        "value": 0.5,
        "tasks": 3,
        "of_tasks": 3,
        "tasks_left_out": 0,
    }
