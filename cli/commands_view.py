"""Commands that read a run: status, check, history, results, export, head.

Each opens the run read-only and never writes (EV-12), except ``status
--publish``, which takes the lock to rewrite the published files.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cli.common import (
    count,
    echo_json,
    out_argument,
    progress,
    quiet_option,
    reader,
    writer,
)

if TYPE_CHECKING:
    from projections import RunStatus

__all__ = ["check", "export", "head", "history", "report", "results", "status"]

_OUTPUT = click.Path(dir_okay=False, writable=True, path_type=Path)


@contextmanager
def _sink(out: Path | str, path: Path | None) -> Iterator[Any]:
    """``path`` opened to replace it atomically when closed; else binary stdout.

    ``path`` is checked first: never a file of the run, nor in its ledger folder.
    """
    import ledger

    ledger.check_outputs(out, {"-o": path})
    try:
        handle = click.open_file("-" if path is None else str(path), "wb", atomic=True)
    except OSError as exc:  # -o nosuchdir/x, a name too long, no permission
        raise ledger.ConfigError(
            f"cannot write -o {path}: {exc.strerror or exc}", key="output", path=path
        ) from None
    try:
        with handle:
            yield handle
    except OSError as exc:  # the disk filled while writing or renaming
        raise ledger.StorageError(
            f"writing {path or 'stdout'} failed: {exc.strerror or exc}", path=path
        ) from exc


def _held(status: RunStatus) -> list[dict[str, Any]]:
    fields = ("attempt", "reason", "kind", "rule")
    return [
        {"task": h.task, "rollout": h.rollout}
        | {f: getattr(h.decision, f) for f in fields}
        for h in status.held
    ]


@click.command()
@out_argument
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead.")
@click.option("--publish", is_flag=True, help="Take the lock and rewrite the files.")
def status(out: Path, as_json: bool, publish: bool) -> None:
    """Show the run's manifest summary and coverage (CLI-6).

    The coverage of REC-41 as a table, the manifest summary (run id, digests,
    cap and extension, policy, drift and overrides), held rollouts with reasons
    and kinds, pending repairs, and rows waiting to be adopted (appended without
    the ledger, by NeMo Gym's own --resume, say). --publish takes the run lock
    and rewrites the published files from the log.

    \b
    Example:
      rollout-ledger status results/rollouts.jsonl --json
    """
    import projections
    from cli.render import coverage_lines, decision_line, run_lines, run_summary

    with writer(out) if publish else reader(out) as led:
        found = projections.status(led, publish=publish)
    summary = run_summary(found.state)
    cover = found.coverage.to_dict()
    held = _held(found)
    repairs = [
        {"file": r.file, "line": r.line, "what": r.what} for r in found.pending_repairs
    ]
    if as_json:
        echo_json(
            {
                "run": summary,
                "coverage": cover,
                "held": held,
                "pending_repairs": repairs,
                "waiting": [
                    {"file": w.file, "rows": w.rows, "first_line": w.first_line}
                    for w in found.waiting
                ],
            }
        )
        return
    lines = run_lines(summary) + coverage_lines(cover)
    lines += [f"held ({len(held)}):"] if held else []
    lines += ["  " + decision_line(h.task, h.rollout, h.decision) for h in found.held]
    lines += [f"pending repairs ({len(repairs)}):"] if repairs else []
    lines += [f"  {r['file']} line {r['line']}: {r['what']}" for r in repairs]
    lines += [f"waiting to be adopted: {found.adopt}"] if found.adopt else []
    if found.published:
        lines.append("published files rewritten from the log")
    for line in lines:
        click.echo(line)


@click.command()
@out_argument
def check(out: Path) -> None:
    """Exit 0 if the evaluation is complete, else 75 or 76 (CLI-7).

    75: unfinished work, some of it retryable (resume); 76: none of it
    retryable (only held, terminal or exhausted rollouts remain). The message
    counts each unfinished kind and names the command that helps, and rows a
    collector appended without the ledger with the import that adopts them.

    \b
    Example:
      rollout-ledger check results/rollouts.jsonl || echo "not done: $?"
    """
    import projections

    with reader(out) as led:
        cover = projections.check_run(led)
        note = projections.adopt_note(led)
    click.echo(f"complete: all {cover.expected} rollouts are complete or omitted")
    if note is not None:
        click.echo(f"waiting to be adopted: {note}")


@click.command()
@out_argument
@click.option("--task", type=count(0), help="Only this task.")
@click.option("--rollout", type=count(0), help="Only this rollout index.")
@click.option("--kind", help="Only events of this kind (e.g. failure_saved).")
@click.option("--since", type=count(1), help="Only from this seq on.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead.")
def history(
    out: Path,
    task: int | None,
    rollout: int | None,
    kind: str | None,
    since: int | None,
    as_json: bool,
) -> None:
    """Print the audit trail, one line per event (CLI-8).

    Columns: seq, time, actor, kind, key (t<task> r<rollout> a<attempt>) and a
    summary; superseded, duplicate and abandoned entries are marked. With
    --task and --rollout it ends with the rollout's decision and the rule that
    decided.

    \b
    Example:
      rollout-ledger history results/rollouts.jsonl --task 3 --rollout 0
    """
    import msgspec

    import projections
    from cli.render import history_line

    with reader(out) as led:
        found = projections.history(
            led, task=task, rollout=rollout, kind=kind, since=since
        )
    if as_json:
        echo_json(
            {
                "entries": msgspec.to_builtins(found.entries),
                "decision": msgspec.to_builtins(found.decision),
                "why": found.why,
            }
        )
        return
    for entry in found.entries:
        click.echo(history_line(entry))
    if found.decision is not None:
        decision = found.decision
        click.echo(
            f"decision: {decision.value} (attempt {decision.attempt}, "
            f"{decision.reason}) by {found.why}"
        )


@click.command()
@out_argument
@click.option("-o", "--output", type=_OUTPUT, help="Write to FILE, not stdout.")
@click.option("--all", "everything", is_flag=True, help="Add unfinished rollouts.")
@quiet_option
def results(out: Path, output: Path | None, everything: bool, quiet: bool) -> None:
    """Write the selected result of each rollout as JSONL (CLI-12).

    In materialized order, each row as saved plus _ng_decision, with reward
    set to the decided score (a settled zero is marked _ng_settled_zero).
    Superseded attempts, duplicates and retried masked rows never appear.
    --all adds every unfinished rollout with its decision and no reward.

    \b
    Example:
      rollout-ledger results results/rollouts.jsonl -o selected.jsonl
    """
    import msgspec

    import projections

    encode = msgspec.json.Encoder().encode
    with reader(out) as led, _sink(out, output) as sink:
        found = projections.result_rows(led, all=everything)
        written = 0
        with progress(
            found.rows, length=found.count, label="results", quiet=quiet
        ) as bar:
            for row in bar:
                sink.write(encode(row) + b"\n")
                written += 1
    if output is not None:
        click.echo(f"wrote {written} rows to {output}")


@click.command()
@out_argument
@click.option("-o", "--output", type=_OUTPUT, help="Write to FILE, not stdout.")
@click.option(
    "--files",
    "files_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write the run as a file-based run in DIR instead: its files and a "
    "SQLite ledger with the same events and head hash (SC-5).",
)
@quiet_option
def export(
    out: Path | str, output: Path | None, files_dir: Path | None, quiet: bool
) -> None:
    """Write every event as one JSON object a line, for auditors (CLI-13).

    Each line is the envelope (seq, kind, at, actor), the body exactly as
    stored and hashed, and prev_hash and hash in hex, so the chain can be
    checked from the export alone (EV-2). With --files DIR, a run (usually one
    on PostgreSQL) is written back as files: results, sidecar, materialized
    inputs, published files and a SQLite ledger whose head hash is the run's.

    \b
    Example:
      rollout-ledger export results/rollouts.jsonl -o events.jsonl
      rollout-ledger export 'postgresql://me@db:5432/runs?run=eval1' --files copy/
    """
    import msgspec

    import projections

    if files_dir is not None:
        _export_files(out, files_dir, output)
        return

    encode = msgspec.json.Encoder().encode
    with reader(out) as led, _sink(out, output) as sink:
        exported = projections.audit_export(led)
        lines = exported.lines
        with progress(lines, length=exported.count, label="export", quiet=quiet) as bar:
            for line in bar:
                sink.write(encode(line) + b"\n")
    if output is not None:
        click.echo(f"wrote {exported.count} events to {output}")


def _export_files(out: Path | str, folder: Path, output: Path | None) -> None:
    import ledger

    if output is not None:
        raise ledger.ConfigError("give -o FILE or --files DIR, not both")
    copied = ledger.copy_to_files(out, folder)
    click.echo(
        f"wrote {copied.out} and its ledger: {copied.seq} events, head "
        f"{copied.head.hex()}"
    )
    click.echo(f"check it with: rollout-ledger verify {copied.out}")


@click.command()
@out_argument
def head(out: Path) -> None:
    """Print the last seq and the head hash of a run's log (CLI-13).

    Keep this line somewhere safe: deleting the newest events is only
    detectable against an exported head (EV-2).

    \b
    Example:
      rollout-ledger head results/rollouts.jsonl
    """
    with reader(out) as led:
        seq, digest = led.head()
    click.echo(f"{seq} {digest.hex()}")


@click.command()
@out_argument
@click.option("-o", "--output", type=_OUTPUT, help="Write to FILE, not stdout.")
@click.option("--no-verify", is_flag=True, help="Skip the integrity check.")
@click.option(
    "--serve",
    "port",
    type=click.IntRange(0, 65535),
    help="Serve the page on 127.0.0.1:PORT instead, made afresh on each load.",
)
def report(
    out: Path | str, output: Path | None, no_verify: bool, port: int | None
) -> None:
    """Write the run as one HTML page that opens from disk, offline.

    The page shows how many rollouts are complete and the command that moves
    the rest, the reward figures, where every rollout stands (each decision in
    a sentence), a grid of tasks by rollouts whose squares open each rollout's
    attempts, failures by kind and side over time, held rollouts with the
    approve command, the changes made during the run, and the integrity check
    with the head hash. A large run is shown in bands of tasks. With --serve
    the page is served on this machine only, until interrupted.

    \b
    Example:
      rollout-ledger report results/rollouts.jsonl -o report.html
    """
    from cli.report_html import build_page, serve_report

    if port is not None:
        if output is not None:
            raise click.UsageError("give -o FILE or --serve PORT, not both")
        serve_report(lambda: build_page(out, verify=not no_verify)[0], port)
        return
    with _sink(out, output) as sink:
        page, expected = build_page(out, verify=not no_verify)
        sink.write(page.encode())
    if output is not None:
        click.echo(f"wrote the report of {expected} rollouts to {output}")
