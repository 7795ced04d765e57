"""The table ``results --format csv|parquet`` writes: one row per rollout (CLI-12).

The same rollouts, decisions and rewards as the JSONL ``results`` writes, as
columns: ``task``, ``rollout``, ``attempt`` (the attempt the decision is
about: the selected one, or for ``retry`` and ``pending`` the next to run),
``decision`` (the row's ``_ng_decision``), ``reward`` (the decided score,
``None`` without one), ``failure_kind``, ``failure_side`` (``model``,
``infrastructure`` or ``unknown``; ``None`` without a failure kind) and
``agent`` (``agent_ref.name``, else the materialized input's), then one
column for each field asked for.

A field is a top-level key of the row, else a dotted path into it
(``response.usage.total_tokens``; a number steps into a list). Its value is
kept when it is a string, a number, a boolean or null; anything else (an
object, a list) and a missing field are ``None``. A multistage rollout's
earlier stages (ROW-64) are the JSONL's only: the table has its final row.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

from ledger import row_facts
from projections.fold.state import RunState
from projections.views.results import SelectedRow
from projections.words.describe import decision_side
from projections.words.tables import SIDE_WORDS

__all__ = ["TABLE_COLUMNS", "field_value", "table_records"]

#: The columns every table of ``results`` starts with, in order.
TABLE_COLUMNS: Final[tuple[str, ...]] = (
    "task",
    "rollout",
    "attempt",
    "decision",
    "reward",
    "failure_kind",
    "failure_side",
    "agent",
)

_MISSING = object()


def _scalar(value: object) -> str | int | float | bool | None:
    return value if isinstance(value, str | int | float | bool) else None


def _step(value: object, part: str) -> object:
    if isinstance(value, Mapping):
        return value.get(part, _MISSING)
    if isinstance(value, list) and part.isdigit() and int(part) < len(value):
        return value[int(part)]
    return _MISSING


def field_value(row: Mapping[str, Any], name: str) -> str | int | float | bool | None:
    """``name`` of ``row``: a top-level key, else a dotted path; scalars only."""
    if name in row:
        return _scalar(row[name])
    value: object = row
    for part in name.split("."):
        value = _step(value, part)
        if value is _MISSING:
            return None
    return _scalar(value)


def _agent(row: Mapping[str, Any], state: RunState, key: tuple[int, int]) -> str | None:
    ref = row.get("agent_ref")
    name = ref.get("name") if isinstance(ref, Mapping) else None
    if isinstance(name, str):
        return name
    rollout = state.rollouts.get(key[0], {}).get(key[1])
    return None if rollout is None else rollout.agent


def _reward(row: Mapping[str, Any]) -> float | None:
    value = row.get("reward")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _side(selected: SelectedRow, overrides: Mapping[str, Any] | None) -> str | None:
    decision = selected.decision
    if decision.kind is None:
        return None
    stage = result_class = None
    if selected.recorded:  # the failed row itself: its stage and applied class
        facts = row_facts(selected.row)
        if facts.selected_kind == decision.kind:
            stage, result_class = facts.stage, facts.result_class
    where = decision_side(
        decision, side_overrides=overrides, stage=stage, result_class=result_class
    )
    return SIDE_WORDS.get(where or "", "unknown")


def table_records(
    selected: Iterable[SelectedRow], state: RunState, fields: Sequence[str] = ()
) -> Iterator[tuple[Any, ...]]:
    """One tuple per rollout: ``TABLE_COLUMNS``' values, then each field's.

    ``selected`` is ``result_rows``' (or ``measured_rows``') stream; ``state``
    the state it was chosen from (the agent of a row without one, the
    policy's side overrides).
    """
    overrides = state.policy.get("side_overrides") or None
    for one in selected:
        if not one.final:
            continue
        row, decision = one.row, one.decision
        decided = row.get("_ng_decision")
        yield (
            one.key[0],
            one.key[1],
            decision.attempt,
            decided if isinstance(decided, str) else decision.value,
            _reward(row),
            decision.kind,
            _side(one, overrides),
            _agent(row, state, one.key),
            *(field_value(row, name) for name in fields),
        )
