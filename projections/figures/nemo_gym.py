"""NeMo Gym's ``<stem>_aggregate_metrics.json``, from the selected results.

``AggregateMetrics`` takes the rows ``selected_results`` streams (``results``
writes them at the same time) and builds the document NeMo Gym 0.7.0 writes
beside a run (reference 1.10, ``nemo_gym_formats.md``): a JSON list, one entry
per agent (``agent_ref.name``), each with ``agent_metrics`` (``mean/``,
``max/``, ``min/``, ``median/``, ``std/`` of every numeric or boolean
top-level field of the rows, ``_``-prefixed ones aside, and of the
``response.usage`` token counts), ``key_metrics`` (the ``mean/`` figures) and
``group_level_metrics`` (the same per ``_ng_task_index``). The standard
deviation is the sample one (0.0 for one value), as NeMo Gym's files hold.

Only complete rollouts' rows enter (``--all``'s unfinished rows are skipped).
With a counting option, each rollout it counts enters as a ``reward`` of 0 of
its agent and task, and no other field (NeMo Gym enters the failure row
itself, its tokens included). Each entry adds ``rollout_ledger``: the run's
reward figures (``RewardMetrics.to_dict``) and coverage (REC-41), with the two
options beside them; NeMo Gym's readers ignore a key they do not know.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ledger import Ledger
from projections.decisions.completion import coverage
from projections.decisions.rules import Decision
from projections.figures.metrics import metrics_of, unfinished_kind
from projections.fold.state import RunState
from projections.views.results import SelectedRow, result_rows

__all__ = ["AggregateMetrics", "MeasuredRows", "counted_zeros", "measured_rows"]

Decisions = dict[tuple[int, int], Decision]

#: ``_ng_decision`` of a complete rollout's row (CLI-12).
_COMPLETE = frozenset(
    ("graded", "graded_failure", "settled_zero", "rejudged", "infra_cut", "unscored")
)
_USAGE = ("input_tokens", "output_tokens", "total_tokens")


def _number(value: object) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        number = float(value)
        return number if math.isfinite(number) else None
    return None


def _fields(row: Mapping[str, Any]) -> dict[str, float]:
    found: dict[str, float] = {}
    for key, value in row.items():
        number = None if key.startswith("_") else _number(value)
        if number is not None:
            found[key] = number
    response = row.get("response")
    usage = response.get("usage") if isinstance(response, Mapping) else None
    if isinstance(usage, Mapping):
        for key in _USAGE:
            number = _number(usage.get(key))
            if number is not None:
                found[key] = number
    return found


class _Values:
    """Each field's values, in the order first seen."""

    def __init__(self) -> None:
        self.fields: dict[str, list[float]] = {}
        self.rows = 0

    def add(self, fields: Mapping[str, float]) -> None:
        self.rows += 1
        for key, number in fields.items():
            self.fields.setdefault(key, []).append(number)

    def stats(self) -> dict[str, float]:
        summaries = {key: _summary(values) for key, values in self.fields.items()}
        return {
            f"{name}/{key}": summary[index]
            for index, name in enumerate(("mean", "max", "min", "median", "std"))
            for key, summary in summaries.items()
        }


def _summary(values: list[float]) -> tuple[float, float, float, float, float]:
    """Mean, max, min, median and sample standard deviation (0.0 for one value)."""
    n = len(values)
    mean = math.fsum(values) / n
    ordered = sorted(values)
    middle = n // 2
    median = ordered[middle] if n % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    std = (
        math.sqrt(math.fsum((x - mean) ** 2 for x in values) / (n - 1))
        if n > 1
        else 0.0
    )
    return mean, ordered[-1], ordered[0], median, std


def _agent_of(row: Mapping[str, Any]) -> str | None:
    ref = row.get("agent_ref")
    name = ref.get("name") if isinstance(ref, Mapping) else None
    return name if isinstance(name, str) else None


def _index(row: Mapping[str, Any], key: str) -> int | None:
    value = row.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def counted_zeros(
    state: RunState,
    decisions: Decisions,
    *,
    count_failure_classes_as_zero: bool,
    count_missing_rollouts_as_zero: bool,
) -> list[tuple[str | None, int]]:
    """The ``(agent, task)`` of every rollout a counting option enters as 0.

    The same rollouts ``RewardMetrics`` counts: not complete nor omitted, the
    newest outcome a failure row, or no outcome at all.
    """
    found = []
    for (task, index), rollout in state.ordered_rollouts():
        if decisions[task, index].value in ("complete", "omitted"):
            continue
        kind = unfinished_kind(rollout)
        if (kind == "missing" and count_missing_rollouts_as_zero) or (
            kind == "failure_classes" and count_failure_classes_as_zero
        ):
            found.append((rollout.agent, task))
    return found


class AggregateMetrics:
    """Builds NeMo Gym's aggregate metrics document from streamed rows.

    Made from the state and decisions the rows were chosen from (the document
    reads them too): a row without ``agent_ref`` takes its materialized input's.
    """

    def __init__(
        self,
        state: RunState,
        decisions: dict[tuple[int, int], Decision],
        *,
        count_failure_classes_as_zero: bool = False,
        count_missing_rollouts_as_zero: bool = False,
    ) -> None:
        self._state = state
        self._decisions = decisions
        self._options = {
            "count_failure_classes_as_zero": count_failure_classes_as_zero,
            "count_missing_rollouts_as_zero": count_missing_rollouts_as_zero,
        }
        self._zeros_added = False
        self._agents: dict[str | None, _Values] = {}
        self._groups: dict[str | None, dict[int, _Values]] = {}

    def _add(
        self, agent: str | None, task: int | None, fields: dict[str, float]
    ) -> None:
        self._agents.setdefault(agent, _Values()).add(fields)
        if task is not None:
            groups = self._groups.setdefault(agent, {})
            groups.setdefault(task, _Values()).add(fields)

    def add(self, row: Mapping[str, Any]) -> None:
        """One row ``selected_results`` yielded; unfinished rows are skipped."""
        if row.get("_ng_decision") not in _COMPLETE:
            return
        task, index = _index(row, "_ng_task_index"), _index(row, "_ng_rollout_index")
        agent = _agent_of(row)
        if agent is None and task is not None and index is not None:
            rollout = self._state.rollouts.get(task, {}).get(index)
            agent = None if rollout is None else rollout.agent
        self._add(agent, task, _fields(row))

    def document(self) -> list[dict[str, Any]]:
        """The document, once every row was added (the options' zeros go last)."""
        state, decisions, options = self._state, self._decisions, self._options
        if not self._zeros_added:
            self._zeros_added = True
            for agent, task in counted_zeros(state, decisions, **options):
                self._add(agent, task, {"reward": 0.0})
        metrics = metrics_of(state, decisions, **options)
        ours = {
            "schema_version": 1,
            "metrics": metrics.to_dict(),
            "coverage": coverage(state, decisions).to_dict(),
        }
        return self._entries(state, ours)

    def _entries(self, state: RunState, ours: dict[str, Any]) -> list[dict[str, Any]]:
        expected = {task: len(rollouts) for task, rollouts in state.rollouts.items()}
        entries = []
        for agent, values in self._agents.items() or [(None, _Values())]:
            stats = values.stats()
            groups = []
            for task, group in sorted(self._groups.get(agent, {}).items()):
                groups.append(
                    {"_ng_task_index": task}
                    | group.stats()
                    | {
                        "num_rollouts": group.rows,
                        "expected_num_rollouts": expected.get(task, group.rows),
                        "missing_num_rollouts": max(
                            0, expected.get(task, group.rows) - group.rows
                        ),
                    }
                )
            entries.append(
                {
                    "agent_ref": None if agent is None else {"name": agent},
                    "agent_metrics": stats,
                    "key_metrics": {
                        k: v for k, v in stats.items() if k.startswith("mean/")
                    },
                    "group_level_metrics": groups,
                    "rollout_ledger": ours,
                }
            )
        return entries


@dataclass(frozen=True)
class MeasuredRows:
    """``result_rows``' rows, and the metrics document they feed as they stream.

    ``figures`` is ``None`` unless asked for; its ``document()`` is whole once
    the rows are exhausted. Iterate ``selected`` (each row with its rollout and
    decision) or ``rows`` (the rows alone), once: they are one stream.
    """

    count: int
    rollouts: int
    selected: Iterator[SelectedRow]
    state: RunState
    figures: AggregateMetrics | None

    @property
    def rows(self) -> Iterator[dict[str, Any]]:
        """The rows alone, as ``results`` writes them."""
        return (selected.row for selected in self.selected)


def measured_rows(
    ledger: Ledger,
    *,
    metrics: bool = False,
    count_failure_classes_as_zero: bool = False,
    count_missing_rollouts_as_zero: bool = False,
    **options: bool,
) -> MeasuredRows:
    """CLI-12's rows (``result_rows``) and, with ``metrics``, their figures.

    ``options`` are ``result_rows``' own (``all``, ``allow_changed``); the
    figures read the state and decisions the rows were chosen from.
    """
    found = result_rows(ledger, **options)
    if not metrics:
        return MeasuredRows(
            found.count, found.rollouts, found.selected, found.state, None
        )
    figures = AggregateMetrics(
        found.state,
        found.decisions,
        count_failure_classes_as_zero=count_failure_classes_as_zero,
        count_missing_rollouts_as_zero=count_missing_rollouts_as_zero,
    )
    selected = _feeding(found.selected, figures)
    return MeasuredRows(found.count, found.rollouts, selected, found.state, figures)


def _feeding(
    rows: Iterable[SelectedRow], figures: AggregateMetrics
) -> Iterator[SelectedRow]:
    for selected in rows:
        figures.add(selected.row)
        yield selected
