"""Commands that run a collection: ``create``, ``resume`` and ``record``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cli.common import (
    config_options,
    count,
    dry_run_option,
    echo_json,
    json_option,
    load_config,
    load_global_config,
    note_driving,
    option_file,
    out_argument,
    output_option,
    quiet_option,
    reader,
    run_clock,
    writer,
)
from cli.render.progress import working
from cli.render.text import plural

if TYPE_CHECKING:
    from projections import Plan, Resume

__all__ = ["create", "record", "resume", "resume_document"]

_FILE = option_file
_INDEX_KEYS = ("_ng_task_index", "_ng_rollout_index")


@click.command()
@out_argument
@click.option(
    "--inputs",
    type=_FILE,
    help="Materialized rows (JSONL), each with its task and rollout index.",
)
@click.option(
    "--dataset",
    type=_FILE,
    help="A NeMo Gym dataset (JSONL, rows without indices), expanded here as "
    "NeMo Gym expands it; instead of --inputs.",
)
@click.option(
    "--num-repeats",
    type=count(1),
    help="With --dataset: rollouts per dataset row (default: num_repeats in "
    "--config, else 1).",
)
@click.option(
    "--source",
    type=_FILE,
    help="The dataset the rows came from (with --dataset: that file).",
)
@config_options
@click.option(
    "--max-attempts",
    type=count(1),
    help="Attempts per rollout (default: NEMO_GYM_MAX_ROLLOUT_ATTEMPTS, else 3).",
)
@click.option(
    "--policy",
    type=_FILE,
    help="Recovery policy (JSON); else the owning launcher's recovery_policy.json.",
)
@click.option(
    "--journal-mode",
    type=click.Choice(["wal", "delete"]),
    default="wal",
    show_default=True,
    help="SQLite journal mode; delete where WAL is unsafe (see doctor).",
)
@dry_run_option
@json_option
def create(
    out: Path,
    inputs: Path | None,
    dataset: Path | None,
    num_repeats: int | None,
    source: Path | None,
    config: Path,
    global_configs: tuple[Path, ...],
    max_attempts: int | None,
    policy: Path | None,
    journal_mode: str,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Start a run: materialize the inputs, create the ledger.

    Takes the run lock, copies the input rows (each with its task and rollout
    index) to the materialized inputs, records run_created with the manifest,
    the credential-safe identity and the policy, and publishes the manifest
    and coverage. Refuses a run that exists: continue it with resume, or bring
    an older one in with import. A collector that stopped before its first
    row left only its materialized inputs: given that file (the same bytes)
    as --inputs, create adopts it as is, every rollout pending.

    --dataset takes a NeMo Gym dataset instead and writes the materialized
    inputs NeMo Gym would: each row num_repeats times in a row, task index per
    dataset row (identical rows share one; a row's own index is kept),
    rollout index per repeat, agent_ref from agent_name where a row has none,
    limit, responses_create_params and num_repeats_add_seed applied.
    prompt_config, skills, agent_map, fan_out, interleave_repeats and
    num_repeats per agent are refused: let NeMo Gym materialize such rows and
    pass its file as --inputs.

    \b
    Example:
      rollout-ledger create results/rollouts.jsonl \\
          --inputs rows.jsonl --config collection.yaml \\
          --global-config servers.yaml
      rollout-ledger create results/rollouts.jsonl \\
          --dataset data/example.jsonl --num-repeats 4 \\
          --config collection.yaml \\
          --global-config servers.yaml
    \f
    Rules: CLI-2.
    """
    import msgspec

    import ledger
    import projections

    if (inputs is None) == (dataset is None):
        raise click.UsageError(
            "give --inputs (materialized rows) or --dataset (a NeMo Gym dataset), "
            "not both"
            if inputs is not None
            else "give --inputs (materialized rows) or --dataset (a NeMo Gym dataset)"
        )
    if num_repeats is not None and dataset is None:
        raise click.UsageError(
            "--num-repeats expands a --dataset; materialized --inputs are "
            "expanded already"
        )
    collection = load_config(config)
    servers = load_global_config(global_configs)
    rows: Path | list[Any] = inputs if inputs is not None else []
    materialized = None
    if dataset is not None:
        expanded = projections.expand_dataset(
            dataset, collection, num_repeats=num_repeats, global_config=servers
        )
        rows, materialized = expanded.rows, expanded.data
        source = source or dataset
    try:
        created = projections.create_run(
            out,
            rows,
            collection,
            servers,
            materialized=materialized,
            source=source,
            max_attempts=max_attempts,
            policy_file=policy,
            journal_mode=journal_mode,
            clock=run_clock(),
            dry_run=dry_run,
        )
    except ledger.RowError as exc:
        if inputs is None or exc.key not in _INDEX_KEYS:
            raise
        raise ledger.RowError(
            f"{exc} (a NeMo Gym dataset, rows without indices, goes in with "
            "--dataset instead of --inputs)",
            key=exc.key,
            path=exc.path,
            line=exc.line,
        ) from None
    if not dry_run:
        note_driving(out, config, global_configs)
    next_command = projections.NextSteps.at(out).run()
    if as_json:
        echo_json(
            msgspec.to_builtins(created) | {"out": str(out), "next": next_command}
        )
        return
    head = "would create a run of" if dry_run else f"created run {created.run_id}:"
    click.echo(
        f"{head} {plural(created.rollouts, 'rollout')} of "
        f"{plural(created.tasks, 'task')}, cap {created.cap}, config "
        f"{created.config_digest[:12]}, journal {created.journal_mode}"
    )
    if dry_run:
        click.echo("dry run: nothing was written")
        return
    click.echo(f"next: {next_command}")


def _plan_lines(plan: Plan) -> list[str]:
    counts = ", ".join(f"{name} {count}" for name, count in plan.counts.items())
    return [
        f"plan: {plan.counts.get('dispatch', 0)} to dispatch, "
        f"{len(plan.rejudge)} to re-judge, "
        f"{len(plan.held)} held",
        f"  counts: {counts}",
    ]


def resume_document(
    found: Resume, *, plan_out: Path | None, dry_run: bool
) -> dict[str, Any]:
    verdict, plan = found.verdict, found.plan
    drift = verdict.drift
    return {
        "dry_run": dry_run,
        "gate": {
            "adopted": verdict.adopted,
            "overridden": verdict.overridden,
            "operational_drift": [] if drift is None else list(drift.operational),
            "semantic_drift": [] if drift is None else list(drift.semantic),
            "warnings": list(verdict.warnings),
        },
        "plan": {
            "dispatch": plan.counts.get("dispatch", 0),
            "rejudge": len(plan.rejudge),
            "held": len(plan.held),
            "counts": plan.counts,
        },
        "output": None if plan_out is None else str(plan_out),
    }


@click.command()
@out_argument
@config_options
@click.option("--source", type=_FILE, help="The dataset the rows came from.")
@click.option(
    "--extend-attempts",
    type=count(0),
    default=0,
    help="Total extra attempts per rollout; recorded only when it grows.",
)
@click.option(
    "--rerun-masked-without-artifact",
    "approvals",
    type=_FILE,
    help="Approvals file: one '{task, rollout, attempt}' or 'T R A' a line.",
)
@click.option(
    "--retry-terminal-timeouts/--no-retry-terminal-timeouts",
    default=None,
    help="Record the policy opt-in to retry timeouts the agent marked final.",
)
@click.option("--allow-unsafe", is_flag=True, help="Proceed across a refusal.")
@click.option("--longest-first", is_flag=True, help="Dispatch longest rollouts first.")
@click.option("--reason", help="Why, recorded with the operator events.")
@click.option("--dry-run", is_flag=True, help="Print the verdict and plan only.")
@output_option(
    "Write the released plan as JSONL for a collector without the API.",
    aliases=("--plan-out",),
)
@json_option
@quiet_option
def resume(
    out: Path,
    config: Path,
    global_configs: tuple[Path, ...],
    source: Path | None,
    extend_attempts: int,
    approvals: Path | None,
    retry_terminal_timeouts: bool | None,
    allow_unsafe: bool,
    longest_first: bool,
    reason: str | None,
    dry_run: bool,
    output: Path | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Replay, check the configuration and release the plan.

    Prints the gate's verdict, then the plan's counts. A refusal names every
    semantic key with its saved and current values (exit 3). -o writes
    the rows to dispatch, then {"rejudge": {...}} lines, for a collector that
    records its outcomes with `rollout-ledger record`. --dry-run writes nothing.
    Rows a collector appended without the ledger (NeMo Gym's own --resume, say)
    refuse it, --dry-run too (exit 3), naming the import that adopts them.

    \b
    Example:
      rollout-ledger resume results/rollouts.jsonl \\
          --config collection.yaml \\
          --global-config servers.yaml -o plan.jsonl
    \f
    Rules: CLI-4, REC-11, REC-15, REC-53..REC-57.
    """
    import projections
    from cli.render.text import verdict_lines

    plan_out = output
    if dry_run and plan_out is not None:
        raise click.UsageError("-o releases a plan; --dry-run writes nothing")
    collection = load_config(config)
    servers = load_global_config(global_configs)
    opened = reader(out) if dry_run else writer(out)
    with working("resuming", quiet=quiet), opened as led:
        found = projections.resume_with_plan_file(
            led,
            collection,
            servers,
            plan_out=plan_out,
            source=source,
            extend_attempts=extend_attempts,
            approvals=approvals,
            retry_terminal_timeouts=retry_terminal_timeouts,
            allow_unsafe=allow_unsafe,
            longest_first=longest_first,
            reason=reason,
            dry_run=dry_run,
            keep_rows=plan_out is not None,  # rows only go to the plan file
        )
    if not dry_run:
        note_driving(out, config, global_configs)
    if as_json:
        echo_json(resume_document(found, plan_out=plan_out, dry_run=dry_run))
        return
    for line in verdict_lines(found.verdict) + _plan_lines(found.plan):
        click.echo(line)
    if plan_out is not None:
        click.echo(f"plan written to {plan_out}")
    if dry_run:
        click.echo("dry run: nothing was written")


_RECORDED = {
    "result_saved": "result",
    "failure_saved": "failure",
    "omission_saved": "omission",
    "judge_outcome_saved": "re-judgment",
}


@click.command()
@out_argument
@click.argument("rows_file", metavar="ROWS.jsonl", type=_FILE)
@dry_run_option
@json_option
def record(out: Path, rows_file: Path, dry_run: bool, as_json: bool) -> None:
    """Record the outcome rows of a plan file's collector.

    Each row names a released attempt of this run (reserved, then recorded)
    or carries _ng_rejudgment: {task, rollout, attempt} of a released
    re-judgment (admitted, then saved). A row that fits neither is refused
    with its line number, and nothing of the file is recorded. Run it again
    after an interruption: rows already recorded are skipped.

    \b
    Example:
      rollout-ledger record results/rollouts.jsonl \\
          outcomes.jsonl
    \f
    Rules: CLI-5.
    """
    import projections

    recorded = projections.record_outcomes(
        out, rows_file, clock=run_clock(), dry_run=dry_run
    )
    counts = recorded.counts
    parts = [plural(counts.get(kind, 0), name) for kind, name in _RECORDED.items()]
    skipped = counts.get("already_recorded", 0)
    if as_json:
        events = {k: n for k, n in counts.items() if k != "already_recorded"}
        rows = {"read": recorded.rows, "recorded": recorded.rows - skipped}
        document = {"rows": rows | {"skipped": skipped}, "events": events}
        echo_json(document | {"dry_run": dry_run})
        return
    were = "was" if skipped == 1 else "were"
    click.echo(
        f"{'would record' if dry_run else 'recorded'} "
        f"{plural(recorded.rows - skipped, 'row')}: {', '.join(parts)} "
        f"({plural(counts.get('attempt_reserved', 0), 'attempt')} "
        f"{'to reserve' if dry_run else 'reserved'})"
        + (
            f"; {plural(skipped, 'row')} {were} recorded already, skipped"
            if skipped
            else ""
        )
    )
    if dry_run:
        click.echo("dry run: nothing was recorded")
