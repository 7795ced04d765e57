"""Multistage rows: the stage a row saves, and its rollout's final stage (ROW-64).

NeMo Gym 0.7.0's multistage environments (GDPVal) write one row per stage of a
rollout, each with ``stage_index`` and ``expected_final_stage_index``. Such rows
are the stages of one attempt, not its duplicates: ``stage_of`` reads the pair,
and the events of a stage row carry it (``stage_index``, ``final_stage_index``).
A row without ``stage_index`` costs one dictionary lookup.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from ledger.errors import RowError
from ledger.rows.values import brief

__all__ = [
    "MAX_STAGE_INDEX",
    "reserved_stage",
    "stage_event_fields",
    "stage_fields",
    "stage_of",
]

#: The largest stage index read. No environment runs a million stages; a
#: larger value is a mistake in the row, refused where the row enters.
MAX_STAGE_INDEX: Final = 999_999

_STAGE = "stage_index"
_FINAL = "expected_final_stage_index"


def _index(value: object) -> int | None:
    if type(value) is int and 0 <= value <= MAX_STAGE_INDEX:
        return value
    return None


def stage_of(row: Mapping[str, Any]) -> tuple[int, int] | str | None:
    """``(stage, final stage)`` of a multistage row; ``None`` for any other row.

    A row is a stage row when it carries ``stage_index`` together with
    ``expected_final_stage_index`` (ROW-64). When both are present but are not
    integers from 0 to ``MAX_STAGE_INDEX`` with the stage at most the final
    stage, the answer is the problem, in words (the row is refused).
    """
    stage = row.get(_STAGE)
    if stage is None:
        return None  # the common case: one lookup
    final = row.get(_FINAL)
    if final is None:
        return None  # a stage without its final stage: not a multistage row
    found, last = _index(stage), _index(final)
    if found is None or last is None:
        key = _STAGE if found is None else _FINAL
        return (
            f"{key} must be an integer from 0 to {MAX_STAGE_INDEX} "
            f"(found {brief(row.get(key))})"
        )
    if found > last:
        return f"{_STAGE} {found} is past the row's {_FINAL} {last}"
    return found, last


def stage_event_fields(row: Mapping[str, Any]) -> dict[str, int] | str:
    """The stage fields of a row's outcome event (empty for a plain row).

    A problem with the row's stage fields is returned in words.
    """
    found = stage_of(row)
    if found is None or isinstance(found, str):
        return found or {}
    return {"stage_index": found[0], "final_stage_index": found[1]}


def stage_fields(row: Mapping[str, Any]) -> dict[str, int]:
    """``stage_event_fields``, for a row a collector records.

    Raises:
        RowError: the row's stage fields are malformed (naming the key).
    """
    found = stage_event_fields(row)
    if isinstance(found, str):
        key = _FINAL if found.startswith(_FINAL) else _STAGE
        raise RowError(f"the row's {found}", key=key)
    return found


def reserved_stage(row: Mapping[str, Any]) -> int | None:
    """The later stage an attempt's reservation continues at, if the row names one.

    A plan item that continues an unfinished multistage attempt carries the
    first missing ``stage_index`` (ROW-64); stage 0 starts an attempt, so it
    is no continuation.
    """
    stage = _index(row.get(_STAGE))
    return stage if stage else None
