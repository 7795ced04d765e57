"""The README's quick start, as a newcomer runs it, on a real NeMo Gym dataset.

``create --dataset`` from blackjack's dataset (rebuilt from its materialized
inputs), then ``run`` around the ledger-unaware simulated collector the README
points to, then ``status`` and ``report``: a run that ends complete or with
nothing retryable (CLI-7), that verifies, and whose page opens with the same
counts (CLI-2, CLI-6, REC-40, REC-86).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
from click.testing import CliRunner

import cli
from cli import main
from tests.prerequisites import (
    FIXTURES_ENV,
    nemo_gym_configs,
    nemo_gym_fixtures,
    require_folder,
)

FIXTURES = nemo_gym_fixtures()
require_folder(FIXTURES, "*_materialized_inputs.jsonl", FIXTURES_ENV)
MATERIALIZED = (
    FIXTURES
    / "resources_servers/blackjack/data/example_rollouts_materialized_inputs.jsonl"
)
SERVERS = nemo_gym_configs() / "resources_servers/blackjack/configs/blackjack.yaml"
COLLECTOR = Path(cli.__file__).parent / "examples" / "simulated_collector.py"
SCRIPT = Path(sys.executable).parent / "rollout-ledger"
POLICY = """\
policy_model:
  responses_api_models:
    openai_model:
      openai_model: gpt-4o
"""


def _dataset(folder: Path) -> Path:
    """Blackjack's dataset: its materialized rows without their indices, once."""
    seen: dict[int, bytes] = {}
    for line in MATERIALIZED.read_bytes().splitlines():
        row = msgspec.json.decode(line)
        task = row.pop("_ng_task_index")
        del row["_ng_rollout_index"]
        seen.setdefault(task, msgspec.json.encode(row) + b"\n")
    path = folder / "data.jsonl"
    path.write_bytes(b"".join(seen.values()))
    return path


def test_cli_2_cli_7_quick_start_from_a_real_dataset_to_the_report(
    tmp_path: Path,
) -> None:
    out = tmp_path / "results" / "rollouts.jsonl"
    (tmp_path / "collection.yaml").write_text("num_samples_in_parallel: 4\n")
    (tmp_path / "policy.yaml").write_text(POLICY)
    config = ["--config", str(tmp_path / "collection.yaml")]
    config += ["--global-config", str(SERVERS)]
    config += ["--global-config", str(tmp_path / "policy.yaml")]
    runner = CliRunner()
    dataset = ["--dataset", str(_dataset(tmp_path)), "--num-repeats", "5"]
    created = runner.invoke(main, ["create", str(out), *dataset, *config])
    assert created.exit_code == 0, created.output
    assert (out.parent / "rollouts_materialized_inputs.jsonl").read_bytes() == (
        MATERIALIZED.read_bytes()
    )
    collector = [sys.executable, str(COLLECTOR), "--plan", "{plan}"]
    collector += ["--output", "{output}", "--failures", "{failures}", "--seed", "3"]
    done = subprocess.run(
        [str(SCRIPT), "run", str(out), *config, "--max-rounds", "8", "--", *collector],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode in (0, 76), (done.stdout, done.stderr)
    assert "round 1:" in done.stdout
    assert (out.parent / "rollouts_ledger" / "rounds" / "1" / "plan.jsonl").exists()
    status = json.loads(runner.invoke(main, ["status", str(out), "--json"]).output)
    decisions = status["coverage"]["decisions"]
    assert decisions["complete"] > 0
    assert decisions["pending"] == decisions["retry"] == decisions["rejudge"] == 0
    verified = runner.invoke(main, ["verify", str(out)])
    assert verified.exit_code == 0, verified.output
    page = tmp_path / "report.html"
    reported = runner.invoke(main, ["report", str(out), "-o", str(page)])
    assert reported.exit_code == 0, reported.output
    assert f">{decisions['complete']}<" in page.read_text(encoding="utf-8")
