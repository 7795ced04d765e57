"""A deterministic run: rollouts, their attempts and outcomes, dispatched in hops.

Each rollout draws outcomes until one closes it: a result (``ok`` or a masked
result), a terminal failure, or the incumbent's cap of sidecar rows. A killed
attempt (``_ng_no_persist``) leaves no row. Hop ``k`` releases attempt ``k`` of
every rollout that has one. The run is cut near its end, as by a crash: some
attempts are reserved but never recorded, and the rest never start, so a resume
has work to plan (P-4).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["Attempt", "Plan", "make_plan"]

OK, MASKED, FAIL, TERMINAL, KILLED = "ok", "masked", "fail", "terminal", "killed"
_CLOSING = frozenset({OK, MASKED, TERMINAL})
# Tuned so a rollout takes ~2.5 attempts on average (P-4: 100k rollouts, ~250k
# attempts).
_OUTCOMES = (OK, MASKED, FAIL, TERMINAL, KILLED)
_WEIGHTS = (16, 3, 67, 2, 12)
#: NEMO_GYM_MAX_ROLLOUT_ATTEMPTS' default (nemo_gym_formats.md, section 4, step 6).
CAP = 3
_MAX_KILLS = 2
REPEATS = 4
RECORDED_SHARE = 0.96
IN_FLIGHT = 64


@dataclass(frozen=True)
class Attempt:
    """One attempt: the rollout's position in the plan, its attempt and outcome."""

    rollout: int
    attempt: int
    outcome: str


@dataclass(frozen=True)
class Plan:
    """Every rollout's outcomes, and where the crash cuts the run."""

    outcomes: tuple[tuple[str, ...], ...]
    reserved: int  # attempts reserved before the crash
    recorded: int  # of those, attempts recorded before the crash

    def key(self, rollout: int) -> tuple[int, int]:
        """``(task, rollout)`` of the plan's ``rollout``-th rollout."""
        return divmod(rollout, REPEATS)

    @property
    def attempts(self) -> int:
        """Attempts the plan would make without the crash."""
        return sum(len(o) for o in self.outcomes)

    def hops(self) -> Iterator[list[Attempt]]:
        """The attempts of each hop, in order, up to the crash."""
        left = self.reserved
        hop = 0
        while left > 0:
            batch = [
                Attempt(i, hop, o[hop])
                for i, o in enumerate(self.outcomes)
                if len(o) > hop
            ]
            yield batch[:left]
            left -= len(batch)
            hop += 1


def _outcomes(rng: random.Random) -> tuple[str, ...]:
    drawn: list[str] = []
    fails = kills = 0
    while True:
        outcome = rng.choices(_OUTCOMES, _WEIGHTS)[0]
        drawn.append(outcome)
        fails += outcome == FAIL
        kills += outcome == KILLED
        if outcome in _CLOSING or fails >= CAP or kills >= _MAX_KILLS:
            return tuple(drawn)


def make_plan(rollouts: int, *, seed: int) -> Plan:
    """The plan of a run of ``rollouts`` rollouts (deterministic for a seed)."""
    rng = random.Random(seed)
    outcomes = tuple(_outcomes(rng) for _ in range(rollouts))
    total = sum(len(o) for o in outcomes)
    recorded = int(total * RECORDED_SHARE)
    reserved = min(total, recorded + IN_FLIGHT)
    return Plan(outcomes, reserved=reserved, recorded=recorded)
