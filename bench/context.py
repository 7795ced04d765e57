"""What a measurement receives and returns; light, so measuring children stay lean."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from bench.sizes import Sizes

__all__ = ["Context", "Data", "Measured", "NotMeasured", "Sample"]


class NotMeasured(Exception):
    """A side not measurable yet; the message says what it needs."""


class Measured(NamedTuple):
    """One measurement: its value (in the target's unit) and a line of detail."""

    value: float
    detail: str = ""


class Sample(NamedTuple):
    """A measurement with the peak RSS of the child process that made it."""

    value: float
    rss_mib: float
    detail: str


@dataclass(frozen=True)
class Data:
    """The prepared datasets (``None``: not needed by the targets chosen)."""

    stream: Path | None = None  # P-1, P-2: encoded event bodies, one a line
    recorder_events: Path | None = None  # P-7 baseline: the same events as ours
    resume_run: Path | None = None  # P-4: OUT of a run sized like the fixtures, killed
    resume_closed: Path | None = None  # P-4: the same run after a clean close
    replay_log: Path | None = None  # P-3, P-5: OUT of a run of ~1M events
    ng07_run: Path | None = None  # NG07: OUT of 0.7.0-shaped rows, no ledger
    ng07_older: Path | None = None  # NG07: the same plan in older rows, no ledger


@dataclass(frozen=True)
class Context:
    """Everything one measurement needs: sizes, datasets, its own scratch folder."""

    sizes: Sizes
    data: Data
    scratch: Path
    round: int
    seed: int
