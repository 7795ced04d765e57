"""The numbers people report (issue 16): reward figures of the selected results.

``reward_metrics`` reads the decided scores, which are the ``reward`` values
``selected_results`` writes (CLI-12): the score of every ``complete`` rollout
that has one. Nothing else enters the mean unless one of NeMo Gym 0.7.0's two
counting options (its ``_aggregate_metrics.json``, reference 1.10) says so:

- ``count_failure_classes_as_zero``: a rollout that is not complete (nor
  omitted) and whose newest outcome is a failure row (the sidecar's, in NeMo
  Gym's words "the last sidecar row of a key with no success") enters as 0.
  NeMo Gym takes a list of classes; here the option covers every class.
- ``count_missing_rollouts_as_zero``: a rollout with no recorded outcome at
  all (no row in either file) enters as 0; a rollout with a failure row is
  never "missing".

Masked results (ROW-41, ROW-42), unscored results (a complete rollout with no
numeric reward) and omissions, accepted or held (REC-35), never enter the
mean, whatever the options.

The figures: the mean, its standard error (sample standard deviation over
``sqrt(n)``, none below two values), a 95% Student's t interval, per-task
means, and pass@k where a task has more than one value: the unbiased estimator
``1 - C(n - c, k) / C(n, k)`` (n values of the task, c of them correct)
averaged over the tasks with at least k values. A value is *correct* when it
is at least ``correct_at`` (1.0 by default: the full reward of a 0/1 verifier).
"""

from __future__ import annotations

from typing import Any

import msgspec

from ledger import Ledger
from projections.decisions.rules import Decision, decide_all
from projections.figures.sums import (
    Figures,
    ValueSums,
    add_values,
    pass_at_k,
    summary,
    t_quantile_975,
    task_figure,
    unpack_scores,
    updated,
)
from projections.fold.state import MASKED, RolloutState, RunState, Settled

__all__ = [
    "PassAtK",
    "RewardMetrics",
    "TaskMean",
    "figure_slot",
    "metrics_of",
    "pass_at_k",
    "reward_metrics",
    "t_quantile_975",
    "unfinished_kind",
]

Decisions = dict[tuple[int, int], Decision]

_FIGURES = msgspec.msgpack.Decoder(Figures)


class TaskMean(msgspec.Struct, frozen=True):
    """One task's mean over the values that entered the figures."""

    task: int
    rollouts: int
    mean: float


class PassAtK(msgspec.Struct, frozen=True):
    """pass@k averaged over the ``tasks`` that have at least k values.

    ``of_tasks``: the tasks with a value at all (pass@1's); the
    ``tasks_left_out`` others have fewer than k values, so pass@k says nothing
    of them.
    """

    k: int
    value: float
    tasks: int
    of_tasks: int

    @property
    def tasks_left_out(self) -> int:
        """The tasks with a value but fewer than k: not in this pass@k."""
        return self.of_tasks - self.tasks

    def to_dict(self) -> dict[str, Any]:
        """``{k, value, tasks, of_tasks, tasks_left_out}`` (``--json``)."""
        return {
            "k": self.k,
            "value": self.value,
            "tasks": self.tasks,
            "of_tasks": self.of_tasks,
            "tasks_left_out": self.tasks_left_out,
        }


class RewardMetrics(msgspec.Struct, frozen=True, kw_only=True):
    """The reward figures of a run's selected results, and what they cover.

    The counts add up to ``expected``: ``scored + unscored`` are the complete
    rollouts; ``omitted`` (accepted, or an omission held for an operator),
    ``masked``, ``failure_classes``, ``missing`` and ``other`` (not complete,
    the newest outcome an unmasked result row, e.g. one waiting for a
    re-judgment) are not (see ``unfinished_kind``).
    """

    as_of_seq: int
    expected: int
    complete: int
    scored: int
    unscored: int
    omitted: int
    masked: int
    failure_classes: int
    missing: int
    other: int
    count_failure_classes_as_zero: bool
    count_missing_rollouts_as_zero: bool
    #: How many zeros each option added (0 when the option is off).
    failure_classes_counted_as_zero: int
    missing_counted_as_zero: int
    #: The number of values in the figures: scored plus the zeros counted.
    n: int
    mean: float | None
    std: float | None
    standard_error: float | None
    interval_95: tuple[float, float] | None
    minimum: float | None
    maximum: float | None
    median: float | None
    per_task: tuple[TaskMean, ...]
    correct_at: float
    pass_at_k: tuple[PassAtK, ...]

    @property
    def complete_fraction(self) -> float | None:
        """Complete rollouts over expected ones; ``None`` for an empty run."""
        return self.complete / self.expected if self.expected else None

    def counting(self) -> dict[str, Any]:
        """The two options and the zeros each added, as stated beside a figure."""
        return {
            "count_failure_classes_as_zero": self.count_failure_classes_as_zero,
            "failure_classes_counted_as_zero": self.failure_classes_counted_as_zero,
            "count_missing_rollouts_as_zero": self.count_missing_rollouts_as_zero,
            "missing_counted_as_zero": self.missing_counted_as_zero,
        }

    def to_dict(self) -> dict[str, Any]:
        """The plain JSON value of ``status --json``'s ``metrics``.

        Each figure block carries ``counting``: the two options and the zeros
        they added, beside the figures they change.
        """
        counting = self.counting()
        return {
            "schema_version": 1,
            "as_of_seq": self.as_of_seq,
            "expected": self.expected,
            "complete": self.complete,
            "complete_fraction": self.complete_fraction,
            "counts": {
                "scored": self.scored,
                "unscored": self.unscored,
                "omitted": self.omitted,
                "masked": self.masked,
                "failure_classes": self.failure_classes,
                "missing": self.missing,
                "other": self.other,
            },
            "reward": {
                "rollouts": self.n,
                "mean": self.mean,
                "std": self.std,
                "standard_error": self.standard_error,
                "interval_95": (
                    None if self.interval_95 is None else list(self.interval_95)
                ),
                "min": self.minimum,
                "max": self.maximum,
                "median": self.median,
                "counting": counting,
            },
            "per_task": {
                "tasks": [msgspec.to_builtins(t) for t in self.per_task],
                "counting": counting,
            },
            "pass_at_k": {
                "correct_when": f"reward >= {self.correct_at:g}",
                "values": [p.to_dict() for p in self.pass_at_k],
                "counting": counting,
            },
        }


class _Sorted:
    """Rollouts sorted by what they add to the figures."""

    def __init__(self) -> None:
        self.values: dict[int, list[float]] = {}
        self.scored = self.unscored = self.omitted = self.masked = 0
        self.failure_classes = self.missing = self.other = 0
        self.failure_zeros = self.missing_zeros = 0

    def add(self, task: int, value: float) -> None:
        self.values.setdefault(task, []).append(value)

    def start(
        self,
        settled: Settled,
        *,
        failures_as_zero: bool,
        missing_as_zero: bool,
        scores: bool = True,
    ) -> None:
        """What the rollouts a state leaves out add (P-8), sorted when they settled.

        ``scores`` false: their counts only (their figures were made apart).
        """
        self.scored, self.unscored = settled.scored, settled.unscored
        self.omitted, self.masked = settled.omitted, settled.metric_masked
        self.failure_classes, self.missing = settled.failure_classes, settled.missing
        self.other = settled.other
        if scores and settled.scores:
            tasks, values = unpack_scores(settled.scores)
            for task, score in zip(tasks, values, strict=True):
                self.add(task, score)
        if failures_as_zero:
            self.failure_zeros = len(settled.failure_tasks)
            for task in settled.failure_tasks:
                self.add(task, 0.0)
        if missing_as_zero:
            self.missing_zeros = len(settled.missing_tasks)
            for task in settled.missing_tasks:
                self.add(task, 0.0)

    def sort(
        self,
        task: int,
        rollout: RolloutState,
        decision: Decision,
        *,
        failures_as_zero: bool,
        missing_as_zero: bool,
    ) -> None:
        slot = figure_slot(rollout, decision)
        setattr(self, slot, getattr(self, slot) + 1)
        if slot == "scored":
            self.add(task, decision.score or 0.0)
        elif slot == "missing" and missing_as_zero:
            self.missing_zeros += 1
            self.add(task, 0.0)
        elif slot == "failure_classes" and failures_as_zero:
            self.failure_zeros += 1
            self.add(task, 0.0)


def figure_slot(rollout: RolloutState, decision: Decision) -> str:
    """Where ``rollout`` (decided ``decision``) counts in the reward figures.

    One of ``scored``, ``unscored``, ``omitted``, ``missing``,
    ``failure_classes``, ``masked`` and ``other``: each a counter's name.

    A complete rollout is scored (its score enters the mean) or unscored; an
    omitted one is omitted; any other is counted by ``unfinished_kind``.
    """
    if decision.value == "complete":
        return "unscored" if decision.score is None else "scored"
    if decision.value == "omitted":
        return "omitted"
    return unfinished_kind(rollout)


def unfinished_kind(rollout: RolloutState) -> str:
    """Where a rollout that is neither complete nor omitted is counted.

    ``missing``: no outcome recorded (no row in either file); ``failure_classes``:
    its newest outcome is a failure row of the sidecar; ``omitted``: an
    omission not (yet) accepted, which no option scores (REC-35: no score is
    ever invented for an omitted rollout); ``masked``: a masked result;
    ``other``: an unmasked result row (one waiting for a re-judgment, say).
    """
    newest = next((a for a in rollout.newest_first() if a.has_outcome), None)
    if newest is None:
        return "missing"
    if newest.row_kind == "failure":
        return "failure_classes"
    if newest.row_kind == "omission":
        return "omitted"
    return "masked" if newest.flags & MASKED else "other"


def metrics_of(
    state: RunState,
    decisions: Decisions,
    *,
    count_failure_classes_as_zero: bool = False,
    count_missing_rollouts_as_zero: bool = False,
    correct_at: float = 1.0,
) -> RewardMetrics:
    """The figures from a state and its decisions (``status`` decides once).

    On a state restored from the snapshot of what is left (P-8), the settled
    rollouts' figures were made when they settled (``Settled.figures``); only
    the tasks the rollouts held add values to are figured again. Under a
    counting option or another ``correct_at`` every settled score is read.
    """
    settled = state.settled
    options = count_failure_classes_as_zero or count_missing_rollouts_as_zero
    made = None
    if settled is not None and not options and correct_at == 1.0 and settled.figures:
        made = _FIGURES.decode(settled.figures)
    found = _Sorted()
    if settled is not None:
        found.start(
            settled,
            failures_as_zero=count_failure_classes_as_zero,
            missing_as_zero=count_missing_rollouts_as_zero,
            scores=made is None,
        )
    for (task, index), rollout in state.ordered_rollouts():
        found.sort(
            task,
            rollout,
            decisions[task, index],
            failures_as_zero=count_failure_classes_as_zero,
            missing_as_zero=count_missing_rollouts_as_zero,
        )
    if made is not None and settled is not None:
        figures = made
        if found.values:  # their tasks' settled values, then theirs
            scores = unpack_scores(settled.scores)
            figures = updated(made, scores, found.values, correct_at)
    else:
        figures = Figures(
            add_values(ValueSums(), (v for vs in found.values.values() for v in vs)),
            [task_figure(t, v, correct_at) for t, v in sorted(found.values.items())],
        )
    parts = summary(figures)
    return RewardMetrics(
        as_of_seq=state.as_of_seq,
        expected=state.expected,
        complete=found.scored + found.unscored,
        scored=found.scored,
        unscored=found.unscored,
        omitted=found.omitted,
        masked=found.masked,
        failure_classes=found.failure_classes,
        missing=found.missing,
        other=found.other,
        count_failure_classes_as_zero=count_failure_classes_as_zero,
        count_missing_rollouts_as_zero=count_missing_rollouts_as_zero,
        failure_classes_counted_as_zero=found.failure_zeros,
        missing_counted_as_zero=found.missing_zeros,
        n=parts["n"],
        mean=parts["mean"],
        std=parts["std"],
        standard_error=parts["standard_error"],
        interval_95=parts["interval_95"],
        minimum=parts["minimum"],
        maximum=parts["maximum"],
        median=parts["median"],
        per_task=tuple(TaskMean(*entry) for entry in parts["per_task"]),
        correct_at=correct_at,
        pass_at_k=tuple(PassAtK(*entry) for entry in parts["pass_at_k"]),
    )


def reward_metrics(
    ledger: Ledger,
    state: RunState,
    *,
    count_failure_classes_as_zero: bool = False,
    count_missing_rollouts_as_zero: bool = False,
    correct_at: float = 1.0,
    decisions: Decisions | None = None,
) -> RewardMetrics:
    """The reward figures of ``state``'s selected results (issue 16).

    ``ledger`` is the run ``state`` was replayed from; the figures need no row
    read (a decided score is the ``reward`` ``selected_results`` writes).
    ``decisions`` may be passed when already decided.
    """
    del ledger  # the state holds what the figures read
    decisions = decide_all(state) if decisions is None else decisions
    return metrics_of(
        state,
        decisions,
        count_failure_classes_as_zero=count_failure_classes_as_zero,
        count_missing_rollouts_as_zero=count_missing_rollouts_as_zero,
        correct_at=correct_at,
    )
