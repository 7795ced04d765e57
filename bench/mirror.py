"""What the recorder writes for a row, computed without it (the same bytes).

Building a 100k-rollout run through ``reserve_many``/``record_many`` is
quadratic today (``RESULTS.md``, "Notes"), so the harness
builds its runs with these functions and ``Ledger.append_many``: the rows and
events are byte-identical to the recorder's, which ``tests/test_bench.py``
checks against a run built through the public API.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from bench.scenario import FAIL, KILLED, MASKED, TERMINAL
from ledger import row_facts
from ledger.events import (
    AttemptReserved,
    Event,
    FailureSaved,
    Location,
    ResultSaved,
)
from ledger.jsonl import encode_row

__all__ = ["Ends", "Saved", "outcome_row", "reserved_event", "saved_event"]

# Failure classes cycled over failed attempts (nemo_gym_formats.md, 2.3).
_FAILURE_CLASSES = ("agent_run_error", "timeout_exceeded", "judge_failed")


@dataclass
class Ends:
    """Where each collector file ends: ``{name: [offset, lines]}``."""

    files: dict[str, list[int]] = field(default_factory=dict)

    def locate(self, name: str, data: bytes) -> tuple[Location, int]:
        """The location of ``data`` appended to ``name``, and its 0-based line."""
        end = self.files.setdefault(name, [0, 0])
        location = Location(
            file=name,
            offset=end[0],
            length=len(data),
            row_sha256=hashlib.sha256(data).hexdigest(),
        )
        line = end[1]
        end[0] += len(data)
        end[1] += 1
        return location, line


@dataclass(frozen=True)
class Saved:
    """A recorded row: its event, and the bytes appended to ``file`` first."""

    event: Event
    file: str
    data: bytes


def outcome_row(
    template: dict[str, Any], key: tuple[int, int], attempt: int, outcome: str
) -> dict[str, Any]:
    """The row a collector would hand over for one attempt of ``key``."""
    row = dict(template)  # only top-level keys are stamped: a shallow copy will do
    row["_ng_task_index"], row["_ng_rollout_index"] = key
    row["_ng_attempt_index"] = attempt
    if outcome == MASKED:
        row.update(mask_sample=True, reward=0.0)
    elif outcome in (FAIL, TERMINAL):
        kind = _FAILURE_CLASSES[(key[0] + attempt) % len(_FAILURE_CLASSES)]
        row.update(_ng_failure_class=kind, reward=0.0)
        if outcome == TERMINAL:
            row["_ng_failure_terminal"] = True
    elif outcome == KILLED:
        row.update(_ng_failure_class="kill_shaped", _ng_no_persist=True)
    return row


def reserved_event(row: dict[str, Any], run_id: str) -> AttemptReserved:
    """Stamp the row as ``prepare_reserve`` does and return its event (REC-3)."""
    row["_ng_run_id"] = run_id
    return AttemptReserved(
        task=row["_ng_task_index"],
        rollout=row["_ng_rollout_index"],
        attempt=row["_ng_attempt_index"],
        run_id=run_id,
    )


def saved_event(
    row: dict[str, Any], ends: Ends, *, out: str, sidecar: str
) -> Saved | None:
    """The routing of ``prepare_record`` for the rows the harness makes."""
    if row.get("_ng_no_persist") is True:
        return None  # written nowhere: the reservation is the evidence
    data = encode_row(row)
    key = {
        "task": row["_ng_task_index"],
        "rollout": row["_ng_rollout_index"],
        "attempt": row["_ng_attempt_index"],
    }
    if "_ng_failure_class" not in row:
        location, _ = ends.locate(out, data)
        body: Event = ResultSaved(**key, location=location, facts=row_facts(row))
        return Saved(body, out, data)
    location, line = ends.locate(sidecar, data)
    body = FailureSaved(
        **key, location=location, sidecar_line=line, facts=row_facts(row)
    )
    return Saved(body, sidecar, data)
