"""CLI-15: the demo's simulated collector knows nothing of the ledger.

The script (``cli/examples/simulated_collector.py``) reads a plan file as
``resume -o`` writes it and appends NeMo Gym 0.7.0-shaped rows to the two files
it is given; ``record`` of those files accepts its rows, and rounds of resume,
collector and record reach the end of the run even though it kills itself.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.internals import demo_module
from tests.test_cli_support import CliRun, read_jsonl

SCRIPT = Path(__file__).resolve().parents[1] / "cli" / "examples"
SCRIPT = SCRIPT / "simulated_collector.py"


def collector(
    plan: Path, output: Path, failures: Path, *args: str, env: bool = False
) -> subprocess.CompletedProcess[str]:
    """Run the script on ``plan``: paths as options, or in the environment."""
    paths = ["--plan", str(plan), "--output", str(output), "--failures", str(failures)]
    environ = dict(os.environ)
    if env:
        environ |= {
            "ROLLOUT_LEDGER_PLAN": str(plan),
            "ROLLOUT_LEDGER_OUTPUT": str(output),
            "ROLLOUT_LEDGER_FAILURES": str(failures),
        }
        paths = []
    return subprocess.run(
        [sys.executable, str(SCRIPT), *paths, *args],
        capture_output=True,
        text=True,
        env=environ,
        check=False,
    )


def complete_lines(path: Path) -> Path:
    """``path`` without a torn last line (what following the file drops)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    kept = path.with_suffix(".complete.jsonl")
    kept.write_text(text[: text.rfind("\n") + 1], encoding="utf-8")
    return kept


def test_cli_15_collector_imports_the_standard_library_only() -> None:
    tree = ast.parse(SCRIPT.read_text(encoding="utf-8"))
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "no relative import"
            modules.add((node.module or "").split(".")[0])
    assert modules, "the parse found the imports"
    assert modules <= set(sys.stdlib_module_names), modules
    assert not modules & {"ledger", "projections", "cli", "tests"}
    assert "ROLLOUT_LEDGER_PLAN" in (ast.get_docstring(tree) or "")


def test_cli_15_collector_rows_copy_the_plan_rows_and_record(tmp_path: Path) -> None:
    run = CliRun(tmp_path, tasks=8, rollouts=4)
    run.create()
    _, plan = run.resume()
    plan_file = tmp_path / f"plan{run.plans}.jsonl"
    output, failures = tmp_path / "o.jsonl", tmp_path / "f.jsonl"
    done = collector(plan_file, output, failures, "--seed", "3", env=True)
    assert done.returncode == 0, done.stderr
    results, failed = read_jsonl(output), read_jsonl(failures)
    assert len(results) + len(failed) == len(plan) == 32
    keys = ("_ng_task_index", "_ng_rollout_index", "_ng_attempt_index", "_ng_run_id")
    stamped = {tuple(row[k] for k in keys) for row in plan}
    assert {tuple(row[k] for k in keys) for row in results + failed} == stamped
    assert all("response" in row and "reward" in row for row in results)
    assert all("_ng_failure_class" in row for row in failed)
    assert any("_ng_failure_stage" in row for row in failed)
    assert any(row["_ng_failure_class"] == "tau2_agent_error" for row in failed)
    for path in (output, failures):
        recorded = run.ok("record", run.out, path, "--json")
        rows = json.loads(recorded.stdout)["rows"]
        assert rows["read"] == rows["recorded"] == len(read_jsonl(path))
    # The same seed writes the same bytes.
    again = tmp_path / "o2.jsonl", tmp_path / "f2.jsonl"
    collector(plan_file, *again, "--seed", "3")
    assert again[0].read_bytes() == output.read_bytes()
    assert again[1].read_bytes() == failures.read_bytes()


@pytest.mark.slow
def test_cli_15_collector_dies_and_rounds_still_complete(tmp_path: Path) -> None:
    run = CliRun(tmp_path, tasks=6, rollouts=4)
    run.create()
    deaths = torn = 0
    for number in range(1, 15):
        _, plan = run.resume()
        if not plan:
            break
        output, failures = tmp_path / f"o{number}.jsonl", tmp_path / f"f{number}.jsonl"
        plan_file = tmp_path / f"plan{run.plans}.jsonl"
        done = collector(plan_file, output, failures, "--seed", "1", "--die-after", "5")
        if done.returncode == -9:
            deaths += 1
            torn += any(
                p.exists() and p.read_bytes()[-1:] not in (b"", b"\n")
                for p in (output, failures)
            )
        for path in (output, failures):
            if complete_lines(path).stat().st_size:
                run.ok("record", run.out, complete_lines(path))
    else:
        pytest.fail("the rounds did not end")
    assert deaths >= 2
    assert torn >= 1, "some death cut a line in the middle"
    check = run.invoke("check", run.out)
    assert check.exit_code in (0, 76), check.stdout  # complete, or only held left
    verify = run.ok("verify", run.out)
    assert (
        "the chain, the rows, two refolds and the published files hold" in verify.stdout
    )
    coverage: dict[str, Any] = json.loads(
        (run.ledger_dir / "coverage.json").read_text()
    )
    decisions = coverage["decisions"]
    assert decisions["pending"] == decisions["retry"] == decisions["rejudge"] == 0


@pytest.mark.slow
def test_cli_15_the_python_api_collector_example_still_runs(tmp_path: Path) -> None:
    """The README's API example in full (``cli/demo/collector.py``), killed once."""
    folder = tmp_path / "api"
    folder.mkdir()
    demo_module._write_config(folder, parallel=32)
    rows = folder / "rows.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in demo_module._inputs(40)))
    out = folder / "rollouts.jsonl"
    run = CliRun(tmp_path)
    run.ok(
        "create",
        out,
        "--inputs",
        rows,
        "--config",
        folder / "collection.yaml",
        "--global-config",
        folder / "servers.yaml",
    )
    command = [sys.executable, "-m", "cli.demo.collector", str(folder), "--seed", "2"]
    killed = subprocess.Popen(
        [*command, "--die-in-wave", "1"], stdout=subprocess.PIPE, text=True
    )
    assert killed.stdout is not None
    for line in killed.stdout:
        if line.startswith("dying mid-wave"):
            killed.kill()
            break
    killed.communicate()
    assert killed.returncode == -9
    for _ in range(4):
        done = subprocess.run(command, check=True, capture_output=True, text=True)
        if done.stdout.startswith("plan: dispatch 0, rejudge 0"):
            break
    assert run.invoke("check", out).exit_code in (0, 76)
    assert "published files hold" in run.ok("verify", out).stdout
