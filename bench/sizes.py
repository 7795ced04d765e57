"""How much work each mode does (full, quick and the hidden tiny mode for tests)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

__all__ = ["FULL", "QUICK", "TINY", "Sizes", "sizes_for"]

#: P-2, P-7 baseline: the group-commit size of the spec.
GROUP = 1000
#: P-7: concurrent asyncio tasks.
CONCURRENCY = 256


@dataclass(frozen=True)
class Sizes:
    """The amount of work of one mode."""

    mode: str
    rounds: int
    single_appends: int  # P-1: events appended one per transaction
    group_batches: int  # P-2: batches of GROUP events
    recorder_rollouts: int  # P-7: rows each reserved and recorded
    help_reps: int  # P-6: invocations per round
    resume_rollouts: int  # P-4: rollouts of the run resumed (~2.5 attempts each)
    resume_rounds: int  # P-4: rounds (the incumbent reads gigabytes in full mode)
    replay_events: int  # P-3, P-5: events of the replayed log
    curve_sizes: tuple[int, ...]  # CURVE: rollouts of each run
    curve_rounds: int  # CURVE: rounds below 1M rollouts
    curve_rounds_1m: int  # CURVE: rounds at 1M and more (0.7.0 takes ~200 s)


FULL = Sizes(
    mode="full",
    rounds=5,
    single_appends=3000,
    group_batches=100,
    recorder_rollouts=20_000,
    help_reps=5,
    resume_rollouts=100_000,
    resume_rounds=3,
    replay_events=1_000_000,
    curve_sizes=(10_000, 100_000, 1_000_000),
    curve_rounds=3,
    curve_rounds_1m=2,
)
QUICK = Sizes(
    mode="quick",
    rounds=3,
    single_appends=1000,
    group_batches=20,
    recorder_rollouts=5000,
    help_reps=3,
    resume_rollouts=10_000,
    resume_rounds=3,
    replay_events=100_000,
    curve_sizes=(10_000,),
    curve_rounds=3,
    curve_rounds_1m=1,
)
TINY = Sizes(
    mode="tiny",
    rounds=2,
    single_appends=20,
    group_batches=1,
    recorder_rollouts=300,
    help_reps=1,
    resume_rollouts=40,
    resume_rounds=2,
    replay_events=400,
    curve_sizes=(40,),
    curve_rounds=2,
    curve_rounds_1m=1,
)


def sizes_for(
    *,
    quick: bool,
    tiny: bool,
    rounds: int | None,
    curve_sizes: tuple[int, ...] | None = None,
    curve_rounds: int | None = None,
) -> Sizes:
    """The sizes of the mode asked for, with ``--rounds`` applied to every target.

    ``curve_rounds`` (else ``rounds``) applies to every size of the curve.
    """
    chosen = TINY if tiny else QUICK if quick else FULL
    if curve_sizes:
        chosen = dataclasses.replace(chosen, curve_sizes=curve_sizes)
    if rounds is not None:
        chosen = dataclasses.replace(chosen, rounds=rounds, resume_rounds=rounds)
    curve = curve_rounds if curve_rounds is not None else rounds
    if curve is not None:
        chosen = dataclasses.replace(chosen, curve_rounds=curve, curve_rounds_1m=curve)
    return chosen
