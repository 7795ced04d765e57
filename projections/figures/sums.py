"""The reward figures' arithmetic, exact so that parts summed apart add up (P-8).

``projections.figures.metrics`` sorts rollouts into the values that enter the
figures; this module turns values into figures. Every sum is exact (the
values' binary fractions summed as integers, as ``statistics`` does), so the
figures of a run are the same whether its values were summed in one pass or
partly when they settled (``RunState.settled``, the snapshot of what is left)
and partly now: the mean is ``math.fsum``'s, the standard deviation
``statistics.stdev``'s (the exact sum of squares, its square root correctly
rounded), the median ``statistics.median``'s, and pass@k the exact mean of the
tasks' values, each rounded once.
"""

from __future__ import annotations

import bisect
import itertools
import math
import sys
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Any

import msgspec

__all__ = [
    "Figures",
    "Scores",
    "TaskFigure",
    "ValueSums",
    "add_values",
    "figures_of_scores",
    "merge_scores",
    "pack_scores",
    "pass_at_k",
    "sorted_scores",
    "summary",
    "t_quantile_975",
    "task_figure",
    "task_scores",
    "unpack_scores",
    "updated",
]


#: Student's t quantile 0.975 for 1..30 degrees of freedom.
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
_Z975 = 1.959963984540054


def t_quantile_975(df: int) -> float:
    """Student's t 0.975 quantile: a table to 30, Cornish-Fisher above (< 1e-4)."""
    if df < 1:
        raise ValueError("degrees of freedom must be at least 1")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975
    return (
        z
        + (z**3 + z) / (4 * df)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3)
    )


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k of one task: n values, c correct (Chen et al. 2021)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@{k} needs 1 <= k <= n and 0 <= c <= n (n={n}, c={c})")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


#: ``(task, score)`` pairs, sorted, as two arrays (8 bytes a number: a
#: million settled scores are 16 MB, not the 100 MB of Python tuples).
Scores = tuple["array[int]", "array[float]"]


def pack_scores(scores: Scores) -> bytes:
    """The pairs as bytes: tasks (int64), then scores (float64), little-endian."""
    tasks, values = array("q", scores[0]), array("d", scores[1])
    if sys.byteorder == "big":
        tasks.byteswap()
        values.byteswap()
    return tasks.tobytes() + values.tobytes()


def unpack_scores(data: bytes) -> Scores:
    """``pack_scores``' pairs again."""
    half = len(data) // 2
    tasks, values = array("q"), array("d")
    tasks.frombytes(data[:half])
    values.frombytes(data[half:])
    if sys.byteorder == "big":
        tasks.byteswap()
        values.byteswap()
    return tasks, values


def sorted_scores(tasks: array[int], values: array[float]) -> Scores:
    """``(task, score)`` pairs, sorted by task then score.

    Pairs come a task at a time (a state's rollouts are grouped by task), so
    each task's few scores are sorted where they lie; only tasks out of order
    need a sort of every pair.
    """
    groups, start, count = [], 0, len(tasks)
    while start < count:
        end = start + 1
        while end < count and tasks[end] == tasks[start]:
            end += 1
        groups.append((tasks[start], start, end))
        start = end
    if any(a[0] >= b[0] for a, b in itertools.pairwise(groups)):
        pairs = sorted(zip(tasks, values, strict=True))
        return array("q", (t for t, _ in pairs)), array("d", (v for _, v in pairs))
    ordered = array("d")
    for _, start, end in groups:
        ordered.extend(sorted(values[start:end]))
    return array("q", tasks), ordered


def merge_scores(base: Scores, new: Scores) -> Scores:
    """Two sorted sets of pairs, as one."""
    if not new[0]:
        return base
    if not base[0]:
        return new
    tasks, values = array("q"), array("d")
    start = 0
    for task, value in zip(*new, strict=True):  # few new among many: copy runs
        at = _position(base, (task, value), start)
        tasks.extend(base[0][start:at])
        values.extend(base[1][start:at])
        tasks.append(task)
        values.append(value)
        start = at
    tasks.extend(base[0][start:])
    values.extend(base[1][start:])
    return tasks, values


def _position(scores: Scores, pair: tuple[int, float], low: int) -> int:
    """Where ``pair`` goes in sorted ``scores`` (after equal ones), from ``low``."""
    tasks, values = scores
    low = bisect.bisect_left(tasks, pair[0], low)
    high = bisect.bisect_right(tasks, pair[0], low)
    return bisect.bisect_right(values, pair[1], low, high)


def task_scores(scores: Scores, task: int) -> list[float]:
    """The scores of ``task`` in sorted ``scores``."""
    low = bisect.bisect_left(scores[0], task)
    high = bisect.bisect_right(scores[0], task, low)
    return list(scores[1][low:high])


class ValueSums(msgspec.Struct, array_like=True, frozen=True):
    """The values in the figures: how many, their exact sums, each distinct one."""

    n: int = 0
    sx: str = "0"  # the exact sum, as a fraction's text
    sxx: str = "0"  # the exact sum of squares
    counts: list[tuple[float, int]] = []  # distinct values, ascending, and counts


class TaskFigure(msgspec.Struct, array_like=True, frozen=True):
    """One task's values: how many, their mean (``fsum / n``), how many correct."""

    task: int
    rollouts: int
    mean: float
    correct: int


class Figures(msgspec.Struct, array_like=True, frozen=True):
    """The figures' parts of a set of values: their sums and each task's figure."""

    sums: ValueSums
    tasks: list[TaskFigure]  # by task


def task_figure(task: int, values: Sequence[float], correct_at: float) -> TaskFigure:
    """The figure of one task's values (at least one)."""
    correct = sum(value >= correct_at for value in values)
    return TaskFigure(task, len(values), math.fsum(values) / len(values), correct)


def add_values(sums: ValueSums, values: Iterable[float]) -> ValueSums:
    """``sums`` with ``values`` added, exactly."""
    sx_parts: defaultdict[int, int] = defaultdict(int)
    sxx_parts: defaultdict[int, int] = defaultdict(int)
    counts: Counter[float] = Counter()
    n = 0
    for value in values:
        numerator, denominator = value.as_integer_ratio()
        sx_parts[denominator] += numerator
        sxx_parts[denominator] += numerator * numerator
        counts[value] += 1
        n += 1
    if not n:
        return sums
    sx = Fraction(sums.sx) + sum(
        (Fraction(num, den) for den, num in sx_parts.items()), Fraction(0)
    )
    sxx = Fraction(sums.sxx) + sum(
        (Fraction(num, den * den) for den, num in sxx_parts.items()), Fraction(0)
    )
    counts.update(dict(sums.counts))
    return ValueSums(sums.n + n, str(sx), str(sxx), sorted(counts.items()))


def figures_of_scores(scores: Scores, correct_at: float = 1.0) -> Figures:
    """The figures' parts of sorted ``(task, score)`` pairs."""
    tasks, values = scores
    figures: list[TaskFigure] = []
    start, count = 0, len(tasks)
    while start < count:
        end = bisect.bisect_right(tasks, tasks[start], start)
        figures.append(task_figure(tasks[start], values[start:end], correct_at))
        start = end
    return Figures(add_values(ValueSums(), values), figures)


def updated(
    figures: Figures,
    scores: Scores,
    added: dict[int, list[float]],
    correct_at: float = 1.0,
) -> Figures:
    """``figures`` with the values ``added`` per task (``scores``: the others).

    Only the tasks that gained values are figured again, from their values
    in ``scores`` (sorted) and the new ones.
    """
    if not added:
        return figures
    by_task = {figure.task: figure for figure in figures.tasks}
    for task, values in added.items():
        before = task_scores(scores, task)
        by_task[task] = task_figure(task, before + values, correct_at)
    sums = add_values(figures.sums, (v for values in added.values() for v in values))
    return Figures(sums, [by_task[task] for task in sorted(by_task)])


def _sqrt_of_fraction(value: Fraction) -> float:
    """The square root of a non-negative fraction, correctly rounded."""
    n, m = value.numerator, value.denominator
    q = (n.bit_length() - m.bit_length() - 109) // 2  # 109: statistics' width
    if q >= 0:
        root = _isqrt_round_to_odd(n, m << 2 * q) << q
        return root / 1
    return _isqrt_round_to_odd(n << -2 * q, m) / (1 << -q)


def _isqrt_round_to_odd(n: int, m: int) -> int:
    root = math.isqrt(n // m)
    return root | (root * root * m != n)


def _median(sums: ValueSums) -> float:
    """``statistics.median`` of the values ``sums.counts`` lists."""
    n = sums.n

    def at(index: int) -> float:
        seen = 0
        for value, count in sums.counts:
            seen += count
            if index < seen:
                return value
        raise IndexError(index)

    if n % 2:
        return at(n // 2)
    return (at(n // 2 - 1) + at(n // 2)) / 2


def _pass_at_k(tasks: Sequence[TaskFigure]) -> list[tuple[int, float, int, int]]:
    groups = Counter((t.rollouts, t.correct) for t in tasks if t.rollouts)
    every = sum(groups.values())  # the tasks with a value: pass@1's
    largest = max((n for n, _ in groups), default=0)
    if largest < 2:
        return []  # no task repeats: pass@k says nothing the mean does not
    ks = sorted({*(2**i for i in range(largest.bit_length()) if 2**i <= largest),
                 largest})  # fmt: skip
    found = []
    for k in ks:
        eligible = {(n, c): count for (n, c), count in groups.items() if n >= k}
        tasks_k = sum(eligible.values())
        total = sum(
            (
                Fraction(pass_at_k(n, c, k)) * count
                for (n, c), count in eligible.items()
            ),
            Fraction(0),
        )
        found.append((k, float(total / tasks_k), tasks_k, every))
    return found


def summary(figures: Figures) -> dict[str, Any]:
    """The figures: ``RewardMetrics``' fields from ``n`` to ``pass_at_k``, with
    ``per_task`` as ``(task, rollouts, mean)`` and ``pass_at_k`` as ``(k, value,
    tasks, of_tasks)`` tuples: ``tasks`` have at least k values, of the
    ``of_tasks`` that have one."""
    sums = figures.sums
    n = sums.n
    mean = float(Fraction(sums.sx)) / n if n else None
    std = None
    if n >= 2:
        sx, sxx = Fraction(sums.sx), Fraction(sums.sxx)
        std = _sqrt_of_fraction((n * sxx - sx * sx) / n / (n - 1))
    se = std / math.sqrt(n) if std is not None else None
    interval = None
    if mean is not None and se is not None:
        half = t_quantile_975(n - 1) * se
        interval = (mean - half, mean + half)
    return {
        "n": n,
        "mean": mean,
        "std": std,
        "standard_error": se,
        "interval_95": interval,
        "minimum": sums.counts[0][0] if n else None,
        "maximum": sums.counts[-1][0] if n else None,
        "median": _median(sums) if n else None,
        "per_task": [(t.task, t.rollouts, t.mean) for t in figures.tasks if t.rollouts],
        "pass_at_k": _pass_at_k(figures.tasks),
    }
