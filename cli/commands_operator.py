"""Operator actions (CLI-10): approve, reset-budget, extend-attempts, policy.

Each runs under the run lock, appends its event as ``operator:<login>`` with
the head it saw (a concurrent append is a ``ConcurrencyConflict``, exit 4),
republishes, and prints what changed in the plan.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cli.common import count, operator_actor, out_argument, reader, writer

if TYPE_CHECKING:
    from projections import Approval, OperatorResult

__all__ = ["approve", "extend_attempts", "policy", "reset_budget"]

_reason_option = click.option(
    "--reason", required=True, help="Why, recorded in the event (who is recorded too)."
)


def _show(result: OperatorResult) -> None:
    """Print what changed in the plan."""
    from cli.render import plan_change_lines

    for line in plan_change_lines(result.before, result.after):
        click.echo(line)


def _one_attempt(
    task: int | None, rollout: int | None, attempt: int | None
) -> tuple[int, int, int] | None:
    if task is None or rollout is None or attempt is None:
        return None  # --all-held
    return task, rollout, attempt


def _approval_lines(approval: Approval, *, dry_run: bool) -> list[str]:
    from cli.render import decision_line

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


@click.command()
@out_argument
@click.option("--task", type=count(0), help="The rollout's task.")
@click.option("--rollout", type=count(0), help="The rollout index.")
@click.option("--attempt", type=count(0), help="The attempt to reopen.")
@click.option("--all-held", is_flag=True, help="Every held rollout (with filters).")
@click.option("--reason-held", help="Only held rollouts with this reason.")
@click.option("--kind", help="Only held rollouts with this failure kind.")
@_reason_option
@click.option("--dry-run", is_flag=True, help="List the attempts; record nothing.")
def approve(
    out: Path,
    task: int | None,
    rollout: int | None,
    attempt: int | None,
    all_held: bool,
    reason_held: str | None,
    kind: str | None,
    reason: str,
    dry_run: bool,
) -> None:
    """Approve running held attempts again.

    Name one attempt (--task --rollout --attempt), or every held rollout with
    --all-held, narrowed by --reason-held (e.g. kept_answer) and --kind.
    An approval reopens exactly the attempt it names; --dry-run lists them.
    A named attempt must be the held attempt of a held rollout: anything else
    is refused (exit 3) with what is held, and nothing is recorded.

    \b
    Example:
      rollout-ledger approve results/rollouts.jsonl --all-held \\
          --reason-held masked_without_artifact --reason "artifacts lost" --dry-run
    \f
    Rules: CLI-10, REC-25, REC-26.
    """
    import projections

    named = (task, rollout, attempt)
    if (all_held and named != (None, None, None)) or (not all_held and None in named):
        raise click.UsageError(
            "name one attempt (--task, --rollout and --attempt) or use --all-held"
        )
    if not all_held and (reason_held or kind):
        raise click.UsageError("--reason-held and --kind filter --all-held")
    with reader(out) if dry_run else writer(out) as led:
        approval = projections.approve_held(
            led,
            attempt=_one_attempt(task, rollout, attempt),
            reason_held=reason_held,
            kind=kind,
            reason=reason,
            actor=operator_actor(),
            dry_run=dry_run,
        )
    for line in _approval_lines(approval, dry_run=dry_run):
        click.echo(line)
    if not approval.chosen:
        click.echo("no held rollout matches; nothing recorded")
    elif approval.result is not None:
        _show(approval.result)


@click.command("reset-budget")
@out_argument
@_reason_option
def reset_budget(out: Path, reason: str) -> None:
    """Reset every rollout's failure budget.

    Outcomes recorded so far no longer count toward any cap; outcomes, attempt
    numbers and rollout ids are unchanged. The ledger must verify first (chain
    and files); the reset is also a line of failure_budget.log.

    \b
    Example:
      rollout-ledger reset-budget results/rollouts.jsonl --reason "judge outage"
    \f
    Rules: CLI-10, REC-16, REC-17.
    """
    import projections

    with writer(out) as led:
        result = projections.reset_budget(led, reason=reason, actor=operator_actor())
    reset = result.state.budget_resets[-1]  # the one just recorded
    click.echo(
        f"reset: sidecar lines < {reset.excluded_lines} and seq <= {reset.before_seq}"
    )
    _show(result)


@click.command("extend-attempts")
@out_argument
@click.argument("total", metavar="N", type=count(1))
@_reason_option
def extend_attempts(out: Path, total: int, reason: str) -> None:
    """Raise every rollout's attempt cap.

    The cap becomes the saved cap + N.

    N is the total extension, not an increment: it is recorded only when it
    exceeds the total in force, so repeating the command (a Slurm requeue)
    never grows the cap again.

    \b
    Example:
      rollout-ledger extend-attempts results/rollouts.jsonl 2 --reason "flaky judge"
    \f
    Rules: CLI-10, REC-11.
    """
    import projections

    with writer(out) as led:
        result = projections.extend_attempts(
            led, total, reason=reason, actor=operator_actor()
        )
    state = result.state
    if not result.recorded:  # REC-11: only a larger total is recorded
        click.echo(
            f"the extension in force is {state.extension} (cap {state.cap}); "
            "nothing recorded"
        )
        return
    click.echo(f"cap {result.previous.cap} -> {state.cap}")
    _show(result)


def _setting(text: str) -> tuple[str, Any]:
    import msgspec

    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise click.BadParameter(f"{text!r} is not KEY=VALUE", param_hint="--set")
    try:
        return key, msgspec.json.decode(raw)  # REC-60: JSON, else a string
    except msgspec.DecodeError:
        return key, raw
    except RecursionError:
        raise click.BadParameter(
            f"the value of {key} nests too deeply", param_hint="--set"
        ) from None


@click.command()
@out_argument
@click.option(
    "--set",
    "settings",
    multiple=True,
    required=True,
    metavar="KEY=VALUE",
    help="A policy setting; VALUE is JSON, else a string; dotted keys reach "
    "into mappings.",
)
@_reason_option
def policy(out: Path, settings: tuple[str, ...], reason: str) -> None:
    """Change the run's recovery policy (recorded in its log).

    The change applies to every outcome on replay. Settings: fault_share,
    side_overrides.<kind> (evaluation or model; null removes), regrade_kinds,
    retry_terminal_timeouts, retry_invalid_judge_responses, max_free_attempts.
    A kind is a registered failure kind or a failure class the run's rows
    carry (infrastructure_error, for example): one change settles every row
    of that class. retry_invalid_judge_responses (default false) judges again
    a saved result whose judge flagged its verdict invalid
    (invalid_judge_response), instead of keeping its placeholder score.

    \b
    Example:
      rollout-ledger policy results/rollouts.jsonl \\
          --set side_overrides.session_lost=model --reason "agent bug 123"
    \f
    Rules: CLI-10, REC-60, REC-80, REC-82.
    """
    import msgspec

    import projections

    wanted = dict(_setting(text) for text in settings)
    with writer(out) as led:
        changes, result = projections.set_policy(
            led, wanted, reason=reason, actor=operator_actor()
        )
    if not changes:
        click.echo("the policy already has these values; nothing recorded")
        return
    for key, change in sorted(changes.items()):
        old, new = (msgspec.json.encode(v).decode() for v in (change.old, change.new))
        click.echo(f"policy {key}: {old} -> {new}")
    _show(result)
