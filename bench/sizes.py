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
)


def sizes_for(*, quick: bool, tiny: bool, rounds: int | None) -> Sizes:
    """The sizes of the mode asked for, with ``--rounds`` applied to every target."""
    chosen = TINY if tiny else QUICK if quick else FULL
    if rounds is None:
        return chosen
    return dataclasses.replace(chosen, rounds=rounds, resume_rounds=rounds)
