"""``rollout-ledger demo``: ``run`` around a collector that knows nothing of us.

CLI-15: creates a run of a few hundred rollouts, then runs two "jobs" of
``rollout-ledger run`` (each a separate process, as a batch system would start
it) around the simulated collector ``cli/examples/simulated_collector.py``: a
standard-library script that reads the plan file and appends NeMo Gym
0.7.0-shaped result and failure rows, the documented example of wrapping any
collector. Job 1's collector is killed with SIGKILL partway through and job 1
stops after that round (``--max-rounds 1``, exit 75, as a walltime limit ends
a job); between the jobs an operational setting changes (accepted as drift);
job 2's collector dies now and then, torn last lines included, and job 2 runs
rounds until nothing retryable remains. The demo then prints the coverage,
the drift journal, ``verify``'s and ``check``'s verdicts. Every outcome is a
function of the seed and the attempt, so a given ``--seed`` ends the same way.
"""

from __future__ import annotations

import os
import re
import shlex
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
    quiet_option,
    reader,
    run_clock,
)
from cli.render.progress import working
from cli.render.text import coverage_lines, plural

__all__ = ["demo"]

MAX_ROUNDS = 12
REPEATS = 4
#: The chance the collector kills itself before each row it writes (job 2).
DIE_PROBABILITY = 0.004
ROUND_LINE = re.compile(r"round \d+: ")
#: What ``run``'s exit code tells a batch system, as the demo says it.
EXITS = {
    0: "complete",
    75: "unfinished, retryable: a batch system requeues the job",
    76: "unfinished, nothing retryable: the job stops",
}

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


COLLECTOR = Path(__file__).resolve().parents[1] / "examples" / "simulated_collector.py"


def collector_command(seed: int, dying: str) -> list[str]:
    """The simulated collector's command line, placeholders left for ``run``."""
    return [
        sys.executable,
        str(COLLECTOR),
        *("--plan", "{plan}", "--output", "{output}", "--failures", "{failures}"),
        *("--seed", str(seed), *dying.split()),
    ]


def _run_args(*extra: str) -> list[str]:
    return [
        "run",
        "rollouts.jsonl",
        *("--config", "collection.yaml", "--global-config", "servers.yaml"),
        *extra,
    ]


def _job(folder: Path, args: list[str], show: bool) -> tuple[list[str], int]:
    """``rollout-ledger run ARGS`` in ``folder`` as a process; its lines, exit code."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")  # its lines in the order written
    lines = []
    with subprocess.Popen(
        [sys.executable, "-m", "cli", *args],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if show:
                click.echo(f"  {lines[-1]}")
        code = proc.wait()
    if code not in (0, 75, 76):
        shown = "\n".join(lines)
        raise click.ClickException(f"rollout-ledger run failed ({code}):\n{shown}")
    return lines, code


def _shown(args: list[str]) -> str:
    return "rollout-ledger " + " ".join(
        shlex.quote(a) if a != sys.executable else "python" for a in args
    )


def _by_round(lines: list[str]) -> list[list[str]]:
    """A job's lines, each round's ending with its ``round N:`` line."""
    rounds: list[list[str]] = [[]]
    for line in lines:
        rounds[-1].append(line)
        if ROUND_LINE.match(line):
            rounds.append([])
    trailing = rounds.pop()
    if rounds:
        rounds[-1] += trailing  # the stop sentence and check's verdict
    elif trailing:
        rounds.append(trailing)
    return rounds


def _document(
    out: Path, jobs: list[dict[str, Any]], rounds: list[list[str]], verdict: str
) -> dict[str, Any]:
    """``demo --json`` (docs/json.md): the run, its jobs, each round's lines."""
    import msgspec

    import projections

    with reader(out) as led:
        cov = projections.status(led).coverage.to_dict()
        findings = projections.verify_run(led).findings
    return {
        "out": str(out),
        "collector": str(COLLECTOR),
        "jobs": jobs,
        "rounds": [{"round": n, "lines": lines} for n, lines in enumerate(rounds, 1)],
        "coverage": cov,
        "verify": [msgspec.to_builtins(f) for f in findings],
        "check": verdict,
    }


def _verdict(out: Path) -> str:
    """``check``'s sentence on the run as recorded."""
    import ledger
    import projections

    try:
        with reader(out) as led:
            projections.check_run(led)
    except ledger.RecoveryIncomplete as exc:
        return str(exc)
    return "complete: every rollout is complete or omitted"


def _report(out: Path) -> None:
    import projections

    with reader(out) as led:
        cov = projections.status(led).coverage.to_dict()
        findings = projections.verify_run(led).findings
    click.echo("")
    for line in coverage_lines(cov):
        click.echo(line)
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
    help="The seed of the simulated collector.",
)
@json_option
@quiet_option
def demo(
    folder: Path | None, rollouts: int, seed: int, as_json: bool, quiet: bool
) -> None:
    """Run a simulated collection with `rollout-ledger run`, killed and resumed.

    Creates a run in FOLDER (a new temporary folder when omitted), then runs
    `rollout-ledger run` twice around a simulated NeMo Gym collector, a
    separate script that knows nothing of the ledger (its path is printed: it
    is the example of wrapping any collector). The first job's collector is
    killed with SIGKILL and the job stops after one round; an operational
    setting changes; the second job goes on, its collector dying now and then,
    until nothing retryable remains. Then prints the coverage, the drift
    journal, check's verdict and verify's. Deterministic for a given --seed.
    With --json, one document once done.

    \b
    Example:
      rollout-ledger demo /tmp/demo --rollouts 300 --seed 7
    \f
    Rules: CLI-15.
    """

    folder = folder or Path(tempfile.mkdtemp(prefix="rollout-ledger-demo-"))
    folder.mkdir(parents=True, exist_ok=True)
    if (folder / "rollouts.jsonl").exists() or (folder / "rollouts_ledger").exists():
        raise click.UsageError(f"{folder} already holds a run; choose an empty folder")
    out = _create(folder, rollouts)
    say = (lambda text: None) if as_json else click.echo
    say(f"created a run of {plural(rollouts, 'rollout')} in {folder}")
    say(f"the collector, which knows nothing of the ledger: {COLLECTOR}")
    jobs: list[dict[str, Any]] = []
    rounds: list[list[str]] = []
    # Job 1 ends as a walltime limit ends it: its collector is killed with
    # SIGKILL partway through the plan, and run stops after that round (75).
    # Job 2 starts after an operational change (accepted as drift) and runs
    # rounds, its collector dying now and then, until nothing retryable is left.
    plans = [
        (["--max-rounds", "1"], f"--die-after {max(1, rollouts // 3)}"),
        (["--max-rounds", str(MAX_ROUNDS)], f"--die-probability {DIE_PROBABILITY}"),
    ]
    for number, (options, dying) in enumerate(plans, 1):
        if number == 2:
            _write_config(folder, parallel=64)
            say(
                "\nbetween the jobs, collection.yaml's num_samples_in_parallel "
                "went from 32 to 64 (an operational change)"
            )
        args = _run_args(*options, "--", *collector_command(seed, dying))
        say(f"\njob {number}: {_shown(args)}")
        # Without --json the job's lines show it working; with it, a spinner.
        with working(f"job {number}", quiet=quiet or not as_json):
            lines, code = _job(folder, args, show=not as_json)
        say(f"  exit {code} ({EXITS[code]})")
        jobs.append({"job": number, "command": _shown(args), "exit_code": code})
        rounds += _by_round(lines)
    verdict = _verdict(out)
    if as_json:
        echo_json(_document(out, jobs, rounds, verdict))
        return
    _report(out)
    click.echo(f"\ncheck: {verdict}")
    _next_steps(folder, out)


def _next_steps(folder: Path, out: Path) -> None:
    """The demo's end: it worked, the figures, and what to open next."""
    import projections

    with reader(out) as led:
        state = projections.replay(led)
        figures = projections.reward_metrics(led, state)
    click.echo(
        "\nthe demo worked: the collection was killed, resumed and taken as far as "
        "it can go; the rollouts left wait for a person (held) or cannot run "
        "again (terminal), which is what the last job's exit code says"
    )
    click.echo("reward figures:")
    for line in projections.metrics_lines(figures):
        click.echo(f"  {line}")
    click.echo("look at the run:")
    click.echo(f"  rollout-ledger view {shlex.quote(str(folder))}")
    click.echo(f"  rollout-ledger report {shlex.quote(str(out))}")
    click.echo(f"  rollout-ledger status {shlex.quote(str(out))}")
