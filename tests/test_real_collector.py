"""Issue 25: ``rollout-ledger run`` around NeMo Gym 0.7.0's own collector, for real.

Optional: ``ROLLOUT_LEDGER_NG07_COLLECTOR`` names the scratch folder that
``../shared/tools/nemo-gym-collector/setup.sh`` prepared (its ``RC``: the
0.7.0 virtual environment, the server configurations and ``data12.jsonl``).
The test starts the fake policy endpoint and ``ng_run`` with that folder's
scripts, makes the model fail the first attempts of two rollouts of one task
by their seed (``num_repeats_add_seed``), so round 2 dispatches only those two
and 0.7.0 numbers them 0 and 1, and runs this checkout's ``rollout-ledger
run`` around ``ng_collect_rollouts`` exactly as the README's quick start does.
Every rollout must end complete, each row under the rollout whose seed it
carries, nothing sampled more than needed.

Without the variable it is skipped with that reason: it needs NeMo Gym's
servers, Python 3.13 and several minutes, which CI does not have.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

ENV = "ROLLOUT_LEDGER_NG07_COLLECTOR"
TOOLS = Path(__file__).resolve().parents[2] / "shared" / "tools" / "nemo-gym-collector"
AGENT = "example_single_tool_call_simple_agent"
SCRIPT = Path(sys.executable).parent / "rollout-ledger"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not os.environ.get(ENV),
        reason=f"{ENV} does not name a folder that nemo-gym-collector/setup.sh "
        "prepared (NeMo Gym 0.7.0's real servers are needed)",
    ),
]


@pytest.fixture
def servers() -> Iterator[Path]:
    """The fake model and ``ng_run``, started for the test and stopped after."""
    scratch = Path(os.environ[ENV])
    if not (scratch / "venv" / "bin" / "ng_collect_rollouts").exists():
        pytest.fail(f"{ENV}={scratch}: no NeMo Gym 0.7.0 there; run setup.sh first")
    env = {**os.environ, "RC": str(scratch)}
    started = subprocess.run(
        ["bash", str(TOOLS / "start_servers.sh")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        yield scratch / "work"
    finally:
        subprocess.run(
            ["bash", str(TOOLS / "stop_servers.sh")],
            env=env,
            capture_output=True,
            check=False,
            timeout=120,
        )


def _seed(row: dict[str, object]) -> object:
    params = row["responses_create_params"]
    assert isinstance(params, dict)
    metadata = params.get("metadata") or {}
    assert isinstance(metadata, dict)
    return json.loads(metadata.get("extra_body", "{}")).get("seed")


def test_real_0_7_0_collector_partial_task_rounds_record_every_row_exactly(
    servers: Path, tmp_path: Path
) -> None:
    """Issue 25: round 2 runs rollouts 1 and 2 of t03, which 0.7.0 renumbers."""
    work = servers
    (work / "rules.json").write_text(json.dumps({"fail_seed": {"t03": [1, 2]}}))
    out = tmp_path / "results" / "rollouts.jsonl"
    configs = ["--config", str(work / "collection_seed.yaml")]
    for name in ("servers_env.yaml", "servers_model.yaml", "env.yaml"):
        configs += ["--global-config", str(work / name)]
    created = subprocess.run(
        [
            *(str(SCRIPT), "create", str(out)),
            *("--dataset", str(work / "data12.jsonl"), "--num-repeats", "4"),
            *configs,
        ],
        cwd=work,
        capture_output=True,
        text=True,
        check=False,
    )
    assert created.returncode == 0, created.stderr
    collector = str(work.parent / "venv" / "bin" / "ng_collect_rollouts")
    ran = subprocess.run(
        [
            *(str(SCRIPT), "run", str(out), *configs, "--json", "--", collector),
            *("+input_jsonl_fpath={plan}", "+output_jsonl_fpath={output}"),
            *(f"+agent_name={AGENT}", "+num_repeats=1", "+num_samples_in_parallel=4"),
            "+route_failures_to_sidecar=true",
        ],
        cwd=work,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr[-4000:]
    rounds = [json.loads(line) for line in ran.stdout.splitlines()]
    assert len(rounds) == 2, rounds
    assert rounds[1]["plan"]["dispatch"] == 2
    assert rounds[1]["recorded"]["refused"] == []
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    keys = Counter((r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows)
    assert len(keys) == 48
    assert set(keys.values()) == {1}
    for row in rows:  # the seed 0.7.0 sent is the recorded rollout's own
        assert _seed(row) == row["_ng_rollout_index"], row
    renumbered = [r for r in rows if "_ng_collector_indices" in r]
    assert sorted(r["_ng_rollout_index"] for r in renumbered) == [1, 2]
    verified = subprocess.run(
        [str(SCRIPT), "verify", str(out)], capture_output=True, text=True, check=False
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
