"""``audit_export`` (CLI-13): every stored event as one JSON object, for auditors.

Each line holds the envelope (seq, kind, at, actor), the body exactly as it
was stored and hashed, and ``prev_hash`` and ``hash`` in hex, so the chain can
be checked from the export alone (EV-2). The lines are streamed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgspec

from ledger import Ledger

__all__ = ["AuditExport", "audit_export"]


@dataclass(frozen=True)
class AuditExport:
    """The lines of an export, streamed, and how many there will be."""

    count: int
    #: One mapping a line; ``body`` is ``msgspec.Raw``, encoded as stored.
    lines: Iterator[dict[str, Any]]


def audit_export(ledger: Ledger) -> AuditExport:
    """The run's events as export lines; ``count`` is the head's seq as called."""
    return AuditExport(ledger.head()[0], _lines(ledger))


def _lines(ledger: Ledger) -> Iterator[dict[str, Any]]:
    for row in ledger.raw_events():
        yield {
            "seq": row.seq,
            "kind": row.kind,
            "at": row.at,
            "actor": row.actor,
            "body": msgspec.Raw(bytes(row.body)),
            "prev_hash": bytes(row.prev_hash).hex(),
            "hash": bytes(row.hash).hex(),
        }
