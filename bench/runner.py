"""Alternating rounds: each round measures both sides, the first side alternating."""

from __future__ import annotations

import shutil
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench.child import Failed, Measure, Pending, measure_in_child
from bench.context import Context, Data, Sample
from bench.sizes import Sizes
from bench.targets import Target

__all__ = ["Outcome", "Runner", "Side", "run_target"]

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


def _round(runner: Runner, outcome: Outcome, rnd: int) -> None:
    target = outcome.target
    order = [
        ("ours", target.ours, outcome.ours),
        ("baseline", target.baseline, outcome.baseline),
    ]
    if rnd % 2:
        order.reverse()  # alternate which side runs first, against drift
    got: dict[str, Sample] = {}
    for name, fn, side in order:
        if not side.active:
            continue
        sample = _keep(side, runner.measure(target, name, fn, rnd))
        if sample is not None:
            got[name] = sample
            runner.log(
                f"{target.id} round {rnd + 1} {name}: {sample.value:.6g} {target.unit}"
            )
        elif side.failure:
            runner.log(f"{target.id} {name} FAILED:\n{side.failure}")
    if len(got) == 2:
        outcome.ratios.append(got["ours"].value / got["baseline"].value)


def run_target(runner: Runner, target: Target) -> Outcome:
    """Every round of ``target``; a pending or failed side stops being measured."""
    outcome = Outcome(target, Side(), Side())
    for rnd in range(target.rounds(runner.sizes)):
        _round(runner, outcome, rnd)
    return outcome
