"""The registry of quality.md's performance targets (P-1..P-7).

A target names its two measurements (``ours`` and ``baseline``, each a
function of a :class:`Context` returning a :class:`Measured`), the datasets it
needs, and its threshold on the paired ratio ours / baseline. Adding a target
is one entry here; finishing a pending one is one function in ``pending.py``.
"""

from __future__ import annotations

from dataclasses import dataclass

from bench.appends import p1_baseline, p1_ours, p2_baseline, p2_ours
from bench.child import Measure
from bench.help_time import p6_baseline, p6_ours
from bench.pending import p3_ours, p4_ours, p5_baseline, p5_ours
from bench.recorder_rate import p7_baseline, p7_ours
from bench.replay_rate import p3_baseline
from bench.resume_time import p4_baseline
from bench.sizes import Sizes

__all__ = ["TARGETS", "Target", "select"]

RATE, SECONDS = "ev/s", "s"


@dataclass(frozen=True)
class Target:
    """One performance target: two measurements and a threshold on their ratio."""

    id: str
    what: str
    unit: str  # of both sides' values: RATE or SECONDS
    ours: Measure
    baseline: Measure
    threshold: float  # on the paired ratio ours / baseline
    at_least: bool  # True: ratio >= threshold; False: ratio <= threshold
    needs: tuple[str, ...] = ()  # fields of Data to prepare
    heavy: bool = False  # rounds from Sizes.resume_rounds
    rss_ratio_max: float | None = None  # ours peak RSS <= this x baseline's
    rss_max_mib: float | None = None  # ours peak RSS <= this

    def rounds(self, sizes: Sizes) -> int:
        """How many alternating rounds this target runs in a mode."""
        return sizes.resume_rounds if self.heavy else sizes.rounds

    def threshold_text(self) -> str:
        """The target as quality.md states it."""
        text = f"{'>=' if self.at_least else '<='} {self.threshold:g}x"
        if self.rss_ratio_max is not None:
            text += f"; RSS <= {self.rss_ratio_max:g}x"
        if self.rss_max_mib is not None:
            text += f"; RSS <= {self.rss_max_mib:g} MiB"
        return text


TARGETS: tuple[Target, ...] = (
    Target(
        id="P-1",
        what="Ledger.append, 1 durable event per call / raw 1 INSERT per FULL txn",
        unit=RATE,
        ours=p1_ours,
        baseline=p1_baseline,
        threshold=0.8,
        at_least=True,
        needs=("stream",),
    ),
    Target(
        id="P-2",
        what="append_many of 1,000 / raw executemany 1,000 per FULL txn",
        unit=RATE,
        ours=p2_ours,
        baseline=p2_baseline,
        threshold=0.5,
        at_least=True,
        needs=("stream",),
    ),
    Target(
        id="P-3",
        what="full replay into every projection / raw read + decode + count per key",
        unit=RATE,
        ours=p3_ours,
        baseline=p3_baseline,
        threshold=0.5,
        at_least=True,
        needs=("replay_log",),
        rss_max_mib=200,
    ),
    Target(
        id="P-4",
        what="resume planning of the run / the incumbent (August resume)",
        unit=SECONDS,
        ours=p4_ours,
        baseline=p4_baseline,
        threshold=0.1,
        at_least=False,
        needs=("resume_run",),
        heavy=True,
        rss_ratio_max=0.1,
    ),
    Target(
        id="P-5",
        what="resume with a current snapshot / full replay",
        unit=SECONDS,
        ours=p5_ours,
        baseline=p5_baseline,
        threshold=0.1,
        at_least=False,
        needs=("replay_log",),
    ),
    Target(
        id="P-6",
        what='rollout-ledger --help / python -c "import click"',
        unit=SECONDS,
        ours=p6_ours,
        baseline=p6_baseline,
        threshold=2.0,
        at_least=False,
    ),
    Target(
        id="P-7",
        what="AsyncRecorder, 256 tasks reserve + record ~1 KB rows / raw 1,000 per txn",
        unit=RATE,
        ours=p7_ours,
        baseline=p7_baseline,
        threshold=0.2,
        at_least=True,
        needs=("recorder_events",),
    ),
)


def select(only: str | None) -> tuple[Target, ...]:
    """The targets named in ``--only`` (comma-separated ids), else all of them."""
    if not only:
        return TARGETS
    wanted = [name.strip().upper() for name in only.split(",") if name.strip()]
    known = {t.id: t for t in TARGETS}
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise ValueError(
            f"unknown target {', '.join(unknown)}; known: {', '.join(known)}"
        )
    return tuple(t for t in TARGETS if t.id in wanted)
