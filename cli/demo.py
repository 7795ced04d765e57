"""``rollout-ledger demo``: a simulated collection, killed and resumed until done.

CLI-15: creates a run of a few hundred rollouts against the built-in simulated
agent and judge (``cli/demo_sim.py``), then runs the demo collector
(``cli/demo_collector.py``, the example of a collector integration) in a fresh
process per round: the first round is killed with SIGKILL mid-wave, the second
resumes across an operational configuration change, and rounds go on until
the run is complete or only held, terminal or exhausted work remains.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

from cli.common import (
    echo_json,
    json_option,
    load_config,
    load_global_config,
    reader,
    run_clock,
)
from cli.progress import working
from cli.render import plural

__all__ = ["demo"]

MAX_ROUNDS = 12
REPEATS = 4

COLLECTION_YAML = """\
agent_name: math_agent
input_jsonl_fpath: data/problems.jsonl
output_jsonl_fpath: rollouts.jsonl
num_repeats: {repeats}
num_samples_in_parallel: {parallel}
responses_create_params:
  temperature: 0.6
  top_p: 0.95
  max_output_tokens: 4096
"""

SERVERS_YAML = """\
policy_base_url: http://127.0.0.1:8000/v1
policy_api_key: ${oc.env:DEMO_POLICY_API_KEY,sk-demo-not-a-real-key}
policy_model_name: demo/simulated-policy
policy_model:
  responses_api_models:
    vllm_model:
      entrypoint: app.py
      host: 127.0.0.1
      port: 40001
      base_url: ${policy_base_url}
      api_key: ${policy_api_key}
      model: ${policy_model_name}
judge_model:
  responses_api_models:
    openai_model:
      entrypoint: app.py
      openai_base_url: http://127.0.0.1:8001/v1
      openai_api_key: ${oc.env:DEMO_JUDGE_API_KEY,sk-demo-judge}
      openai_model: demo/simulated-judge
      request_timeout_s: 120
math_with_judge:
  resources_servers:
    math_with_judge:
      entrypoint: app.py
      judge_model_server:
        type: responses_api_models
        name: judge_model
      should_use_judge: true
math_agent:
  responses_api_agents:
    simple_agent:
      entrypoint: app.py
      resources_server:
        type: resources_servers
        name: math_with_judge
      model_server:
        type: responses_api_models
        name: policy_model
"""


def _inputs(rollouts: int) -> list[dict[str, Any]]:
    tasks = -(-rollouts // REPEATS)
    return [
        {
            "_ng_task_index": task,
            "_ng_rollout_index": repeat,
            "agent_ref": {"type": "responses_api_agents", "name": "math_agent"},
            "responses_create_params": {
                "input": [
                    {
                        "role": "user",
                        "content": f"Problem {task}: what is {task} * 7 mod 10?",
                    }
                ]
            },
        }
        for task in range(tasks)
        for repeat in range(REPEATS)
    ][:rollouts]


def _write_config(folder: Path, *, parallel: int) -> None:
    text = COLLECTION_YAML.format(repeats=REPEATS, parallel=parallel)
    (folder / "collection.yaml").write_text(text, encoding="utf-8")
    (folder / "servers.yaml").write_text(SERVERS_YAML, encoding="utf-8")


def _create(folder: Path, rollouts: int) -> Path:
    import projections

    _write_config(folder, parallel=32)
    out = folder / "rollouts.jsonl"
    # The create command's own call, so a demo run starts as any run does.
    projections.create_run(
        out,
        _inputs(rollouts),
        load_config(folder / "collection.yaml"),
        load_global_config([folder / "servers.yaml"]),
        max_attempts=3,
        clock=run_clock(),
    )
    return out


def _round(folder: Path, seed: int, *, die_in_wave: int | None) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "cli.demo_collector",
        str(folder),
        "--seed",
        str(seed),
    ]
    if die_in_wave is not None:
        command += ["--die-in-wave", str(die_in_wave)]
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        if line.startswith("dying mid-wave"):
            proc.send_signal(signal.SIGKILL)  # a real kill, as a walltime limit does
            lines.append("collector killed with SIGKILL mid-wave")
            break
    _, err = proc.communicate()
    if proc.returncode not in (0, -signal.SIGKILL):
        raise click.ClickException(f"the demo collector failed:\n{err.strip()}")
    return lines


def _unfinished(out: Path) -> tuple[bool, str]:
    import ledger
    import projections

    try:
        with reader(out) as led:
            projections.check_run(led)
    except ledger.RecoveryIncomplete as exc:
        return exc.retryable, str(exc)
    return False, "complete: every rollout is complete or omitted"


def _document(out: Path, rounds: list[list[str]], verdict: str) -> dict[str, Any]:
    """``demo --json`` (docs/json.md): the run, each round's lines, the verdicts."""
    import msgspec

    import projections

    with reader(out) as led:
        cov = projections.status(led).coverage.to_dict()
        findings = projections.verify_run(led).findings
    return {
        "out": str(out),
        "rounds": [{"round": n, "lines": lines} for n, lines in enumerate(rounds, 1)],
        "coverage": cov,
        "verify": [msgspec.to_builtins(f) for f in findings],
        "check": verdict,
    }


def _report(out: Path) -> None:
    import projections

    with reader(out) as led:
        cov = projections.status(led).coverage.to_dict()
        findings = projections.verify_run(led).findings
    click.echo(
        f"\ncoverage of {plural(cov['expected'], 'rollout')} "
        f"(as of seq {cov['as_of_seq']}):"
    )
    for value, count in cov["decisions"].items():
        if count:
            split = cov.get(value, {})
            detail = (
                ", ".join(f"{k} {n}" for k, n in split.items() if n) if split else ""
            )
            click.echo(
                f"  {value:<10} {count:>5}" + (f"  ({detail})" if detail else "")
            )
    journal = out.parent / f"{out.stem}_ledger" / "resume_drift.log"
    click.echo("\ndrift journal (resume_drift.log):")
    for line in journal.read_text(encoding="utf-8").splitlines() or ["  (empty)"]:
        click.echo(f"  {line}")
    click.echo(f"\nverify: {'all checks hold' if not findings else len(findings)}")
    for finding in findings:
        click.echo(f"  {finding}")


@click.command()
@click.argument(
    "folder", required=False, type=click.Path(file_okay=False, path_type=Path)
)
@click.option(
    "--rollouts",
    default=300,
    show_default=True,
    type=click.IntRange(4, 100_000),
    help="How many rollouts the simulated collection has.",
)
@click.option(
    "--seed",
    default=0,
    show_default=True,
    type=int,
    help="The seed of the simulated agent and judge.",
)
@json_option
def demo(folder: Path | None, rollouts: int, seed: int, as_json: bool) -> None:
    """Run a simulated collection, killed and resumed until done.

    Creates a run in FOLDER (a new temporary folder when omitted) against a
    built-in simulated agent and judge, kills the collector process with
    SIGKILL mid-run, resumes with a fresh process across an operational
    configuration change, and goes on until nothing retryable remains; then
    prints the coverage, the drift journal, check's verdict and verify's.
    Deterministic for a given --seed. With --json, one document once done.

    \b
    Example:
      rollout-ledger demo /tmp/demo-run --rollouts 300 --seed 7
    \f
    Rules: CLI-15.
    """
    folder = folder or Path(tempfile.mkdtemp(prefix="rollout-ledger-demo-"))
    folder.mkdir(parents=True, exist_ok=True)
    if (folder / "rollouts.jsonl").exists() or (folder / "rollouts_ledger").exists():
        raise click.UsageError(f"{folder} already holds a run; choose an empty folder")
    out = _create(folder, rollouts)
    if not as_json:
        click.echo(f"created a run of {plural(rollouts, 'rollout')} in {folder}")
    rounds = []
    for number in range(1, MAX_ROUNDS + 1):
        if number == 2:  # an operational change between resumes: accepted as drift
            _write_config(folder, parallel=64)
        with working(f"round {number}"):
            lines = _round(folder, seed, die_in_wave=1 if number == 1 else None)
        rounds.append([line for line in lines if not line.startswith("wave ")])
        if not as_json:
            click.echo(f"round {number}: " + "; ".join(rounds[-1]))
        retryable, verdict = _unfinished(out)
        if not retryable:
            break
    if as_json:
        echo_json(_document(out, rounds, verdict))
        return
    _report(out)
    click.echo(f"\ncheck: {verdict}")
