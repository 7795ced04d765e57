"""Operator actions (CLI-10): approve, reset-budget, extend-attempts, policy.

Each runs under the run lock, appends its event as ``operator:<login>`` with
the head it saw (a concurrent append is a ``ConcurrencyConflict``, exit 4),
republishes, and prints what changed in the plan. With ``--dry-run`` each
opens the run read-only and prints what it would record and the plan it would
make; with ``--json`` one document (docs/json.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cli.common import (
    count,
    dropped_items,
    dry_run_option,
    echo_json,
    json_option,
    operator_actor,
    out_argument,
    policy_items,
    policy_setting,
    reader,
    renamed_option,
    writer,
)

if TYPE_CHECKING:
    from projections import Approval, OperatorResult

__all__ = ["approve", "extend_attempts", "policy", "reset_budget"]

_reason_option = click.option(
    "--reason", required=True, help="Why, recorded in the event (who is recorded too)."
)


def _show(result: OperatorResult) -> None:
    """Print what changed in the plan (or would, in a dry run)."""
    from cli.render.text import plan_change_lines

    lines = plan_change_lines(result.before, result.after)
    if result.dry_run:
        lines = [f"would make {lines[0]}", *lines[1:]]
        lines.append("dry run: nothing was recorded")
    for line in lines:
        click.echo(line)


def _document(result: OperatorResult | None, **fields: Any) -> dict[str, Any]:
    """An operator action's ``--json`` document: ``fields``, then the plan's change."""
    from cli.render.text import plan_change_document

    change = (
        {"rollouts": [], "decisions": {}}
        if result is None
        else plan_change_document(result.before, result.after)
    )
    recorded = result is not None and bool(result.recorded) and not result.dry_run
    return {**fields, "recorded": recorded, "plan_change": change}


def _session(out: Path | str, dry_run: bool) -> Any:
    """The run read-only for a dry run, else under its lock for writing."""
    return reader(out) if dry_run else writer(out)


def _one_attempt(
    task: int | None, rollout: int | None, attempt: int | None
) -> tuple[int, int, int] | None:
    if task is None or rollout is None or attempt is None:
        return None  # --all-held
    return task, rollout, attempt


def _approval_lines(approval: Approval, *, dry_run: bool) -> list[str]:
    from cli.render.text import decision_line

    verb = "would approve " if dry_run else "approve "
    return [
        verb
        + (
            decision_line(c.task, c.rollout, c.held)
            if c.held is not None
            else f"task {c.task} rollout {c.rollout} attempt {c.attempt}"
        )
        for c in approval.chosen
    ]


def _approval_document(approval: Approval, *, dry_run: bool) -> dict[str, Any]:
    from cli.render.text import decision_document

    chosen = [
        {"task": c.task, "rollout": c.rollout, "attempt": c.attempt}
        | {"held": None if c.held is None else decision_document(c.held)}
        for c in approval.chosen
    ]
    return _document(approval.result, dry_run=dry_run, approvals=chosen)


@click.command()
@out_argument
@click.option("--task", type=count(0), help="The rollout's task.")
@click.option("--rollout", type=count(0), help="The rollout index.")
@click.option("--attempt", type=count(0), help="The attempt to reopen.")
@click.option("--all-held", is_flag=True, help="Every held rollout (with filters).")
@renamed_option(
    "--held-because",
    "held_because",
    old=("--reason-held",),
    metavar="REASON",
    help="Only rollouts held for this reason (e.g. kept_answer).",
)
@renamed_option(
    "--failure-kind",
    "failure_kind",
    old=("--kind",),
    metavar="KIND",
    help="Only held rollouts whose failure is of this kind (e.g. session_lost).",
)
@_reason_option
@click.option("--dry-run", is_flag=True, help="List the attempts; record nothing.")
@json_option
def approve(
    out: Path,
    task: int | None,
    rollout: int | None,
    attempt: int | None,
    all_held: bool,
    held_because: str | None,
    failure_kind: str | None,
    reason: str,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Approve running held attempts again.

    Name one attempt (--task --rollout --attempt), or every held rollout with
    --all-held, narrowed by --held-because and --failure-kind. An approval
    reopens exactly the attempt it names; --dry-run lists them. A named
    attempt must be the held attempt of a held rollout: anything else is
    refused (exit 3) with what is held, and nothing is recorded.

    \b
    Example:
      rollout-ledger approve results/rollouts.jsonl \\
          --all-held --reason "artifacts lost" \\
          --held-because masked_without_artifact --dry-run
    \f
    Rules: CLI-10, REC-25, REC-26.
    """
    import projections

    named = (task, rollout, attempt)
    if (all_held and named != (None, None, None)) or (not all_held and None in named):
        raise click.UsageError(
            "name one attempt (--task, --rollout and --attempt) or use --all-held"
        )
    if not all_held and (held_because or failure_kind):
        raise click.UsageError("--held-because and --failure-kind narrow --all-held")
    with _session(out, dry_run) as led:
        approval = projections.approve_held(
            led,
            attempt=_one_attempt(task, rollout, attempt),
            reason_held=held_because,
            kind=failure_kind,
            reason=reason,
            actor=operator_actor(),
            dry_run=dry_run,
        )
    if as_json:
        echo_json(_approval_document(approval, dry_run=dry_run))
        return
    for line in _approval_lines(approval, dry_run=dry_run):
        click.echo(line)
    if not approval.chosen:
        click.echo("no held rollout matches; nothing recorded")
    elif approval.result is not None and not dry_run:
        _show(approval.result)


@click.command("reset-budget")
@out_argument
@_reason_option
@dry_run_option
@json_option
def reset_budget(out: Path, reason: str, dry_run: bool, as_json: bool) -> None:
    """Reset every rollout's failure budget.

    Outcomes recorded so far no longer count toward any cap; outcomes, attempt
    numbers and rollout ids are unchanged. The ledger must verify first (chain
    and files); the reset is also a line of failure_budget.log.

    \b
    Example:
      rollout-ledger reset-budget results/rollouts.jsonl \\
          --reason "judge outage"
    \f
    Rules: CLI-10, REC-16, REC-17.
    """
    import projections

    with _session(out, dry_run) as led:
        result = projections.reset_budget(
            led, reason=reason, actor=operator_actor(), dry_run=dry_run
        )
    reset = result.state.budget_resets[-1]  # the one just recorded (or would be)
    if as_json:
        excluded = {"sidecar_lines_before": reset.excluded_lines}
        excluded["seq_through"] = reset.before_seq
        echo_json(_document(result, dry_run=dry_run, excluded=excluded))
        return
    click.echo(
        f"{'would reset' if dry_run else 'reset'}: sidecar lines < "
        f"{reset.excluded_lines} and seq <= {reset.before_seq}"
    )
    _show(result)


@click.command("extend-attempts")
@out_argument
@click.argument("total", metavar="N", type=count(1))
@_reason_option
@dry_run_option
@json_option
def extend_attempts(
    out: Path, total: int, reason: str, dry_run: bool, as_json: bool
) -> None:
    """Raise every rollout's attempt cap.

    The cap becomes the saved cap + N.

    N is the total extension, not an increment: it is recorded only when it
    exceeds the total in force, so repeating the command (a Slurm requeue)
    never grows the cap again.

    \b
    Example:
      rollout-ledger extend-attempts \\
          results/rollouts.jsonl 2 --reason "flaky judge"
    \f
    Rules: CLI-10, REC-11.
    """
    import projections

    with _session(out, dry_run) as led:
        result = projections.extend_attempts(
            led, total, reason=reason, actor=operator_actor(), dry_run=dry_run
        )
    state, previous = result.state, result.previous
    if as_json:
        caps = {"before": previous.cap, "after": state.cap}
        extension = {"before": previous.extension, "after": state.extension}
        echo_json(_document(result, dry_run=dry_run, cap=caps, extension=extension))
        return
    if not result.recorded:  # REC-11: only a larger total is recorded
        click.echo(
            f"the extension in force is {state.extension} (cap {state.cap}); "
            "nothing recorded"
        )
        return
    click.echo(
        f"{'would raise the cap' if dry_run else 'cap'} {previous.cap} -> {state.cap}"
    )
    _show(result)


@click.command()
@out_argument
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    help="Set a policy setting (a list is replaced whole); VALUE is JSON, else "
    "a string; dotted keys reach into mappings.",
)
@click.option(
    "--add",
    "added",
    multiple=True,
    metavar="KEY=VALUE",
    help="Add VALUE to the list setting KEY (regrade_kinds), keeping the rest.",
)
@click.option(
    "--remove",
    "removed",
    multiple=True,
    metavar="KEY=VALUE",
    help="Remove VALUE from the list setting KEY, keeping the rest.",
)
@_reason_option
@dry_run_option
@json_option
def policy(
    out: Path,
    settings: tuple[str, ...],
    added: tuple[str, ...],
    removed: tuple[str, ...],
    reason: str,
    dry_run: bool,
    as_json: bool,
) -> None:
    """Change the run's recovery policy (recorded in its log).

    The change applies to every outcome on replay. Settings: fault_share,
    side_overrides.<kind> (evaluation or model; null removes), regrade_kinds
    (a list: --add and --remove change it item by item; --set replaces it,
    defaults included, and says which it drops), retry_terminal_timeouts,
    retry_invalid_judge_responses, max_free_attempts. A kind is a registered
    failure kind or a failure class the run's rows carry
    (infrastructure_error, for example): one change settles every row of that
    class. retry_invalid_judge_responses (default false) judges again a saved
    result whose judge flagged its verdict invalid (invalid_judge_response),
    instead of keeping its placeholder score. --dry-run names every rollout
    the change would move.

    \b
    Example:
      rollout-ledger policy results/rollouts.jsonl \\
          --add regrade_kinds=infrastructure_error \\
          --reason "judge outage" --dry-run
      rollout-ledger policy results/rollouts.jsonl \\
          --set side_overrides.session_lost=model \\
          --reason "agent bug 123"
    \f
    Rules: CLI-10, REC-60, REC-80, REC-82.
    """
    import msgspec

    import projections

    if not (settings or added or removed):
        raise click.UsageError("give at least one --set, --add or --remove")
    wanted = dict(policy_setting(text, "--set") for text in settings)
    add, remove = policy_items(added, "--add"), policy_items(removed, "--remove")
    with _session(out, dry_run) as led:
        changes, result = projections.set_policy(
            led,
            wanted,
            add=add,
            remove=remove,
            reason=reason,
            actor=operator_actor(),
            dry_run=dry_run,
        )
    dropped = dropped_items(changes, wanted)
    if as_json:
        changed = {k: {"old": c.old, "new": c.new} for k, c in changes.items()}
        document = _document(result, dry_run=dry_run, changes=changed)
        echo_json(document | {"dropped": dropped})
        return
    if not changes:
        click.echo("the policy already has these values; nothing recorded")
        return
    for key, change in sorted(changes.items()):
        old, new = (msgspec.json.encode(v).decode() for v in (change.old, change.new))
        click.echo(f"{'would change ' if dry_run else ''}policy {key}: {old} -> {new}")
    for key, gone in dropped.items():
        new_items = [i for i in wanted[key] if i not in changes[key].old]
        keep = " ".join(f"--add {key}={item}" for item in new_items)
        click.echo(
            f"note: --set {key} replaces the whole list, so it drops "
            f"{', '.join(map(str, gone))}; the plan changes below name every "
            "rollout that moves"
            + (f"; to add to the list instead, use {keep}" if keep else "")
        )
    _show(result)
