"""Whether a saved row belongs to the run (ID-40)."""

from __future__ import annotations

from collections.abc import Container, Mapping
from pathlib import Path
from typing import Any

from ledger.errors import IdentityMismatch

__all__ = ["check_row_identity"]


def _key(row: Mapping[str, Any]) -> tuple[int, int] | None:
    task, rollout = row.get("_ng_task_index"), row.get("_ng_rollout_index")
    valid = all(
        isinstance(index, int) and not isinstance(index, bool)
        for index in (task, rollout)
    )
    return (task, rollout) if valid else None  # type: ignore[return-value]


def check_row_identity(
    row: Mapping[str, Any],
    *,
    run_id: str,
    keys: Container[tuple[int, int]],
    path: Path | str,
    line: int,
) -> None:
    """Refuse a saved row of another run or of a key never materialized (ID-40).

    Rows of older collectors carry no ``_ng_run_id`` and are checked by key alone.

    Raises:
        IdentityMismatch: naming the file, the line and the key.
    """
    key = _key(row)
    where = f"{path}, line {line}"
    if key is None or key not in keys:
        shown = "no valid key" if key is None else f"task {key[0]}, rollout {key[1]}"
        raise IdentityMismatch(
            f"the row at {where} ({shown}) is not among the run's materialized "
            "rows; it is not resumed (move it aside, or import it as its own run)",
            path=path,
            line=line,
        )
    saved = row.get("_ng_run_id")
    if saved is not None and saved != run_id:
        raise IdentityMismatch(
            f"the row at {where} (task {key[0]}, rollout {key[1]}) was dispatched "
            f"under run {saved!r}, not this run {run_id!r}; it is not resumed",
            path=path,
            line=line,
        )
