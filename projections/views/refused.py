"""The lines a collector wrote that were refused, in words (issue 25).

``run`` and ``record`` keep every line they do not record as a
``row_refused`` event (file, line, the bytes' sha256, the reason). When the
newest thing a collector did was write lines that were all refused, running
it again does the same: ``refused_note`` says so, with the last refusal and
the command that lists them all, for ``check`` and for ``run``'s stop.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

import msgspec

from ledger import Ledger, plural
from ledger.events import RowRefused

__all__ = ["RefusedLines", "refusals_fix", "refused_lines", "refused_note"]

_OUTCOME_KINDS = (
    "result_saved",
    "failure_saved",
    "omission_saved",
    "judge_outcome_saved",
)


class RefusedLines(msgspec.Struct, frozen=True):
    """The refusals since the last recorded outcome; ``last`` is the newest."""

    count: int
    last: RowRefused


def refused_lines(ledger: Ledger) -> RefusedLines | None:
    """The lines refused since the run last recorded a row, or ``None``.

    Reads the ``row_refused`` events (few) and, between two of them, at most
    one outcome event: the newest refusals with no recorded row after them.
    """
    refused = [
        (event.seq, event.body)
        for event in ledger.events(1, kinds=("row_refused",))
        if isinstance(event.body, RowRefused)
    ]
    if not refused or _outcome_after(ledger, refused[-1][0]):
        return None
    first = len(refused) - 1
    while first > 0 and not _outcome_after(
        ledger, refused[first - 1][0], refused[first][0]
    ):
        first -= 1
    return RefusedLines(len(refused) - first, refused[-1][1])


def _outcome_after(ledger: Ledger, seq: int, before: int | None = None) -> bool:
    found = next(iter(ledger.events(seq + 1, kinds=_OUTCOME_KINDS)), None)
    return found is not None and (before is None or found.seq < before)


def history_command(ledger: Ledger) -> str:
    """The command that lists every refused line of the run, as it is typed."""
    return (
        f"rollout-ledger history {shlex.quote(str(ledger.target))} --event row_refused"
    )


def refusals_fix(reasons: Sequence[str]) -> str:
    """What the collector must change, from the reasons its lines were refused."""
    text = " ".join(reasons)
    if "_ng_rollout_id" in text and "carries no" in text:
        return (
            "make the collector copy each plan row's _ng_rollout_id onto the row it "
            "writes for it"
        )
    if "did not release" in text or "not among this run" in text:
        return (
            "make the collector keep each plan row's _ng_rollout_id (or its "
            "_ng_task_index, _ng_rollout_index and _ng_attempt_index) on the row it "
            "writes for it"
        )
    if "not JSON" in text or "JSON object" in text:
        return "make the collector write one JSON object per line"
    return "fix what the reasons name in the collector"


def refused_note(ledger: Ledger) -> str | None:
    """The refusals since the last recorded row and what to do, or ``None``."""
    found = refused_lines(ledger)
    if found is None:
        return None
    last = found.last
    where = f"round {last.round}'s " if last.round is not None else ""
    listing = (
        f"rollout-ledger history {shlex.quote(str(ledger.target))} --event row_refused"
    )
    return (
        f"the collector's last {plural(found.count, 'line')} "
        f"{'was' if found.count == 1 else 'were'} refused, none recorded since "
        f"(the last: {where}{last.file} line {last.line}: {last.reason}); running "
        f"it again repeats that: {refusals_fix([last.reason])}, then run again; "
        f"`{listing}` lists each"
    )
