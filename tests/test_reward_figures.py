"""P-8: the reward figures' exact arithmetic adds up, however the values were split.

The snapshot of what is left sums the settled rollouts' scores when they
settle and the rest later; the figures must be the ones a single pass gives
(``math.fsum``'s mean, ``statistics``' standard deviation and median).
"""

from __future__ import annotations

import math
import statistics
from array import array

from hypothesis import given
from hypothesis import strategies as st

from tests.internals import (
    ValueSums,
    add_values,
    figures_of_scores,
    merge_scores,
    pack_scores,
    reward_summary,
    sorted_scores,
    unpack_scores,
    updated,
)

_SCORE = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False) | st.sampled_from(
    [0.0, 0.5, 1.0]
)
_PAIRS = st.lists(st.tuples(st.integers(0, 30), _SCORE), max_size=60)


def _arrays(pairs: list[tuple[int, float]]) -> tuple[array[int], array[float]]:
    return array("q", (t for t, _ in pairs)), array("d", (v for _, v in pairs))


@given(_PAIRS, _PAIRS)
def test_p_8_scores_merged_are_the_scores_sorted(
    first: list[tuple[int, float]], second: list[tuple[int, float]]
) -> None:
    merged = merge_scores(
        sorted_scores(*_arrays(first)), sorted_scores(*_arrays(second))
    )
    expected = sorted(first + second)
    assert list(zip(*merged, strict=True)) == expected
    assert list(zip(*unpack_scores(pack_scores(merged)), strict=True)) == expected


@given(_PAIRS, _PAIRS)
def test_p_8_figures_of_two_parts_are_the_figures_of_all(
    first: list[tuple[int, float]], second: list[tuple[int, float]]
) -> None:
    whole = figures_of_scores(sorted_scores(*_arrays(first + second)))
    part = figures_of_scores(sorted_scores(*_arrays(first)))
    added: dict[int, list[float]] = {}
    for task, value in second:
        added.setdefault(task, []).append(value)
    both = updated(part, sorted_scores(*_arrays(first)), added)
    assert reward_summary(both) == reward_summary(whole)
    values = [v for _, v in first + second]
    summary = reward_summary(whole)
    assert summary["n"] == len(values)
    if values:
        assert summary["mean"] == math.fsum(values) / len(values)
        assert summary["median"] == statistics.median(values)
        assert (summary["minimum"], summary["maximum"]) == (min(values), max(values))
    if len(values) >= 2:
        assert summary["std"] == statistics.stdev(values)
    loop_ran = len(summary["per_task"]) == len({t for t, _ in first + second})
    assert loop_ran


def test_p_8_sums_of_values_added_twice_are_the_sums_of_all() -> None:
    values = [0.1, 0.2, 0.3, 1e16, -1e16, 0.7]
    assert add_values(add_values(ValueSums(), values[:3]), values[3:]) == add_values(
        ValueSums(), values
    )
