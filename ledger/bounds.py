"""The bounds every number from a user is checked against where it enters.

A number a person types (``extend-attempts N``, ``policy --set``, ``history
--since``, ``approve --attempt``) or a file holds (approvals, policy files,
rows) is checked here, at the edge, and refused with the bound in the message;
nothing past the edge ever sees an integer it cannot store, encode or add.
"""

from __future__ import annotations

from typing import Final

from ledger.errors import ConfigError

__all__ = [
    "MAX_ATTEMPTS",
    "MAX_ATTEMPT_INDEX",
    "MAX_INDEX",
    "MAX_SEQ",
    "attempt_key",
    "bounded",
    "out_of_bounds",
    "rollout_index",
    "task_index",
]

#: Attempts per rollout: the saved cap, an extension's total, the policy's
#: ``max_free_attempts`` and an attempt's index. No collection samples one
#: rollout a million times, and a million keeps ``cap + extension`` (and every
#: count of attempts) far inside the 64-bit integers SQLite and msgspec store:
#: a larger value is a typo, and once recorded it broke every later replay.
MAX_ATTEMPTS: Final = 1_000_000

#: The largest attempt index: a rollout's cap is its saved cap plus the
#: extension in force, each at most ``MAX_ATTEMPTS``, and attempts count from 0.
MAX_ATTEMPT_INDEX: Final = 2 * MAX_ATTEMPTS - 1

#: A task or rollout index, and a seq: what SQLite's INTEGER and msgspec's
#: encoder hold (a signed 64-bit integer). Anything larger cannot be stored.
MAX_INDEX: Final = 2**63 - 1
MAX_SEQ: Final = 2**63 - 1


def out_of_bounds(value: object, low: int, high: int) -> bool:
    """Whether ``value`` is not an integer (bools excluded) from ``low`` to ``high``."""
    if isinstance(value, bool) or not isinstance(value, int):
        return True
    return not low <= value <= high


def bounded(value: object, *, low: int, high: int, what: str, key: str) -> int:
    """``value`` when it is an integer from ``low`` to ``high``, else ``ConfigError``.

    ``what`` names the entry point and what it takes, as the user wrote it:
    ``"extend-attempts takes a total"`` gives "extend-attempts takes a total
    from 1 to 1000000; got 99999999999999999999".
    """
    if out_of_bounds(value, low, high):
        raise ConfigError(f"{what} from {low} to {high}; got {value!r}", key=key)
    return value  # type: ignore[return-value]  # checked: an int in range


def task_index(value: object) -> int:
    """A task index a user names (``--task``), within its bound."""
    return bounded(value, low=0, high=MAX_INDEX, what="--task takes a task", key="task")


def rollout_index(value: object) -> int:
    """A rollout index a user names (``--rollout``), within its bound."""
    return bounded(
        value,
        low=0,
        high=MAX_INDEX,
        what="--rollout takes a rollout index",
        key="rollout",
    )


def attempt_key(key: tuple[int, int, int]) -> tuple[int, int, int]:
    """An attempt a user names (task, rollout, attempt), each within its bound."""
    task, rollout, attempt = key
    return (
        task_index(task),
        rollout_index(rollout),
        bounded(
            attempt,
            low=0,
            high=MAX_ATTEMPT_INDEX,
            what="--attempt takes an attempt index",
            key="attempt",
        ),
    )
