"""``rollout-ledger import``: bring in a run saved without a ledger (CLI-3).

A thin shell over ``projections.import_run`` (REC-70..REC-74) or, with
``--from``, ``projections.import_into_store`` (SC-2): parse the options, call
one of them, render what it returns. ``cli.main`` registers it as
``import`` (a Python keyword, hence the function's name).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cli.common import (
    count,
    echo_json,
    json_option,
    option_file,
    out_argument,
    quiet_option,
    run_clock,
)
from cli.render.text import plural

if TYPE_CHECKING:
    from projections import ImportResult, StoreImport

__all__ = ["import_"]


@click.command("import")
@out_argument
@click.option(
    "--inputs",
    type=option_file,
    help="The run's materialized rows, each with _ng_task_index and "
    "_ng_rollout_index; required when <stem>_materialized_inputs.jsonl is "
    "missing, and copied there.",
)
@click.option(
    "--skip-rejected",
    is_flag=True,
    help="Import the readable rows and record the rejected lines, instead of "
    "refusing the whole import.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print what would be recorded and the coverage that would result; "
    "write nothing.",
)
@click.option(
    "--from",
    "source",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Load this file-based run (OUT of its folder) into the run on "
    "PostgreSQL that OUT names; a run saved without a ledger is "
    "imported beside its files first.",
)
@click.option(
    "--jobs",
    metavar="N",
    type=count(1),
    help="Processes that read a large file's rows, 1 or more (default: the "
    "CPUs this process may use). The events are the same whatever the number.",
)
@json_option
@quiet_option
def import_(
    out: Path | str,
    inputs: str | None,
    skip_rejected: bool,
    dry_run: bool,
    source: Path | None,
    jobs: int | None,
    as_json: bool,
    quiet: bool,
) -> None:
    """Import a run an older collector saved without a ledger.

    Reads OUT's materialized inputs, its failures sidecar and OUT itself, and
    writes OUT's ledger folder. A line that is not a row of this run refuses
    the import (listed with its file and line) unless --skip-rejected is given.
    A NeMo Gym <stem>_manifest.json beside the run keeps its run id and
    digest. The collector files are never modified. The first resume of an
    imported run needs --allow-unsafe (its configuration was never recorded).

    On a run that has a ledger already, import adopts the rows a collector
    appended to OUT or its sidecar without the ledger (NeMo Gym's own
    --resume, say): exactly the rows after the last recorded one, each
    recorded once; with nothing new it records nothing. A recorded row that
    was edited refuses the import.

    With --from, OUT is a run URL (postgresql://USER@HOST:PORT/DB?run=NAME)
    and the file-based run at --from is loaded into it: the same events and
    hashes, each row stored with its event.

    \b
    Example:
      rollout-ledger import results/rollouts.jsonl \\
          --inputs rows.jsonl --dry-run
      rollout-ledger import \\
          'postgresql://me@db:5432/runs?run=eval1' \\
          --from results/rollouts.jsonl
    \f
    Rules: CLI-3, REC-70..REC-74, REC-57, REC-86, SC-2, SC-5.
    """
    import ledger
    import projections

    if jobs is None:
        jobs = ledger.cpus()
    if source is not None:
        if not isinstance(out, str):  # OUT is a run URL exactly when a string
            raise ledger.ConfigError(
                f"--from loads a run into PostgreSQL: OUT must be a run URL "
                f"(postgresql://USER@HOST:PORT/DB?run=NAME), not {out}"
            )
        loaded = projections.import_into_store(
            out,
            source,
            inputs=inputs,
            skip_rejected=skip_rejected,
            dry_run=dry_run,
            clock=run_clock(),
            progress_bar=lambda: _progress_bar(quiet=quiet),
        )
        if as_json:
            echo_json(_store_document(loaded))
        else:
            click.echo(_store_text(loaded))
        return
    if isinstance(out, str):
        raise ledger.ConfigError(
            "a run on PostgreSQL is imported from a file-based one: add --from OUT"
        )
    with _progress_bar(quiet=quiet) as progress:
        result = projections.import_run(
            out,
            inputs=inputs,
            skip_rejected=skip_rejected,
            dry_run=dry_run,
            clock=run_clock(),
            progress=progress,
            jobs=jobs,
        )
    # An imported run's first round needs --allow-unsafe (nothing to compare).
    steps = projections.NextSteps(
        str(out), projections.NextSteps.at(out).noted, unsafe_first_round=True
    )
    retryable = any(result.coverage.decisions.get(v) for v in _RETRYABLE)
    next_command = steps.run() if retryable and not dry_run else None
    if as_json:
        echo_json(_document(result) | {"next": next_command})
    else:
        click.echo(_text(result))
        if next_command is not None:
            click.echo(
                f"next: {next_command} (the first round of an imported run needs "
                "--allow-unsafe: the run has no configuration to compare yours with)"
            )


_RETRYABLE = ("pending", "retry", "rejudge")


def _store_text(loaded: StoreImport) -> str:
    lines = [] if loaded.imported is None else [_text(loaded.imported)]
    if loaded.head is None:  # a dry run of an import: nothing to load yet
        lines.append(f"would then load it into {loaded.url}")
    elif loaded.dry_run:
        lines.append(
            f"would load {plural(loaded.seq or 0, 'event')} (head "
            f"{loaded.head.hex()}) into {loaded.url}"
        )
    else:
        lines.append(
            f"loaded {loaded.source} into {loaded.url}: "
            f"{plural(loaded.seq or 0, 'event')}, head {loaded.head.hex()}"
        )
    return "\n".join(lines)


def _store_document(loaded: StoreImport) -> dict[str, Any]:
    """``import --from --json``: the import beside the files (if any), the load."""
    from ledger import redact_secrets

    imported = None if loaded.imported is None else _document(loaded.imported)
    return {
        "source": str(loaded.source),
        "url": redact_secrets(loaded.url),  # ID-13: never a password
        "dry_run": loaded.dry_run,
        "imported": imported,
        "seq": loaded.seq,
        "head": None if loaded.head is None else loaded.head.hex(),
    }


@contextmanager
def _progress_bar(*, quiet: bool) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar on stderr when it is a terminal (cli.md), else nothing."""
    if quiet or not sys.stderr.isatty():
        yield None
        return
    with click.progressbar(length=1, label="importing", file=sys.stderr) as bar:

        def advance(done: int, total: int) -> None:
            bar.length = max(total, 1)
            bar.update(done - bar.pos)

        yield advance


def _kinds(result: ImportResult) -> dict[str, int]:
    return result.report.kinds


def _document(result: ImportResult) -> dict[str, Any]:
    report = result.report
    return {
        "out": report.out,
        "ledger": report.ledger_dir,
        "dry_run": report.dry_run,
        "run_id": report.run_id,
        "inputs_copied": report.inputs_copied,
        "rows": {
            "read": report.rows_read,
            "imported": report.rows_imported,
            "rejected": report.rows_rejected,
        },
        "rejections": [
            {"file": r.file, "line": r.line, "reason": r.reason}
            for r in report.rejections
        ],
        "sources": [
            {"file": s.file, "size": s.size, "sha256": s.sha256, "lines": s.lines}
            for s in report.sources
        ],
        "foreign_manifest": report.foreign_manifest is not None,
        "events": _kinds(result),
        "coverage": result.coverage.to_dict(),
        "adopting": report.adopting,
        "adopted": [
            {"file": a.file, "rows": a.rows, "first_line": a.first_line}
            for a in report.adopted
        ],
    }


def _adopted_text(result: ImportResult) -> list[str]:
    """An import of a run that has a ledger: the rows it adopted (REC-86)."""
    report = result.report
    count = report.rows_imported
    rows = "row" if count == 1 else "rows"
    if not count:
        return [
            f"{report.out} has a ledger and no rows were appended to it or its "
            "sidecar since its last recorded row: nothing to adopt, nothing recorded"
        ]
    where = "; ".join(
        f"{a.file}: {a.rows} from line {a.first_line}" for a in report.adopted
    )
    if report.dry_run:
        head = f"Dry run, nothing written: would adopt {count} {rows}"
    else:
        head = f"adopted {count} {rows}"
    return [
        f"{head} appended to {report.out} or its sidecar without the ledger "
        f"({where}), one event each (run {report.run_id})",
        "events: " + ", ".join(f"{k} {n}" for k, n in _kinds(result).items()),
    ]


def _text(result: ImportResult) -> str:
    report, cover = result.report, result.coverage.to_dict()
    if report.adopting:
        return "\n".join(_adopted_text(result) + _coverage_lines(cover))
    verb = "would record" if report.dry_run else "recorded"
    lines = [
        f"{'Dry run, nothing written: ' if report.dry_run else ''}import of "
        f"{report.out} {verb} {plural(len(report.events), 'event')} in "
        f"{report.ledger_dir} "
        f"(run {report.run_id})",
        "events: " + ", ".join(f"{k} {n}" for k, n in _kinds(result).items()),
        f"rows read: {report.rows_read}, imported: {report.rows_imported}, "
        f"rejected: {report.rows_rejected}",
    ]
    if report.inputs_copied:
        copied = "would be copied" if report.dry_run else "copied"
        lines.append(f"--inputs {copied} to the run's materialized inputs")
    lines.extend(f"  {r.file} line {r.line}: {r.reason}" for r in report.rejections)
    return "\n".join(lines + _coverage_lines(cover))


def _coverage_lines(cover: dict[str, Any]) -> list[str]:
    """The coverage in ``status``'s words (one word for each thing, issue 28)."""
    from cli.render.text import coverage_lines

    return coverage_lines(cover)
