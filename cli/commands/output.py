"""Commands that copy a run's rows or log elsewhere: results, export, head.

Each opens the run read-only and never writes to it (EV-12); an output file is
written through a temporary file that replaces it only when complete.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

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


@click.command()
@out_argument
@output_option("Write to FILE, not stdout.", path_type=_OUTPUT)
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
    everything: bool,
    allow_changed: bool,
    metrics: Path | None,
    failures_as_zero: bool,
    missing_as_zero: bool,
    quiet: bool,
    as_json: bool,
) -> None:
    """Write the selected result of each rollout as JSONL.

    In materialized order, each row as saved plus _ng_decision, with reward
    set to the decided score (a settled zero is marked _ng_settled_zero).
    Superseded attempts, duplicates and retried masked rows never appear.
    --all adds every unfinished rollout with its decision and no reward.
    A row edited since it was recorded stops the output (exit 5, naming its
    file and line) unless --allow-changed.
    --metrics FILE also writes the figures of the complete rollouts in the
    shape of NeMo Gym's <stem>_aggregate_metrics.json, with the run's reward
    figures and coverage under "rollout_ledger"; the two counting options
    change those figures and are stated beside them.

    \b
    Example:
      rollout-ledger results results/rollouts.jsonl \\
          -o selected.jsonl
      rollout-ledger results results/rollouts.jsonl \\
          -o selected.jsonl \\
          --metrics selected_aggregate_metrics.json
    \f
    Rules: CLI-12.
    """
    import msgspec

    import ledger
    import projections

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
        written = 0
        with progress(
            found.rows, length=found.count, label="results", quiet=quiet
        ) as bar:
            for row in bar:
                sink.write(encode(row) + b"\n")
                written += 1
    if metrics is not None and found.figures is not None:
        with _sink(out, metrics, "--metrics") as sink:
            document = msgspec.json.encode(found.figures.document())
            sink.write(msgspec.json.format(document) + b"\n")
    summary = {
        "output": str(output),
        "rows": written,
        "all": everything,
        "metrics": None if metrics is None else str(metrics),
    }
    _written(as_json, output, summary)
    if metrics is not None and not as_json:  # on stderr when rows went to stdout
        click.echo(f"wrote the reward figures to {metrics}", err=output is None)


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
