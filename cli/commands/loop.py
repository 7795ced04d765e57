"""``rollout-ledger run``: the whole collection, around a ledger-unaware collector."""

from __future__ import annotations

import shlex
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cli.commands.coordinating import is_url, store_options
from cli.commands.workers import recorded_document, run_on_store
from cli.common import (
    config_options,
    count,
    echo_json,
    load_config,
    load_global_config,
    note_driving,
    option_file,
    out_argument,
    reader,
    writer,
)
from cli.render.progress import RoundProgressLine
from cli.render.text import plural

if TYPE_CHECKING:
    from projections import RoundReport

__all__ = ["run"]

_STOPS = {
    "complete": "the run is complete",
    "nothing_retryable": "unfinished work remains, none of it retryable",
    "interrupted": "stopped by a signal; the rows so far are recorded, run it again "
    "to go on",
    "nothing_released": "the plan released nothing to run, though work remains",
    "max_rounds": "--max-rounds reached; run it again to go on",
    "stalled": "the collector's rounds recorded nothing, so running it again "
    "cannot progress",
}


@click.command(context_settings={"ignore_unknown_options": True})
@out_argument
@config_options
@click.option(
    "--extend-attempts",
    type=count(0),
    default=0,
    help="Total extra attempts per rollout; recorded only when it grows.",
)
@click.option("--source", type=option_file, help="The dataset the rows came from.")
@click.option(
    "--rerun-masked-without-artifact",
    "approvals",
    type=option_file,
    help="Approvals file (first round): one '{task, rollout, attempt}' or "
    "'T R A' a line.",
)
@click.option(
    "--retry-terminal-timeouts/--no-retry-terminal-timeouts",
    default=None,
    help="Record the policy opt-in to retry timeouts the agent marked final.",
)
@click.option("--allow-unsafe", is_flag=True, help="Proceed across a refusal.")
@click.option("--longest-first", is_flag=True, help="Dispatch longest rollouts first.")
@click.option("--reason", help="Why, recorded with the operator events.")
@click.option(
    "--max-rounds", type=count(1), metavar="N", help="Stop after N rounds (exit 75)."
)
@click.option(
    "--round-timeout",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Stop a collector running longer (SIGTERM, SIGKILL 10 s later).",
)
@click.option(
    "--progress-every",
    type=click.FloatRange(min=0, min_open=True),
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="Off a terminal (a Slurm log), a progress line every SECONDS of a round.",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress line.")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the verdict, the first round's plan and the command it would "
    "run; start nothing, write nothing.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON line per round instead (its keys: docs/json.md).",
)
@store_options
@click.argument(
    "command",
    nargs=-1,
    required=False,
    type=click.UNPROCESSED,
    metavar="-- COMMAND [ARGS]...",
)
def run(
    out: Path,
    config: Path,
    global_configs: tuple[Path, ...],
    extend_attempts: int,
    source: Path | None,
    approvals: Path | None,
    retry_terminal_timeouts: bool | None,
    allow_unsafe: bool,
    longest_first: bool,
    reason: str | None,
    max_rounds: int | None,
    round_timeout: float | None,
    progress_every: float,
    quiet: bool,
    dry_run: bool,
    as_json: bool,
    command: tuple[str, ...],
    **store: Any,  # --worker, --batch, --workdir, --wait: a run URL's
) -> None:
    """Resume, run COMMAND on the plan, record its rows as they land; repeat.

    Each round releases a plan (as resume does) into the run's ledger folder,
    then starts COMMAND (no shell) with the placeholders below replaced in its
    arguments. Every complete line COMMAND appends is recorded while it runs,
    as the plan row whose _ng_rollout_id it carries (whatever rollout number
    it wrote: NeMo Gym renumbers them).

    A line that is not JSON, or answers nothing the round released, is
    refused with its file and line and kept in the log; the other lines are
    recorded.

    A round lasts until every process of COMMAND's group has exited; rounds
    go on until one of the exit codes below. SIGTERM or SIGINT is passed to
    COMMAND, and its rows are recorded. After a kill, run again: it waits for
    a collector still draining and records what it wrote first, nothing
    twice.

    \b
    Placeholders, and the variables with the same path:
      {plan}      ROLLOUT_LEDGER_PLAN
                  the round's plan: rounds/N/plan.jsonl
      {output}    ROLLOUT_LEDGER_OUTPUT
                  where COMMAND writes its result rows:
                  rounds/N/output.jsonl
      {failures}  ROLLOUT_LEDGER_FAILURES
                  where it writes its failure rows:
                  rounds/N/output_failures.jsonl (where
                  NeMo Gym writes an output's failures)

    \b
    Exit codes:
      0   the run is complete
      3   refused: the configuration (as by resume), or
          COMMAND recorded nothing in 2 rounds in a row
          (run says why)
      75  work is left, some of it retryable: --max-rounds
          rounds ran, SIGTERM or SIGINT came, or a plan
          released nothing; run again to go on
      76  nothing retryable is left: only held, terminal
          or exhausted rollouts remain

    On a run URL (PostgreSQL) run coordinates: it releases work to workers
    (--worker, on any node: claim --batch attempts, run COMMAND, record); given
    COMMAND it starts one worker too (docs/postgres-run.md).

    \b
    Example:
      rollout-ledger run results/rollouts.jsonl \\
          --config collection.yaml \\
          --global-config servers.yaml \\
          -- python collect.py {plan} {output}
      rollout-ledger run results/rollouts.jsonl \\
          --config collection.yaml \\
          --global-config servers.yaml \\
          -- ng_collect_rollouts \\
          +input_jsonl_fpath={plan} \\
          +output_jsonl_fpath={output}
      rollout-ledger run \\
          'postgresql://me@db:5432/runs?run=eval1' \\
          --config collection.yaml --worker \\
          -- python collect.py {plan} {output}
    \f
    Rules: CLI-4, CLI-5, CLI-7, REC-40, REC-56, REC-86.
    """
    import sys

    import projections
    from cli.launch.collector import ProcessLauncher, collector_stdout

    argv = list(command[1:] if command[:1] == ("--",) else command)
    if store["worker"] or is_url(out):  # a run URL (issue 29)
        run_on_store(out, argv, click.get_current_context().params)
        return
    if not argv:
        raise click.UsageError("give the collector's command after --")
    from cli.launch.collector import sidecar_warning

    warning = sidecar_warning(argv)
    if warning is not None:
        click.echo(f"rollout-ledger: warning: {warning}", err=True)
    collection = load_config(config)
    servers = load_global_config(global_configs)
    options: dict[str, Any] = {
        "source": source,
        "extend_attempts": extend_attempts,
        "approvals": approvals,
        "retry_terminal_timeouts": retry_terminal_timeouts,
        "allow_unsafe": allow_unsafe,
        "longest_first": longest_first,
        "reason": reason,
    }
    if dry_run:
        _dry_run(out, collection, servers, argv, options, as_json=as_json)
        return
    launcher = ProcessLauncher(
        argv, round_timeout=round_timeout, stdout=collector_stdout(as_json)
    )
    show = _echo_json if as_json else _echo_text
    progress = RoundProgressLine(every=progress_every, quiet=quiet)
    with launcher.signals(), writer(out) as led, closing(progress):
        note_driving(out, config, global_configs, argv)
        last = projections.run_rounds(
            led,
            collection,
            servers,
            launcher,
            max_rounds=max_rounds,
            on_round=show,
            on_progress=progress,
            **options,
        )
    if last.exit_code:
        sys.exit(last.exit_code)


def _dry_run(
    out: Path,
    collection: Any,
    servers: Any,
    argv: list[str],
    options: dict[str, Any],
    *,
    as_json: bool,
) -> None:
    """What the next round would do: the verdict, its plan and its command."""
    import projections
    from cli.launch.collector import replace_places
    from cli.render.progress import working
    from cli.render.text import verdict_lines

    with working("resuming"), reader(out) as led:
        found = projections.resume(
            led, collection, servers, dry_run=True, keep_rows=False, **options
        )
        files = projections.next_round_files(led)
    places = {"plan": files.plan, "output": files.output, "failures": files.failures}
    would = [replace_places(arg, places) for arg in argv]
    plan = found.plan
    counts = {
        "dispatch": plan.counts.get("dispatch", 0),
        "rejudge": len(plan.rejudge),
        "held": len(plan.held),
    }
    if as_json:
        from cli.commands.run import resume_document

        document = resume_document(found, plan_out=None, dry_run=True)
        echo_json(document | {"round": files.number, "command": would})
        return
    for line in verdict_lines(found.verdict):
        click.echo(line)
    click.echo(
        f"round {files.number} would release {counts['dispatch']} to dispatch, "
        f"{counts['rejudge']} to re-judge, {counts['held']} held"
    )
    if counts["dispatch"] + counts["rejudge"]:
        click.echo(f"and run: {shlex.join(would)}")
    click.echo("dry run: nothing was written and no collector was started")


def round_document(report: RoundReport) -> dict[str, Any]:
    """One round as its ``--json`` line (docs/json.md)."""
    import msgspec

    ended = report.collector
    return {
        "schema_version": 1,
        "round": report.round,
        "adopted": None
        if report.adopted is None
        else recorded_document(report.adopted),
        "plan": report.plan,
        "files": None if report.files is None else msgspec.to_builtins(report.files),
        "collector": None if ended is None else msgspec.to_builtins(ended),
        "recorded": recorded_document(report.recorded),
        "check": msgspec.to_builtins(report.check),
        "stop": report.stop,
        "why": report.why,
        "exit_code": report.exit_code,
    }


def _echo_json(report: RoundReport) -> None:
    import msgspec

    encoded = msgspec.json.encode(round_document(report), order="sorted")
    click.echo(encoded.decode())
    _warn_refused(report)


def _warn_refused(report: RoundReport) -> None:
    for recorded in (report.adopted, report.recorded):
        for refusal in [] if recorded is None else recorded.refused:
            click.echo(
                f"rollout-ledger: {refusal.file} line {refusal.line}: "
                f"{refusal.message}; not recorded",
                err=True,
            )
    ended = report.collector
    if ended is not None and ended.timed_out:
        click.echo(
            f"rollout-ledger: round {report.round}: the collector ran past "
            "--round-timeout and was stopped",
            err=True,
        )
    elif ended is not None and ended.exit_code and not ended.stopped:
        click.echo(
            f"rollout-ledger: round {report.round}: the collector "
            f"{_ending(ended.exit_code)}; the rows it wrote are recorded",
            err=True,
        )


def _ending(code: int) -> str:
    """How the collector ended, in words: a negative code is the signal."""
    if code < 0:
        import signal

        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was killed by {name}"
    return f"exited with code {code}"


def _echo_text(report: RoundReport) -> None:
    _warn_refused(report)
    if report.adopted is not None:
        click.echo(
            f"recorded {plural(report.adopted.rows, 'row')} a previous run's "
            f"collector wrote ({report.adopted.skipped} recorded already)"
        )
    if report.plan is not None:
        plan = report.plan
        ended = report.collector
        how = (
            ""
            if ended is None or ended.exit_code is None
            else f", the collector {_ending(ended.exit_code)}"
        )
        click.echo(
            f"round {report.round}: {plan['dispatch']} to dispatch, "
            f"{plan['rejudge']} to re-judge, {plan['held']} held; recorded "
            f"{plural(report.recorded.rows, 'row')}{how}"
        )
    if report.stop is not None:
        click.echo(f"{report.check.message}")
        click.echo(f"stopped: {_STOPS[report.stop]} (exit {report.exit_code})")
        if report.why is not None:
            click.echo(f"why: {report.why}")
