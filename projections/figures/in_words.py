"""The reward figures in words (issue 16): ``status``'s first lines, the report's.

No rule id and no internal name: a person reads these (plain words). The
counting options are named beside the figure they change.
"""

from __future__ import annotations

import math

from projections.figures.metrics import PassAtK, RewardMetrics

__all__ = ["metrics_lines", "pass_coverage"]

_DASH = "\u2013"  # an en dash between an interval's ends


def _plural(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else (many or one + 's')}"


def _decimals(se: float | None) -> int:
    """Decimals that show the standard error with two significant digits (2..4)."""
    if se is None or se <= 0 or not math.isfinite(se):
        return 2
    return min(4, max(2, 1 - math.floor(math.log10(se))))


def _mean_line(m: RewardMetrics) -> str:
    if m.mean is None:
        if m.complete:
            done = _plural(m.complete, "complete rollout")
            return f"no mean reward: none of the {done} has a numeric reward"
        return "no mean reward: no rollout has a score yet"
    d = _decimals(m.standard_error)
    head = f"mean reward {m.mean:.{d}f}"
    if m.standard_error is not None and m.interval_95 is not None:
        low, high = m.interval_95
        se = m.standard_error
        head += f" ± {se:.{d}f} (95% interval {low:.{d}f}{_DASH}{high:.{d}f})"
    zeros = m.failure_classes_counted_as_zero + m.missing_counted_as_zero
    if not zeros:
        line = f"{head} over {_plural(m.n, 'scored rollout')}"
    else:
        parts = [f"{m.scored} scored"]
        if m.count_failure_classes_as_zero:
            parts.append(
                f"{m.failure_classes_counted_as_zero} failed counted as zero "
                "(--count-failure-classes-as-zero)"
            )
        if m.count_missing_rollouts_as_zero:
            parts.append(
                f"{m.missing_counted_as_zero} missing counted as zero "
                "(--count-missing-rollouts-as-zero)"
            )
        line = f"{head} over {_plural(m.n, 'rollout')}: " + ", ".join(parts)
    if m.n == 1:
        line += "; one value, so no standard error"
    low_high = m.interval_95
    if (
        low_high is not None
        and m.minimum is not None
        and m.maximum is not None
        and (low_high[0] < m.minimum or low_high[1] > m.maximum)
    ):
        line += f"; wider than the rewards' range ({m.minimum:g} to {m.maximum:g})"
    return line


def _left_out_line(m: RewardMetrics) -> str | None:
    parts = []
    if m.failure_classes and not m.count_failure_classes_as_zero:
        parts.append(f"{m.failure_classes} failed")
    if m.missing and not m.count_missing_rollouts_as_zero:
        parts.append(f"{m.missing} missing")
    hints = [
        flag
        for flag, on, count in (
            ("--count-failure-classes-as-zero", m.count_failure_classes_as_zero,
             m.failure_classes),
            ("--count-missing-rollouts-as-zero", m.count_missing_rollouts_as_zero,
             m.missing),
        )
        if count and not on
    ]  # fmt: skip
    for count, what in (
        (m.masked, "masked"),
        (m.unscored, "unscored"),
        (m.omitted, "omitted"),
        (m.other, "waiting for a grade"),
    ):
        if count:
            parts.append(f"{count} {what}")
    if not parts:
        return None
    line = "left out of the mean: " + ", ".join(parts)
    if hints:
        line += " (" + " or ".join(hints) + " counts them as zero)"
    return line


def _zeros_note(m: RewardMetrics) -> str:
    """Beside a figure the counting options changed: how many zeros it holds."""
    zeros = m.failure_classes_counted_as_zero + m.missing_counted_as_zero
    return f"; {_plural(zeros, 'rollout')} counted as zero" if zeros else ""


def pass_coverage(p: PassAtK, *, zeros: int = 0) -> str:
    """The tasks a pass@k covers, in words: ``56 of 75 tasks: the 19 others
    have fewer than 4 scored rollouts`` (``75 tasks`` when it covers them all).

    ``zeros``: the zeros the counting options added (then the values are
    "rollouts in the mean", not all of them scored).
    """
    if not p.tasks_left_out:
        return _plural(p.tasks, "task")
    values = "rollouts in the mean" if zeros else "scored rollouts"
    others = (
        "the other has" if p.tasks_left_out == 1
        else f"the {p.tasks_left_out} others have"
    )  # fmt: skip
    return f"{p.tasks} of {p.of_tasks} tasks: {others} fewer than {p.k} {values}"


def _pass_line(m: RewardMetrics) -> str:
    correct = f"correct: reward ≥ {m.correct_at:g}"
    zeros = m.failure_classes_counted_as_zero + m.missing_counted_as_zero
    if all(not p.tasks_left_out for p in m.pass_at_k):  # every task has every k
        figures = ", ".join(f"pass@{p.k} {p.value:.2f}" for p in m.pass_at_k)
        count = m.pass_at_k[0].tasks
        return f"{figures} ({correct}; {_plural(count, 'task')}{_zeros_note(m)})"
    # The ks that cover the same tasks share one note, after the last of them.
    groups: list[list[PassAtK]] = []
    for p in m.pass_at_k:
        if groups and groups[-1][0].tasks == p.tasks:
            groups[-1].append(p)
        else:
            groups.append([p])
    figures = ", ".join(
        ", ".join(f"pass@{p.k} {p.value:.2f}" for p in group)
        + f" ({pass_coverage(group[0], zeros=zeros)})"
        for group in groups
    )
    return f"{figures}; {correct}{_zeros_note(m)}"


def metrics_lines(m: RewardMetrics) -> list[str]:
    """The figures in words, for ``status`` and the report (first line: completion)."""
    if m.expected:
        share = 100 * m.complete / m.expected
        lines = [f"{m.complete} of {m.expected} complete ({share:.1f}%)"]
    else:
        lines = ["no rollouts expected"]
    lines.append(_mean_line(m))
    left_out = _left_out_line(m)
    if left_out is not None:
        lines.append(left_out)
    if m.pass_at_k:
        lines.append(_pass_line(m))
    if len(m.per_task) > 1:
        low = min(m.per_task, key=lambda t: (t.mean, t.task))
        high = max(m.per_task, key=lambda t: (t.mean, -t.task))
        lines.append(
            f"per task: {len(m.per_task)} tasks, means from {low.mean:.2f} "
            f"(task {low.task}) to {high.mean:.2f} (task {high.task}){_zeros_note(m)}"
        )
    return lines
