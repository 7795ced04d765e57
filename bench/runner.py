"""Alternating rounds: each round measures both sides, the first side alternating.

Targets of one group share a baseline: each round measures it once and every
member's own side, in an order that rotates from round to round, and each
member's ratio pairs its side with that round's baseline.
"""

from __future__ import annotations

import shutil
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.child import Failed, Measure, Pending, measure_in_child
from bench.context import Context, Data, Sample
from bench.sizes import Sizes
from bench.targets import Target

__all__ = ["Outcome", "Runner", "Side", "run_target", "run_targets"]

Log = Callable[[str], None]


@dataclass
class Side:
    """The samples of one side of a target, or why it has none."""

    samples: list[Sample] = field(default_factory=list)
    pending: str | None = None
    failure: str | None = None

    @property
    def active(self) -> bool:
        """Whether this side is still measured."""
        return self.pending is None and self.failure is None

    def values(self) -> list[float]:
        """The measured values, in round order."""
        return [s.value for s in self.samples]

    def peak_rss(self) -> float | None:
        """The largest peak RSS of any round, in MiB."""
        return max((s.rss_mib for s in self.samples), default=None)


@dataclass
class Outcome:
    """A target's two sides and the paired ratio of every round."""

    target: Target
    ours: Side
    baseline: Side
    ratios: list[float] = field(default_factory=list)

    def median_ratio(self) -> float | None:
        """The median of the paired per-round ratios ours / baseline."""
        return statistics.median(self.ratios) if self.ratios else None


@dataclass(frozen=True)
class Runner:
    """What every measurement of one harness run shares."""

    sizes: Sizes
    data: Data
    workdir: Path
    seed: int
    log: Log

    def measure(
        self, target: Target, name: str, fn: Measure, rnd: int
    ) -> Sample | Pending | Failed:
        """One side of one round, in a fresh child with its own scratch folder."""
        scratch = self.workdir / "scratch" / f"{target.id}-{name}-{rnd}"
        scratch.mkdir(parents=True, exist_ok=True)
        try:
            ctx = Context(self.sizes, self.data, scratch, rnd, self.seed)
            return measure_in_child(fn, ctx)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def _keep(side: Side, result: Sample | Pending | Failed) -> Sample | None:
    if isinstance(result, Pending):
        side.pending = str(result)
    elif isinstance(result, Failed):
        side.failure = str(result)
    elif isinstance(result, Sample):
        side.samples.append(result)
        return result
    return None


def _round(runner: Runner, outcomes: list[Outcome], rnd: int) -> None:
    # outcomes share outcomes[0].baseline (a group) or there is one of them.
    lead = outcomes[0]
    order = [(lead.target, "baseline", lead.target.baseline, lead.baseline)]
    order += [(o.target, "ours", o.target.ours, o.ours) for o in outcomes]
    if len(order) == 2:
        order = order[::-1] if rnd % 2 == 0 else order  # ours first in round 1
    else:
        shift = rnd % len(order)  # rotate which side runs first, against drift
        order = order[shift:] + order[:shift]
    got: dict[tuple[str, str], Sample] = {}
    for target, name, fn, side in order:
        if not side.active:
            continue
        sample = _keep(side, runner.measure(target, name, fn, rnd))
        if sample is not None:
            got[target.id, name] = sample
            runner.log(
                f"{target.id} round {rnd + 1} {name}: {sample.value:.6g} {target.unit}"
            )
        elif side.failure:
            runner.log(f"{target.id} {name} FAILED:\n{side.failure}")
    base = got.get((lead.target.id, "baseline"))
    for outcome in outcomes:
        ours = got.get((outcome.target.id, "ours"))
        if ours is not None and base is not None:
            outcome.ratios.append(ours.value / base.value)


def run_target(runner: Runner, target: Target) -> Outcome:
    """Every round of ``target``; a pending or failed side stops being measured."""
    return _run_group(runner, [target])[0]


def _run_group(runner: Runner, targets: list[Target]) -> list[Outcome]:
    baseline = Side()  # one baseline, shared by the group's outcomes
    outcomes = [Outcome(target, Side(), baseline) for target in targets]
    for rnd in range(targets[0].rounds(runner.sizes)):
        _round(runner, outcomes, rnd)
    return outcomes


def run_targets(runner: Runner, targets: Sequence[Target]) -> list[Outcome]:
    """Every target's rounds, a group's members together; in ``targets``' order."""
    done: dict[str, Outcome] = {}
    for target in targets:
        if target.id in done:
            continue
        members = [
            t for t in targets if target.group is not None and t.group == target.group
        ] or [target]
        for outcome in _run_group(runner, members):
            done[outcome.target.id] = outcome
    return [done[target.id] for target in targets]
