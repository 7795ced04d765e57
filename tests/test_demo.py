"""CLI-15: the demo really kills its collector, resumes, and ends deterministically."""

from __future__ import annotations

import json
import re
import shlex
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli import main
from tests.internals import demo


def run_demo(folder: Path, *args: str) -> str:
    result = CliRunner().invoke(demo, [str(folder), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_cli_15_demo_kills_resumes_across_drift_and_verifies(tmp_path: Path) -> None:
    output = run_demo(tmp_path / "a", "--rollouts", "96", "--seed", "1")
    assert "job 1: rollout-ledger run rollouts.jsonl" in output
    assert "--max-rounds 1 -- python " in output
    assert "simulated_collector.py --plan '{plan}' --output '{output}'" in output
    assert "round 1: 96 to dispatch" in output
    assert "dying now (SIGKILL)" in output  # the collector really kills itself
    assert "the collector was killed by SIGKILL" in output
    assert "the last line is incomplete" in output  # a torn line, not recorded
    assert "  exit 75 (unfinished, retryable" in output  # job 1 stops after a round
    assert "job 2: rollout-ledger run" in output
    assert "operational drift accepted: collection.num_samples_in_parallel" in output
    assert re.search(r"round [3-9]: ", output), "job 2 ran rounds of its own"
    assert "verify: all checks hold" in output
    assert "\ncheck: " in output
    ledger_dir = tmp_path / "a" / "rollouts_ledger"
    journal = (ledger_dir / "resume_drift.log").read_text().splitlines()
    assert len(journal) == 1
    assert journal[0].endswith("collection.num_samples_in_parallel")
    saved = json.loads((ledger_dir / "coverage.json").read_text())
    assert saved["expected"] == 96
    assert sum(saved["decisions"].values()) == 96
    # Nothing retryable is left: the demo resumes until only held/terminal remain.
    assert saved["decisions"]["pending"] == saved["decisions"]["retry"] == 0
    assert saved["totals"]["drift_acceptances"] == 1
    # Around a collector that dies mid-row, nothing is recorded twice.
    exported = tmp_path / "events.jsonl"
    done = CliRunner().invoke(
        main, ["export", str(tmp_path / "a" / "rollouts.jsonl"), "-o", str(exported)]
    )
    assert done.exit_code == 0, done.output
    events = [json.loads(line) for line in exported.read_text().splitlines()]
    kinds = {"attempt_reserved", "result_saved", "failure_saved"}
    keyed = Counter(
        (e["body"]["task"], e["body"]["rollout"], e["body"]["attempt"], e["kind"])
        for e in events
        if e["kind"] in kinds
    )
    assert keyed
    assert set(keyed.values()) == {1}
    assert {kind for *_, kind in keyed} == kinds


@pytest.mark.slow
def test_cli_15_demo_is_deterministic_for_a_seed(tmp_path: Path) -> None:
    first = run_demo(tmp_path / "a", "--rollouts", "32", "--seed", "5")
    second = run_demo(tmp_path / "b", "--rollouts", "32", "--seed", "5")

    def stable(text: str, folder: str) -> str:
        text = text.replace(str(tmp_path / folder), "DIR")
        return re.sub(r"\d{4}-\d\d-\d\dT\S+\t\S+\t\S+", "<time and digests>", text)

    assert stable(first, "a") == stable(second, "b")
    a = json.loads((tmp_path / "a" / "rollouts_ledger" / "coverage.json").read_text())
    b = json.loads((tmp_path / "b" / "rollouts_ledger" / "coverage.json").read_text())
    assert a == b


def test_cli_15_demo_refuses_a_folder_that_holds_a_run(tmp_path: Path) -> None:
    run_demo(tmp_path / "a", "--rollouts", "8")
    result = CliRunner().invoke(demo, [str(tmp_path / "a")])
    assert result.exit_code == 2
    assert "already holds a run" in result.output


def test_the_demo_ends_with_its_figures_and_commands_that_run(tmp_path: Path) -> None:
    """Issue 28: it says it worked, the reward figures, and what to open next."""
    folder = tmp_path / "demo"
    output = run_demo(folder, "--rollouts", "40", "--seed", "2")
    ending = output.split("the demo worked:", 1)[1]
    assert "reward figures:" in ending
    assert "mean reward" in ending
    commands = [
        line.strip()
        for line in ending.splitlines()
        if line.strip().startswith("rollout-ledger ")
    ]
    assert [c.split()[1] for c in commands] == ["view", "report", "status"]
    for command in commands[1:]:  # view serves until stopped (tests/test_view.py)
        result = CliRunner().invoke(main, shlex.split(command)[1:])
        assert result.exit_code == 0, (command, result.output)
