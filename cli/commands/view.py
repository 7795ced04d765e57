"""Commands that show a run: status, check, history.

Each opens the run read-only and never writes (EV-12), except ``status
--publish``, which takes the lock to rewrite the published files.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cli.common import (
    count,
    echo_json,
    json_option,
    out_argument,
    quiet_option,
    reader,
    renamed_option,
    writer,
)
from cli.render.figures import (
    counting_options,
    metrics_json,
    metrics_text,
)
from cli.render.progress import working

if TYPE_CHECKING:
    from projections import RunStatus

__all__ = ["check", "history", "status"]

_OUTPUT = click.Path(dir_okay=False, writable=True, path_type=Path)


def _held(status: RunStatus) -> list[dict[str, Any]]:
    fields = ("attempt", "reason", "kind", "rule")
    return [
        {"task": h.task, "rollout": h.rollout}
        | {f: getattr(h.decision, f) for f in fields}
        for h in status.held
    ]


def status_document(
    found: RunStatus,
    *,
    publish: bool = False,
    dry_run: bool = False,
    metrics: bool = True,
) -> dict[str, Any]:
    """``status --json`` (docs/json.md): built here only, text and JSON alike.

    ``metrics`` false leaves the reward figures out (the text says them in
    its own words; their JSON lists every task, a second at a million).
    """
    from cli.render.text import run_summary

    published = {"dry_run": dry_run, "files": list(found.stale)}

    return {
        "run": run_summary(found.state),
        "coverage": found.coverage.to_dict(),
        "held": _held(found),
        "pending_repairs": [
            {"file": r.file, "line": r.line, "what": r.what}
            for r in found.pending_repairs
        ],
        "waiting": [
            {"file": w.file, "rows": w.rows, "first_line": w.first_line}
            for w in found.waiting
        ],
        "publish": published if publish else None,
        "metrics": metrics_json(found) if metrics else None,
    }


@click.command()
@out_argument
@json_option
@click.option("--publish", is_flag=True, help="Take the lock and rewrite the files.")
@counting_options
@click.option(
    "--dry-run",
    is_flag=True,
    help="With --publish: name the files it would rewrite; write nothing.",
)
@quiet_option
def status(
    out: Path,
    as_json: bool,
    publish: bool,
    failures_as_zero: bool,
    missing_as_zero: bool,
    dry_run: bool,
    quiet: bool,
) -> None:
    """Show the run's manifest summary and coverage.

    First how many rollouts are complete and the reward figures of the
    selected results (mean, standard error, 95% interval, pass@k); then the
    coverage (each decision and its reasons) as a table, the manifest
    summary (run id, digests, cap and extension, policy, drift and overrides),
    held rollouts with reasons and kinds, pending repairs, and rows waiting to
    be adopted (appended without the ledger, by NeMo Gym's own --resume, say).
    --publish takes the run lock and rewrites the published files from the
    log. Each decision, reason and term is explained by rollout-ledger explain
    TERM.

    \b
    Example:
      rollout-ledger status results/rollouts.jsonl --json
    \f
    Rules: CLI-6, REC-41.
    """
    import projections
    from cli.commands.coordinating import workers_document, workers_lines
    from cli.render.text import (
        choices_document,
        coverage_lines,
        held_lines,
        run_lines,
    )

    if dry_run and not publish:
        raise click.UsageError("--dry-run previews --publish; give both")
    opened = writer(out) if publish and not dry_run else reader(out)
    with working("reading the run", quiet=quiet), opened as led:
        found = projections.status(
            led,
            publish=publish,
            dry_run=dry_run,
            count_failure_classes_as_zero=failures_as_zero,
            count_missing_rollouts_as_zero=missing_as_zero,
        )
        choices = projections.held_choices(
            projections.NextSteps.of(led, found.state),
            (
                (
                    h.task,
                    h.rollout,
                    h.decision.attempt,
                    h.decision.reason,
                    h.decision.kind,
                )
                for h in found.held
            ),
        )
        workers = workers_document(led)  # a run on PostgreSQL (issue 29)
        # what came after the last verify's proof, checked (issue 30)
        since, integrity = projections.integrity(led, out=out, quick=True)
    for row in found.changed:  # on stderr, --json too
        click.echo(
            f"rollout-ledger: warning: {row}; run `rollout-ledger verify`", err=True
        )
    document = status_document(found, publish=publish, dry_run=dry_run, metrics=as_json)
    if as_json:
        verified = None
        if since is not None:
            verified = {
                "up_to": since.proved_up_to,
                "seq": since.seq,
                "findings": [str(f) for f in since.findings],
            }
        echo_json(
            document
            | choices_document(choices)
            | {"workers": workers, "verified": verified, "integrity": integrity}
        )
        return
    repairs = document["pending_repairs"]
    lines = metrics_text(found)
    lines += [*run_lines(document["run"]), f"  integrity: {integrity}"]
    if since is not None and since.findings:
        lines += [f"  does not hold: {f}" for f in since.findings]
        lines += [
            f"  run `rollout-ledger verify {shlex.quote(str(out))}` for every check"
        ]
    lines += coverage_lines(document["coverage"])
    lines += held_lines(found, choices)
    lines += [f"pending repairs ({len(repairs)}):"] if repairs else []
    lines += [f"  {r['file']} line {r['line']}: {r['what']}" for r in repairs]
    lines += [f"waiting to be adopted: {found.adopt}"] if found.adopt else []
    lines += workers_lines(workers)
    if found.published:
        lines.append("published files rewritten from the log")
    elif dry_run:
        stale = ", ".join(found.stale)
        lines.append(
            f"would rewrite from the log: {stale}; dry run: nothing was written"
            if stale
            else "the published files match the log; nothing to rewrite"
        )
    for line in lines:
        click.echo(line)


@click.command()
@out_argument
@json_option
@counting_options
@quiet_option
def check(
    out: Path,
    as_json: bool,
    failures_as_zero: bool,
    missing_as_zero: bool,
    quiet: bool,
) -> None:
    """Exit 0 if the evaluation is complete, else 75 or 76.

    75: unfinished work, some of it retryable (resume); 76: none of it
    retryable (only held, terminal or exhausted rollouts remain). The message
    counts each unfinished kind and names the command that helps, and rows a
    collector appended without the ledger with the import that adopts them.

    With --count-failure-classes-as-zero or --count-missing-rollouts-as-zero,
    check first prints the reward figures counted so, as status does. The
    verdict and the exit code stay the same: a rollout counted as zero in the
    figures is still unfinished.

    \b
    Example:
      rollout-ledger check results/rollouts.jsonl \\
          || echo "not done: $?"
    \f
    Rules: CLI-7, REC-40.
    """
    import ledger
    import projections

    refusal: ledger.RecoveryIncomplete | None = None
    with working("reading the run", quiet=quiet), reader(out) as led:
        # Only when asked: the figures are status's, counted as it counts them.
        found = (
            projections.status(
                led,
                count_failure_classes_as_zero=failures_as_zero,
                count_missing_rollouts_as_zero=missing_as_zero,
            )
            if failures_as_zero or missing_as_zero
            else None
        )
        try:
            expected = projections.check_run(led).expected
        except ledger.RecoveryIncomplete as exc:
            refusal = exc
        note = None if refusal else projections.adopt_note(led)
    metrics = None if found is None else metrics_json(found)
    for line in [] if found is None or as_json else metrics_text(found):
        click.echo(line)  # first, as status says them
    if refusal is not None:
        if as_json:  # the document, then the same exit code (75 or 76)
            counts = refusal.counts
            echo_json(
                _check_document(
                    False, refusal.exit_code, str(refusal), counts, metrics=metrics
                )
            )
        raise refusal
    every = "the 1 rollout is" if expected == 1 else f"all {expected} rollouts are"
    if as_json:
        message = f"{every} complete or omitted"
        document = _check_document(True, 0, message, {}, waiting=note, metrics=metrics)
        echo_json(document)
        return
    click.echo(f"complete: {every} complete or omitted")
    if note is not None:
        click.echo(f"waiting to be adopted: {note}")


def _check_document(
    complete: bool,
    exit_code: int,
    message: str,
    counts: dict[str, int],
    *,
    waiting: str | None = None,
    metrics: dict[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "complete": complete,
        "exit_code": exit_code,
        "retryable": exit_code == 75,
        "message": message,
        "unfinished": counts,
        "waiting": waiting,
        "metrics": metrics,
    }


@click.command()
@out_argument
@click.option("--task", type=count(0), help="Only this task.")
@click.option("--rollout", type=count(0), help="Only this rollout index.")
@renamed_option(
    "--event",
    "event",
    old=("--kind",),
    metavar="KIND",
    help="Only events of this kind (e.g. failure_saved).",
)
@click.option("--since", type=count(1), help="Only from this seq on.")
@click.option("--tail", type=count(1), metavar="N", help="Only the last N entries.")
@click.option("--limit", type=count(1), metavar="N", help="Only the first N entries.")
@json_option
@quiet_option
def history(
    out: Path,
    task: int | None,
    rollout: int | None,
    event: str | None,
    since: int | None,
    tail: int | None,
    limit: int | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Print the audit trail, one line per event.

    Columns: seq, time, actor, kind, key (t<task> r<rollout> a<attempt>) and a
    summary, under a header; superseded, duplicate and abandoned entries are
    marked. With --task and --rollout it ends with the rollout's decision and
    the rule that decided, in words (--json keeps the rule's id). --tail N or
    --limit N shows the last or first N entries; on a terminal the trail opens
    in a pager.

    \b
    Example:
      rollout-ledger history results/rollouts.jsonl \\
          --task 3 --rollout 0
    \f
    Rules: CLI-8.
    """
    import msgspec

    import projections
    from cli.render.text import history_header, history_line

    if tail is not None and limit is not None:
        raise click.UsageError("give --tail N or --limit N, not both")
    with working("reading the run", quiet=quiet), reader(out) as led:
        found = projections.history(
            led, task=task, rollout=rollout, kind=event, since=since
        )
    entries = found.entries
    if tail is not None:
        entries = entries[-tail:]
    elif limit is not None:
        entries = entries[:limit]
    if as_json:
        echo_json(
            {
                "entries": msgspec.to_builtins(entries),
                "decision": msgspec.to_builtins(found.decision),
                "why": found.why,
            }
        )
        return
    lines = [history_header(entries[0])] if entries else []
    lines += [history_line(entry) for entry in entries]
    if len(entries) < len(found.entries):
        lines.append(f"({len(entries)} of {len(found.entries)} entries shown)")
    if found.decision is not None:
        # In words; the rule's id is in --json only.
        lines.append(f"decision: {found.words}")
        lines.append(f"rule: {projections.describe_rule(found.decision.rule)}")
    _page(lines)


def _page(lines: list[str]) -> None:
    """``lines`` on stdout: through a pager when stdout is a terminal."""
    if sys.stdout.isatty():
        click.echo_via_pager("\n".join(lines) + "\n")
        return
    for line in lines:
        click.echo(line)
