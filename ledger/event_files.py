"""The events about a collector's files themselves (EV-12, REC-83, issue 25).

A tail a writer's open repaired (``TailRepaired``) and a line recording did
not take (``RowRefused``): evidence about the bytes of a collector's file,
not about a rollout. Part of the vocabulary of :mod:`ledger.events`, which
re-exports both.
"""

from __future__ import annotations

from typing import Final, Literal

from ledger.event_base import Event, NonNegative, Positive, Reason, Sha256Hex

__all__ = [
    "NEWLINE_APPENDED",
    "NEWLINE_RECORDED",
    "TAIL_CUT",
    "RowRefused",
    "TailAction",
    "TailRepaired",
]


#: What a writer's open did to a collector file's tail (EV-12, REC-83).
TailAction = Literal["cut", "newline_appended", "newline_recorded"]
TAIL_CUT: Final[TailAction] = "cut"
NEWLINE_APPENDED: Final[TailAction] = "newline_appended"
NEWLINE_RECORDED: Final[TailAction] = "newline_recorded"


class TailRepaired(Event, tag="tail_repaired", frozen=True, kw_only=True):
    """A collector file's tail repaired under the lock (EV-12, REC-83).

    ``action``: ``cut`` (a torn last line or blank lines cut back, their bytes
    saved as ``saved_as``); ``newline_appended`` (a last line that is a
    complete JSON object got its missing newline at ``offset``, the row kept);
    ``newline_recorded`` (another collector wrote that newline; now recorded).
    ``length`` and ``sha256`` are of the bytes cut or the newline;
    ``saved_as`` is empty when nothing was cut.
    """

    file: str
    offset: NonNegative
    length: NonNegative
    sha256: Sha256Hex
    saved_as: str
    action: TailAction = "cut"


class RowRefused(Event, tag="row_refused", frozen=True, kw_only=True):
    """A collector's line that was not recorded, kept as evidence (issue 25).

    Every answer a collector produced is in the log: a line ``run`` or
    ``record`` refuses (not JSON, no rollout of the plan, an attempt already
    decided, ...) is named by its ``file`` (run-relative where it lies in the
    run's folder), its ``line``, the ``length`` and ``row_sha256`` of its bytes
    and the ``reason`` in words; ``round`` is ``run``'s round, ``None`` for
    ``record``. A file rewritten under its reader has no line to hash:
    ``row_sha256`` is ``None`` and ``length`` 0. Nothing is decided from it.
    """

    file: str
    line: Positive
    length: NonNegative
    row_sha256: Sha256Hex | None
    reason: Reason
    round: Positive | None = None
