"""The write side of rollout-ledger and its shared vocabulary.

Event types and the event store, the run lock, atomic file publication, the
configuration identity and the manifest, and the row facts. Everything not
listed in ``__all__`` is private and may move.
"""

from ledger import events
from ledger.clock import Clock
from ledger.errors import (
    ConcurrencyConflict,
    ConfigError,
    CorruptLedger,
    IdentityMismatch,
    LedgerError,
    LockHeld,
    RecoveryIncomplete,
    RowError,
    UnknownEvent,
)
from ledger.files import atomic_replace, publish_json
from ledger.lock import RunLock
from ledger.run import Ledger

__all__ = [
    "Clock",
    "ConcurrencyConflict",
    "ConfigError",
    "CorruptLedger",
    "IdentityMismatch",
    "Ledger",
    "LedgerError",
    "LockHeld",
    "RecoveryIncomplete",
    "RowError",
    "RunLock",
    "UnknownEvent",
    "atomic_replace",
    "events",
    "publish_json",
]
