"""Projection snapshots (EV-14): replay only the tail of the log.

A snapshot is the folded state at ``seq`` N, keyed by the head hash at N, the
projection code version and the policy digest; replay uses it only when all
three still match, and ``verify`` refolds from seq 1 and compares.
"""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from types import ModuleType
from typing import Protocol

import msgspec

import projections.decisions.classify as classify
import projections.fold.apply as fold
import projections.fold.attempt as attempt
import projections.fold.fast_path as fold_rows
import projections.fold.stages as stages
import projections.fold.state as state_module
from ledger import event_views, facts_rules
from ledger.policy.model import RecoveryPolicy
from ledger.rows import failure_kinds
from projections.fold.bulk import gc_paused
from projections.fold.state import RunState

__all__ = [
    "CODE_VERSION",
    "FOLD_MODULES",
    "SnapshotSource",
    "copy_state",
    "load_snapshot",
    "snapshot_bytes",
]

#: The code that decides a folded state: the state, what each event does to it
#: (the handlers, and the fast path over rows with its partial views), and how
#: an outcome is classified. What is read, from where, is not: a snapshot is
#: keyed by its head hash and policy digest besides.
FOLD_MODULES: tuple[ModuleType, ...] = (
    state_module,
    attempt,
    fold,
    fold_rows,
    stages,
    event_views,
    classify,
    facts_rules,
    failure_kinds,
)


class SnapshotSource(Protocol):
    """Where stored snapshots are read from (``ledger.Ledger`` is one)."""

    def load_snapshot(
        self, code_version: str, policy_digest: str
    ) -> tuple[int, bytes, bytes] | None: ...


def _code_version() -> str:
    # Any change to the code that folds or classifies makes old snapshots unusable.
    digest = hashlib.sha256()
    for module in FOLD_MODULES:
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()[:16]


CODE_VERSION = _code_version()
_DECODER = msgspec.msgpack.Decoder(RunState)
_ENCODER = msgspec.msgpack.Encoder()


def snapshot_bytes(state: RunState) -> bytes | None:
    """``state`` as a stored snapshot holds it; ``None`` when it cannot be kept.

    A number over 64 bits, from a log written before numbers were bounded
    where they enter, gives no snapshot (EV-14: an optimization only, the
    next replay folds the log). A writer stores it (``operations``).
    """
    try:
        return _ENCODER.encode(state)
    except OverflowError:
        return None


def load_snapshot(ledger: SnapshotSource, policy: RecoveryPolicy) -> RunState | None:
    """The stored state for this policy and code version, if the log still has it."""
    found = ledger.load_snapshot(CODE_VERSION, policy.digest())
    if found is None:
        return None
    try:
        with gc_paused():  # a whole state at once (P-5)
            return _DECODER.decode(found[2])
    except (msgspec.DecodeError, RecursionError):
        return None  # EV-14: an optimization only; a full refold is always right


def copy_state(state: RunState) -> RunState:
    """An independent copy of ``state``: what a snapshot of it would restore."""
    try:
        encoded = _ENCODER.encode(state)
    except OverflowError:  # a number over 64 bits from an old log: copy it slowly
        return copy.deepcopy(state)
    with gc_paused():
        return _DECODER.decode(encoded)
