"""The tables ``results`` writes: CSV (the standard library) and Parquet (pyarrow).

``projections.table_records`` gives one tuple per rollout; here they become
CSV lines with a header, or one Parquet table written at the end. pyarrow is
an optional extra, imported only when Parquet is asked for (P-6).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from typing import IO, Any

import click

__all__ = ["PARQUET_MISSING", "parquet_module", "write_csv", "write_parquet"]

#: What ``--format parquet`` says when pyarrow is not installed.
PARQUET_MISSING = (
    "--format parquet needs pyarrow, which is not installed: "
    "pip install 'rollout-ledger[parquet]' (or write --format csv)"
)

#: The type of each of ``projections.TABLE_COLUMNS``, in pyarrow's names.
_TYPES = {
    "task": "int64",
    "rollout": "int64",
    "attempt": "int64",
    "decision": "string",
    "reward": "float64",
    "failure_kind": "string",
    "failure_side": "string",
    "agent": "string",
}
_INT64 = (-(2**63), 2**63 - 1)


def _text(value: object) -> str:
    """A cell as text: empty for ``None``, JSON's ``true``/``false``."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def write_csv(
    sink: IO[bytes], columns: Sequence[str], records: Iterable[Sequence[Any]]
) -> int:
    """A header line, then one line per record (UTF-8, ``\\n``); how many."""
    text = io.TextIOWrapper(sink, encoding="utf-8", newline="", write_through=True)
    try:
        writer = csv.writer(text, lineterminator="\n")
        writer.writerow(columns)
        written = 0
        for record in records:
            writer.writerow([_text(value) for value in record])
            written += 1
        text.flush()
    finally:
        text.detach()  # the sink stays open: its owner closes it
    return written


def parquet_module() -> Any:
    """``pyarrow`` with its Parquet writer, or a usage error naming the extra."""
    try:
        import pyarrow
        import pyarrow.parquet  # the writer, as pyarrow.parquet below
    except ImportError:
        raise click.UsageError(PARQUET_MISSING) from None
    return pyarrow


def _field_column(pa: Any, values: list[Any]) -> Any:
    """A field's column: bool, int64 or float64 when its values all are, else text."""
    kinds = {type(v) for v in values if v is not None}
    numbers = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    if kinds == {bool}:
        return pa.array(values, type=pa.bool_())
    if kinds == {int} and all(_INT64[0] <= v <= _INT64[1] for v in numbers):
        return pa.array(values, type=pa.int64())
    if kinds and kinds <= {int, float}:
        return pa.array([None if v is None else float(v) for v in values], pa.float64())
    texts = [v if v is None or isinstance(v, str) else _text(v) for v in values]
    return pa.array(texts, type=pa.string())


def write_parquet(
    sink: IO[bytes], columns: Sequence[str], records: Iterable[Sequence[Any]]
) -> int:
    """One Parquet table of the records, typed; how many rows it holds.

    ``TABLE_COLUMNS`` keep their types (int64, float64 and strings, each
    nullable); a field's column is typed by its values (``_field_column``).
    """
    pa = parquet_module()
    values: list[list[Any]] = [[] for _ in columns]
    written = 0
    for record in records:
        for column, value in zip(values, record, strict=True):
            column.append(value)
        written += 1
    arrays = [
        pa.array(column, type=getattr(pa, _TYPES[name])())
        if name in _TYPES
        else _field_column(pa, column)
        for name, column in zip(columns, values, strict=True)
    ]
    table = pa.Table.from_arrays(arrays, names=list(columns))
    pa.parquet.write_table(table, sink)
    return written
