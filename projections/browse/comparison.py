"""Two runs side by side: figures, the difference of means, what differs.

Run B against run A (a new checkpoint against the old one, most often): each
run's header and reward figures; the difference of means (B minus A) with its
95% interval, paired by task where the runs share tasks (the mean of the
per-task differences, Student's t over the shared tasks), else Welch's
unpaired interval over the scored rollouts; the per-task differences, largest
first; the rollouts whose decision differs; and the configuration keys that
differ, in ``diff-config``'s classes (a key that changes results, or an
operational one). Pure: two replays, nothing written.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import msgspec

from ledger import Ledger, drift, redact_secrets
from ledger.identity.normalize import get_path, has_path
from projections.browse.runs import RunCard, run_card
from projections.decisions.rules import Decision, decide_all
from projections.figures.sums import t_quantile_975
from projections.fold.reading import replay

__all__ = [
    "LISTED",
    "Comparison",
    "DecisionChange",
    "Difference",
    "KeyChange",
    "TaskDifference",
    "compare_runs",
]

#: At most this many differing decisions are listed (all are counted).
LISTED = 1000


class Difference(msgspec.Struct, frozen=True, kw_only=True):
    """B's mean minus A's, its 95% interval, and how it was made."""

    value: float | None
    standard_error: float | None
    interval_95: tuple[float, float] | None
    method: str  # "paired by task", "unpaired (Welch)" or "none"
    tasks: int  # shared tasks (paired) or 0
    why_none: str | None = None


class TaskDifference(msgspec.Struct, frozen=True, kw_only=True):
    """One task: each run's mean reward over its scored rollouts, and B minus A."""

    task: int
    mean_a: float | None
    mean_b: float | None
    difference: float | None
    n_a: int
    n_b: int


class DecisionChange(msgspec.Struct, frozen=True):
    """A rollout both runs have, decided differently."""

    task: int
    rollout: int
    a: str
    b: str


class KeyChange(msgspec.Struct, frozen=True):
    """A configuration key whose value differs, its class, and both values."""

    key: str
    key_class: str  # "semantic" (changes results) or "operational"
    a: str
    b: str


class Comparison(msgspec.Struct, frozen=True, kw_only=True):
    """Run B against run A."""

    a: RunCard
    b: RunCard
    difference: Difference
    tasks: list[TaskDifference]
    decisions_differ: int
    decisions: list[DecisionChange]
    keys: list[KeyChange]
    comparable: bool  # both runs keep an identity to compare key by key

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``compare --json`` and the viewer's API."""
        found: dict[str, Any] = msgspec.to_builtins(self)
        return found


def _scores(decisions: Mapping[tuple[int, int], Decision]) -> dict[int, list[float]]:
    by_task: dict[int, list[float]] = defaultdict(list)
    for (task, _), decision in decisions.items():
        if decision.value == "complete" and decision.score is not None:
            by_task[task].append(decision.score)
    return by_task


def _interval(value: float, error: float, df: int) -> tuple[float, float]:
    half = t_quantile_975(max(df, 1)) * error
    return (value - half, value + half)


def _paired(a: dict[int, list[float]], b: dict[int, list[float]]) -> Difference | None:
    shared = sorted(set(a) & set(b))
    if len(shared) < 2:
        return None
    diffs = [statistics.fmean(b[t]) - statistics.fmean(a[t]) for t in shared]
    value = statistics.fmean(diffs)
    error = statistics.stdev(diffs) / math.sqrt(len(diffs))
    return Difference(
        value=value,
        standard_error=error,
        interval_95=_interval(value, error, len(diffs) - 1),
        method="paired by task",
        tasks=len(shared),
    )


def _welch(a: list[float], b: list[float]) -> Difference:
    if len(a) < 2 or len(b) < 2:
        return Difference(
            value=None,
            standard_error=None,
            interval_95=None,
            method="none",
            tasks=0,
            why_none="each run needs at least 2 scored rollouts",
        )
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    value = statistics.fmean(b) - statistics.fmean(a)
    error = math.sqrt(va + vb)
    if error == 0:
        df = len(a) + len(b) - 2
    else:  # Welch-Satterthwaite
        df = int((va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1)))
    return Difference(
        value=value,
        standard_error=error,
        interval_95=_interval(value, error, df),
        method="unpaired (Welch)",
        tasks=0,
    )


def _task_differences(
    a: dict[int, list[float]], b: dict[int, list[float]]
) -> list[TaskDifference]:
    rows = []
    for task in sorted(set(a) | set(b)):
        mean_a = statistics.fmean(a[task]) if a.get(task) else None
        mean_b = statistics.fmean(b[task]) if b.get(task) else None
        diff = None if mean_a is None or mean_b is None else mean_b - mean_a
        rows.append(
            TaskDifference(
                task=task,
                mean_a=mean_a,
                mean_b=mean_b,
                difference=diff,
                n_a=len(a.get(task, ())),
                n_b=len(b.get(task, ())),
            )
        )
    return sorted(
        rows,
        key=lambda r: (r.difference is None, -abs(r.difference or 0.0), r.task),
    )


def _shown(identity: Mapping[str, Any], key: str) -> str:
    if not has_path(identity, key):
        return "(absent)"
    return redact_secrets(msgspec.json.encode(get_path(identity, key)).decode())


def _keys(a: Any, b: Any) -> tuple[list[KeyChange], bool]:
    if not isinstance(a, Mapping) or not isinstance(b, Mapping):
        return [], False
    found = drift(a, b)
    if found is None:
        return [], False
    return [
        KeyChange(key, key_class, _shown(a, key), _shown(b, key))
        for key_class, names in (
            ("semantic", found.semantic),
            ("operational", found.operational),
        )
        for key in names
    ], True


Folded = tuple[Any, Mapping[tuple[int, int], Decision]]


def compare_runs(
    a: Ledger,
    b: Ledger,
    *,
    out_a: str | None = None,
    out_b: str | None = None,
    folded: tuple[Folded, Folded] | None = None,
) -> Comparison:
    """Run ``b`` against run ``a`` (both read, neither written).

    ``folded``: each run's state (a full replay) and decisions, when the
    caller holds them already (the viewer keeps them per head).
    """
    if folded is None:
        state_a, state_b = replay(a), replay(b)
        folded = ((state_a, decide_all(state_a)), (state_b, decide_all(state_b)))
    (state_a, decided_a), (state_b, decided_b) = folded
    scores_a, scores_b = _scores(decided_a), _scores(decided_b)
    paired = _paired(scores_a, scores_b)
    difference = paired or _welch(
        [s for v in scores_a.values() for s in v],
        [s for v in scores_b.values() for s in v],
    )
    changed = [
        DecisionChange(task, rollout, decision.value, decided_b[task, rollout].value)
        for (task, rollout), decision in sorted(decided_a.items())
        if (task, rollout) in decided_b
        and decided_b[task, rollout].value != decision.value
    ]
    keys, comparable = _keys(state_a.identity, state_b.identity)
    return Comparison(
        a=run_card(a, out_a or str(a.target), state_a),
        b=run_card(b, out_b or str(b.target), state_b),
        difference=difference,
        tasks=_task_differences(scores_a, scores_b),
        decisions_differ=len(changed),
        decisions=changed[:LISTED],
        keys=keys,
        comparable=comparable,
    )
