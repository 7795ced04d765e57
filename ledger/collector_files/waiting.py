"""Rows a collector appended without the ledger, waiting to be adopted (REC-86).

NeMo Gym's own ``--resume`` keeps writing an imported run's files: its rows
carry no ``_ng_run_id``, so a writer's open cannot take them as outcomes of
attempts this run released (EV-12). They are not damage: ``rollout-ledger
import OUT`` adopts them. Readers name them, with that command, and a writer's
open refuses with it rather than with a dead end.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import msgspec

__all__ = [
    "ADOPT",
    "Waiting",
    "adopt_advice",
    "group_waiting",
    "waiting_in",
    "without_ledger",
]

#: The pending-repair kind of such a row (``PendingRepair.what``, ``--json``).
ADOPT = "row written without the ledger"

_DECODER = msgspec.json.Decoder()


def without_ledger(data: bytes) -> bool:
    """Whether a line is a keyed JSON row that no ledger stamped (no run id)."""
    try:
        row = _DECODER.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return False
    if not isinstance(row, dict) or row.get("_ng_run_id") is not None:
        return False
    keys = (row.get("_ng_task_index"), row.get("_ng_rollout_index"))
    return all(isinstance(k, int) and not isinstance(k, bool) for k in keys)


@dataclass(frozen=True)
class Waiting:
    """The rows of one file waiting to be adopted: how many, from which line."""

    file: str
    rows: int
    first_line: int

    def __str__(self) -> str:
        plural = "row" if self.rows == 1 else "rows"
        return f"{self.file}: {self.rows} {plural} from line {self.first_line}"


def group_waiting(found: Iterable[tuple[str, int, str]]) -> tuple[Waiting, ...]:
    """``(file, line, what)`` of pending repairs, the waiting rows per file."""
    counts: dict[str, list[int]] = {}
    for file, line, what in found:
        if what == ADOPT:
            counts.setdefault(file, []).append(line)
    return tuple(Waiting(f, len(lines), min(lines)) for f, lines in counts.items())


def waiting_in(
    tails: Iterable[tuple[str, int, Sequence[bytes]]],
) -> tuple[Waiting, ...]:
    """``(file, first line, lines)`` past the recorded ends: the waiting rows."""
    return group_waiting(
        (file, first + n, ADOPT if without_ledger(data) else "")
        for file, first, lines in tails
        for n, data in enumerate(lines)
    )


def adopt_advice(out: str, waiting: Iterable[Waiting]) -> str:
    """What waits and the command that adopts it, in plain words."""
    found = list(waiting)
    total = sum(w.rows for w in found)
    plural = "row was" if total == 1 else "rows were"
    return (
        f"{total} {plural} appended to the run's files without the ledger (by "
        f"NeMo Gym's own --resume, for example) and {'is' if total == 1 else 'are'} "
        f"not recorded yet ({'; '.join(str(w) for w in found)}); adopt "
        f"{'it' if total == 1 else 'them'} with `rollout-ledger import {out}`"
    )
