"""The materialized inputs file, written once at run creation, and its index."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import msgspec

from ledger.bounds import MAX_INDEX
from ledger.errors import RowError
from ledger.events import IndexEntry
from ledger.jsonl import encode_row
from ledger.rows.values import brief

__all__ = ["MaterializedInputs", "index_entry", "index_existing", "materialize"]

_ROLLOUT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_CAPTURE_SUFFIX = re.compile(r"-a[0-9]+$")


class MaterializedInputs(NamedTuple):
    """The bytes written, their digest, and one index entry per row in file order."""

    data: bytes
    digest: str
    entries: tuple[IndexEntry, ...]


def _int_index(row: Mapping[str, Any], key: str, line: int) -> int:
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RowError(
            f"materialized row {line} has no integer {key} >= 0 (found "
            f"{brief(value)}); every input row needs _ng_task_index and "
            "_ng_rollout_index",
            key=key,
            line=line,
        )
    if value > MAX_INDEX:
        raise RowError(
            f"materialized row {line}: {key} must be from 0 to {MAX_INDEX} "
            f"(found {brief(value)})",
            key=key,
            line=line,
        )
    return value


def _explicit_id(row: Mapping[str, Any], line: int) -> str | None:
    value = row.get("_ng_rollout_id")
    if value is None:
        return None
    # ROW-24: an id is a plain token and never looks like a capture key.
    if (
        not isinstance(value, str)
        or not _ROLLOUT_ID.match(value)
        or _CAPTURE_SUFFIX.search(value)
    ):
        raise RowError(
            f"materialized row {line} has an invalid _ng_rollout_id {value!r}",
            key="_ng_rollout_id",
            line=line,
        )
    return value


def _agent(row: Mapping[str, Any]) -> str | None:
    ref = row.get("agent_ref")
    name = ref.get("name") if isinstance(ref, Mapping) else None
    return name if isinstance(name, str) else None


def index_entry(
    row: Mapping[str, Any], *, line: int, offset: int, length: int
) -> IndexEntry:
    """The ``run_created`` index entry of one materialized row (events.md)."""
    if not isinstance(row, Mapping):
        raise RowError(f"materialized row {line} is not a JSON object", line=line)
    task = _int_index(row, "_ng_task_index", line)
    rollout = _int_index(row, "_ng_rollout_index", line)
    return (task, rollout, offset, length, _agent(row), _explicit_id(row, line))


def _refuse_duplicates(index: Iterable[IndexEntry]) -> None:
    keys: dict[tuple[int, int], int] = {}
    ids: dict[str, int] = {}
    for line, (task, rollout, _, _, _, rollout_id) in enumerate(index, start=1):
        if (task, rollout) in keys:
            raise RowError(
                f"materialized rows {keys[task, rollout]} and {line} share the key "
                f"task {task}, rollout {rollout}",
                line=line,
            )
        keys[task, rollout] = line
        if rollout_id is not None and rollout_id in ids:
            raise RowError(
                f"materialized rows {ids[rollout_id]} and {line} share the "
                f"_ng_rollout_id {rollout_id!r}",
                key="_ng_rollout_id",
                line=line,
            )
        if rollout_id is not None:
            ids[rollout_id] = line


def materialize(rows: Iterable[Mapping[str, Any]]) -> MaterializedInputs:
    """Encode the rows and index them, refusing rows without keys and duplicates."""
    chunks: list[bytes] = []
    index: list[IndexEntry] = []
    offset = 0
    for line, row in enumerate(rows, start=1):
        if not isinstance(row, Mapping):
            raise RowError(f"materialized row {line} is not a JSON object", line=line)
        data = encode_row(row)
        index.append(index_entry(row, line=line, offset=offset, length=len(data)))
        chunks.append(data)
        offset += len(data)
    _refuse_duplicates(index)
    data = b"".join(chunks)
    return MaterializedInputs(data, hashlib.sha256(data).hexdigest(), tuple(index))


def index_existing(data: bytes) -> MaterializedInputs:
    """Inputs a collector wrote already, indexed as they are and never rewritten.

    REC-84: a run whose collector died before its first row is adopted with
    its own materialized inputs, byte for byte. Lines are numbered from 1 at
    each newline; blank lines are skipped, as NeMo Gym skips them.
    """
    index: list[IndexEntry] = []
    offset = 0
    *whole, last = data.split(b"\n")  # at "\n" only: a "\r" stays in its line
    lines = [part + b"\n" for part in whole] + ([last] if last else [])
    for line, raw in enumerate(lines, start=1):
        if raw.strip():
            try:
                row = msgspec.json.decode(raw)
            except (msgspec.DecodeError, RecursionError):
                raise RowError(
                    f"materialized row {line} is not JSON", line=line
                ) from None
            index.append(index_entry(row, line=line, offset=offset, length=len(raw)))
        offset += len(raw)
    _refuse_duplicates(index)
    return MaterializedInputs(data, hashlib.sha256(data).hexdigest(), tuple(index))
