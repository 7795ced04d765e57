"""Commands that copy a run's rows or log elsewhere: results, export, head.

Each opens the run read-only and never writes to it (EV-12); an output file is
written through a temporary file that replaces it only when complete.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cli.common import (
    echo_json,
    json_option,
    out_argument,
    output_option,
    progress,
    quiet_option,
    reader,
)
from cli.render.figures import counting_options, keep_collector_metrics
from cli.render.progress import working
from cli.render.text import plural

if TYPE_CHECKING:
    from projections import MeasuredRows

__all__ = ["export", "head", "results"]

_OUTPUT = click.Path(dir_okay=False, writable=True, path_type=Path)


def _written(as_json: bool, output: Path | None, document: dict[str, Any]) -> None:
    """After writing ``output``: ``document`` with ``--json``, else one line."""
    if as_json:
        echo_json(document)
    elif output is not None:
        noun = "row" if "rows" in document else "event"
        click.echo(f"wrote {plural(document[noun + 's'], noun)} to {output}")


def _json_needs_output(as_json: bool, output: Path | None) -> None:
    """The rows go to stdout without -o; a --json summary needs them elsewhere."""
    if as_json and output is None:
        raise click.UsageError(
            "--json prints a summary of what was written: give -o FILE for the rows"
        )


@contextmanager
def _sink(out: Path | str, path: Path | None, option: str = "-o") -> Iterator[Any]:
    """``path`` written through a temporary file that replaces it; else stdout.

    ``path`` is checked first: never a file of the run, nor in its ledger
    folder. It is replaced only when everything was written: after an error
    (a row that changed, a full disk) it is left as it was.
    """
    import ledger

    ledger.check_outputs(out, {option: path})
    if path is None:
        with click.open_file("-", "wb") as stdout:
            yield stdout
        return
    temporary = path.with_name(f".{path.name}.{os.getpid()}.partial")
    try:
        handle = open(temporary, "wb")  # noqa: SIM115  # closed below
    except OSError as exc:  # -o nosuchdir/x, a name too long, no permission
        raise ledger.ConfigError(
            f"cannot write {option} {path}: {exc.strerror or exc}",
            key="output" if option == "-o" else option.lstrip("-"),
            path=path,
        ) from None
    try:
        try:
            with handle:
                yield handle
            os.replace(temporary, path)
        except BaseException:
            with suppress(OSError):
                temporary.unlink()
            raise
    except OSError as exc:  # the disk filled while writing or renaming
        raise ledger.StorageError(
            f"writing {path} failed: {exc.strerror or exc}", path=path
        ) from exc


_FORMATS = ("jsonl", "csv", "parquet")


def _table_options(
    table_format: str, fields: tuple[str, ...], output: Path | None
) -> None:
    """``--format`` and ``--field``'s usage errors, before the run is read."""
    import projections

    if fields and table_format == "jsonl":
        raise click.UsageError(
            "--field chooses the columns of a table: add --format csv or --format "
            "parquet (JSONL writes every field of each row)"
        )
    for name in fields:
        if not name:
            raise click.UsageError("--field needs a field name, e.g. --field id")
        if name in projections.TABLE_COLUMNS:
            raise click.UsageError(
                f"--field {name}: the table already has a {name} column "
                f"({', '.join(projections.TABLE_COLUMNS)})"
            )
    if table_format == "parquet":
        if output is None:
            raise click.UsageError(
                "--format parquet writes a binary file, not text for a terminal or "
                "a pipe: give -o FILE, e.g. -o results.parquet"
            )
        from cli.render.tables import parquet_module

        parquet_module()  # pyarrow is an extra: say so before reading the run


@click.command()
@out_argument
@output_option("Write to FILE, not stdout (-o -: stdout).", path_type=_OUTPUT)
@click.option(
    "--format",
    "table_format",
    type=click.Choice(_FORMATS),
    default="jsonl",
    show_default=True,
    help="jsonl: each row as saved; csv or parquet: a table, one row per rollout "
    "(parquet needs -o FILE and the parquet extra).",
)
@click.option(
    "--field",
    "fields",
    multiple=True,
    metavar="NAME",
    help="With csv or parquet, add a column of each row's field NAME "
    "(repeatable; a dotted path reads inside, e.g. response.usage.total_tokens). "
    "An object, a list or a missing field is empty.",
)
@click.option("--all", "everything", is_flag=True, help="Add unfinished rollouts.")
@click.option(
    "--allow-changed",
    is_flag=True,
    help="Write a row edited since it was recorded as it stands, with a warning.",
)
@click.option(
    "--metrics",
    type=_OUTPUT,
    help="Also write the reward figures to FILE, as NeMo Gym's "
    "aggregate metrics file plus the run's coverage.",
)
@counting_options
@quiet_option
@json_option
def results(
    out: Path,
    output: Path | None,
    table_format: str,
    fields: tuple[str, ...],
    everything: bool,
    allow_changed: bool,
    metrics: Path | None,
    failures_as_zero: bool,
    missing_as_zero: bool,
    quiet: bool,
    as_json: bool,
) -> None:
    """Write the selected result of each rollout, as JSONL or as a table.

    In materialized order, each row as saved plus _ng_decision, with reward
    set to the decided score (a settled zero is marked _ng_settled_zero).
    Superseded attempts, duplicates and retried masked rows never appear.
    --all adds every unfinished rollout with its decision and no reward.
    A row edited since it was recorded stops the output (exit 5, naming its
    file and line) unless --allow-changed.

    --format csv or parquet writes a table instead, one row per rollout
    (the same rollouts, decisions and rewards), with the columns task,
    rollout, attempt, decision, reward, failure_kind, failure_side, agent,
    then one for each --field. An empty cell (null in Parquet) is a value the
    rollout does not have: no reward, no failure, or a field that is missing
    or not a string, number or boolean. CSV has a header line; Parquet is
    typed, is written to -o FILE only, and needs pyarrow, an extra:

    \b
      pip install 'rollout-ledger[parquet]'

    --metrics FILE also writes the figures of the complete rollouts in the
    shape of NeMo Gym's <stem>_aggregate_metrics.json, with the run's reward
    figures and coverage under "rollout_ledger"; the two counting options
    change those figures and are stated beside them.

    \b
    Example:
      rollout-ledger results results/rollouts.jsonl \\
          -o selected.jsonl
      rollout-ledger results results/rollouts.jsonl \\
          --format parquet -o results.parquet \\
          --field response.usage.total_tokens
      rollout-ledger results results/rollouts.jsonl \\
          -o selected.jsonl \\
          --metrics selected_aggregate_metrics.json
    \f
    Rules: CLI-12.
    """
    import msgspec

    import ledger
    import projections

    output = None if output is not None and str(output) == "-" else output
    _table_options(table_format, fields, output)
    _json_needs_output(as_json, output)
    ledger.check_outputs(out, {"-o": output, "--metrics": metrics})
    keep_collector_metrics(out, metrics)
    encode = msgspec.json.Encoder().encode
    with reader(out) as led, _sink(out, output) as sink:
        with working("reading the run", quiet=quiet):
            found = projections.measured_rows(
                led,
                all=everything,
                allow_changed=allow_changed,
                metrics=metrics is not None,
                count_failure_classes_as_zero=failures_as_zero,
                count_missing_rollouts_as_zero=missing_as_zero,
            )
        if table_format == "jsonl":
            written = 0
            with progress(
                found.rows, length=found.count, label="results", quiet=quiet
            ) as bar:
                for row in bar:
                    sink.write(encode(row) + b"\n")
                    written += 1
            columns = None
        else:
            columns = [*projections.TABLE_COLUMNS, *dict.fromkeys(fields)]
            written = _write_table(table_format, sink, found, columns, quiet=quiet)
    if metrics is not None and found.figures is not None:
        with _sink(out, metrics, "--metrics") as sink:
            document = msgspec.json.encode(found.figures.document())
            sink.write(msgspec.json.format(document) + b"\n")
    summary = {
        "output": str(output),
        "format": table_format,
        "columns": columns,
        "rows": written,
        "all": everything,
        "metrics": None if metrics is None else str(metrics),
    }
    _written(as_json, output, summary)
    if metrics is not None and not as_json:  # on stderr when rows went to stdout
        click.echo(f"wrote the reward figures to {metrics}", err=output is None)


def _write_table(
    table_format: str,
    sink: Any,
    found: MeasuredRows,
    columns: list[str],
    *,
    quiet: bool,
) -> int:
    """The table of ``found``'s rollouts, as CSV or Parquet; how many rows."""
    import projections
    from cli.render.tables import write_csv, write_parquet

    fields = columns[len(projections.TABLE_COLUMNS) :]
    records = projections.table_records(found.selected, found.state, fields)
    write = write_csv if table_format == "csv" else write_parquet
    with progress(records, length=found.rollouts, label="results", quiet=quiet) as bar:
        return write(sink, columns, bar)


@click.command()
@out_argument
@output_option("Write to FILE, not stdout.", path_type=_OUTPUT)
@click.option(
    "--files",
    "files_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write the run as a file-based run in DIR instead: its files and a "
    "SQLite ledger with the same events and head hash.",
)
@quiet_option
@json_option
def export(
    out: Path | str,
    output: Path | None,
    files_dir: Path | None,
    quiet: bool,
    as_json: bool,
) -> None:
    """Write every event as one JSON object a line, for auditors.

    Each line is the envelope (seq, kind, at, actor), the body exactly as
    stored and hashed, and prev_hash and hash in hex, so the chain can be
    checked from the export alone. With --files DIR, a run (usually one
    on PostgreSQL) is written back as files: results, sidecar, materialized
    inputs, published files and a SQLite ledger whose head hash is the run's.

    \b
    Example:
      rollout-ledger export results/rollouts.jsonl \\
          -o events.jsonl
      rollout-ledger export \\
          'postgresql://me@db:5432/runs?run=eval1' \\
          --files copy/
    \f
    Rules: CLI-13, EV-2, SC-5.
    """
    import msgspec

    import projections

    if files_dir is not None:
        _export_files(out, files_dir, output, as_json=as_json)
        return
    _json_needs_output(as_json, output)
    encode = msgspec.json.Encoder().encode
    with reader(out) as led, _sink(out, output) as sink:
        exported = projections.audit_export(led)
        lines = exported.lines
        with progress(lines, length=exported.count, label="export", quiet=quiet) as bar:
            for line in bar:
                sink.write(encode(line) + b"\n")
    _written(as_json, output, {"output": str(output), "events": exported.count})


def _export_files(
    out: Path | str, folder: Path, output: Path | None, *, as_json: bool
) -> None:
    import ledger

    if output is not None:
        raise ledger.ConfigError("give -o FILE or --files DIR, not both")
    copied = ledger.copy_to_files(out, folder)
    if as_json:
        document = {"files": str(folder), "out": str(copied.out)}
        echo_json(document | {"seq": copied.seq, "head": copied.head.hex()})
        return
    click.echo(
        f"wrote {copied.out} and its ledger: {plural(copied.seq, 'event')}, head "
        f"{copied.head.hex()}"
    )
    click.echo(f"check it with: rollout-ledger verify {copied.out}")


@click.command()
@out_argument
@json_option
def head(out: Path, as_json: bool) -> None:
    """Print the last seq and the head hash of a run's log.

    Keep this line somewhere safe: deleting the newest events is only
    detectable against an exported head.

    \b
    Example:
      rollout-ledger head results/rollouts.jsonl
    \f
    Rules: CLI-13, EV-2.
    """
    with reader(out) as led:
        seq, digest = led.head()
    if as_json:
        echo_json({"seq": seq, "head": digest.hex()})
        return
    click.echo(f"{seq} {digest.hex()}")
