"""Which rollout a collector's row answers: its ``_ng_rollout_id`` first (issue 25).

A plan file gives every row an identity the collector carries back: the
materialized row's own ``_ng_rollout_id`` (ROW-24), else ``"<task>-<rollout>"``,
the form NeMo Gym 0.7.0 derives itself, so its model-call capture keys
(``<id>-a<N>``) are the ones its own resume would use. NeMo Gym 0.7.0 keeps an
input row's ``_ng_task_index`` but numbers ``_ng_rollout_index`` per task from
0 in the file it reads, and copies ``_ng_attempt_index`` and
``_ng_rollout_id`` to its result verbatim. A row that carries an id is
therefore recorded as the rollout the id names, whatever rollout number the
collector wrote; the number it wrote is kept on the row under
``_ng_collector_indices`` when it differed, for an auditor.

An id never guesses: one that names no materialized row, that two rows could
claim (an explicit id spelling another row's ``"<task>-<rollout>"``), or whose
rollout lies in another task than the row's ``_ng_task_index`` is a
``RowError`` naming both. A row without an id is matched by its numbers, as
before (the collector keeps the plan's numbers: the wrapping contract).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

from ledger.bounds import MAX_ATTEMPT_INDEX, MAX_INDEX, out_of_bounds
from ledger.errors import RowError
from ledger.rows.values import brief
from ledger.run.write_index import WriteIndex

__all__ = ["COLLECTOR_INDICES", "ROLLOUT_ID", "derived_rollout_id", "identify_row"]

ROLLOUT_ID = "_ng_rollout_id"
#: Where a renumbered row keeps the task and rollout its collector wrote.
COLLECTOR_INDICES = "_ng_collector_indices"


def derived_rollout_id(task: int, rollout: int) -> str:
    """The id of a materialized row without its own: ``"<task>-<rollout>"``."""
    return f"{task}-{rollout}"


def _derived_key(rollout_id: str) -> tuple[int, int] | None:
    task, dash, rollout = rollout_id.partition("-")
    if not dash or not task.isdigit() or not rollout.isdigit():
        return None
    key = (int(task), int(rollout))
    return key if derived_rollout_id(*key) == rollout_id else None


def key_of_rollout_id(index: WriteIndex, rollout_id: str) -> tuple[int, int]:
    """The ``(task, rollout)`` whose materialized row ``rollout_id`` names.

    Raises:
        RowError: no materialized row has that id, or two could.
    """
    explicit = index.explicit_ids.get(rollout_id)
    derived = _derived_key(rollout_id)
    if derived is not None and (
        derived not in index.keys or derived in index.own_id_keys
    ):
        derived = None  # no such row, or that row has an id of its own
    if explicit is not None and derived is not None and explicit != derived:
        raise RowError(
            f"the row's {ROLLOUT_ID} {rollout_id!r} could name two rollouts: "
            f"task {explicit[0]}, rollout {explicit[1]} (its own id) and task "
            f"{derived[0]}, rollout {derived[1]}; give the materialized rows ids "
            "that do not spell another row's task and rollout",
            key=ROLLOUT_ID,
        )
    key = explicit or derived
    if key is None:
        raise RowError(
            f"the row's {ROLLOUT_ID} {brief(rollout_id)} names no rollout of this "
            "run's materialized rows",
            key=ROLLOUT_ID,
        )
    return key


def _index(row: Mapping[str, Any], key: str) -> int | None:
    """The row's ``key`` when it is an index in bounds; ``None`` when absent.

    An index out of its bounds is refused here, as the recorder would refuse
    it, before any number of the row is replaced.
    """
    value = row.get(key)
    if value is None:
        return None
    high = MAX_ATTEMPT_INDEX if key == "_ng_attempt_index" else MAX_INDEX
    if out_of_bounds(value, 0, high):
        raise RowError(
            f"the row's {key} must be an integer from 0 to {high} "
            f"(found {brief(value)})",
            key=key,
        )
    return int(value)


def identify_row(index: WriteIndex, row: MutableMapping[str, Any]) -> bool:
    """Set ``row``'s task and rollout to those its ``_ng_rollout_id`` names.

    Returns whether the row carried an id. A row renumbered by its collector
    keeps the numbers it came with under ``_ng_collector_indices``; a row
    without an id is left as it is (its numbers name it).

    Raises:
        RowError: the id is not a string, names no materialized row (or two),
            or names a rollout of another task than the row's task index.
    """
    rollout_id = row.get(ROLLOUT_ID)
    if rollout_id is None:
        return False
    if not isinstance(rollout_id, str):
        raise RowError(
            f"the row's {ROLLOUT_ID} {brief(rollout_id)} must be a string",
            key=ROLLOUT_ID,
        )
    wrote = (_index(row, "_ng_task_index"), _index(row, "_ng_rollout_index"))
    _index(row, "_ng_attempt_index")
    task, rollout = key_of_rollout_id(index, rollout_id)
    if wrote[0] is not None and wrote[0] != task:
        raise RowError(
            f"the row names task {wrote[0]} but its {ROLLOUT_ID} {rollout_id!r} is "
            f"rollout {rollout} of task {task}; a row is recorded only as the "
            "rollout it answers",
            key="_ng_task_index",
        )
    if wrote != (task, rollout):
        row.setdefault(COLLECTOR_INDICES, [wrote[0], wrote[1]])
        row["_ng_task_index"] = task
        row["_ng_rollout_index"] = rollout
    return True
