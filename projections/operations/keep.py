"""What a writer keeps beside the log: the fold's snapshots (EV-14, P-8).

The read rooms make a snapshot's bytes (``snapshot_bytes``, ``left_bytes``)
and never store them; the operations that hold a writer store them here,
and choose when (``replay_kept``: a replay that folded a long tail).
"""

from __future__ import annotations

from collections.abc import Mapping

from ledger import Ledger
from ledger.collector_files.inputs_seen import InputsSeen
from ledger.policy.model import RecoveryPolicy
from projections.decisions.completion import Coverage
from projections.decisions.rules import Decision
from projections.fold.left import OPEN_VERSION, left_bytes
from projections.fold.reading import KEEP_AFTER, replay_counted
from projections.fold.settled import settle
from projections.fold.snapshot import CODE_VERSION, snapshot_bytes
from projections.fold.state import RunState

__all__ = ["replay_kept", "save_left", "save_open", "save_snapshot"]


def save_snapshot(ledger: Ledger, state: RunState, policy: RecoveryPolicy) -> None:
    """Store ``state`` as the snapshot for its policy and this code version."""
    encoded = snapshot_bytes(state)
    if encoded is not None:
        ledger.save_snapshot(
            state.as_of_seq,
            bytes.fromhex(state.head_hash),
            CODE_VERSION,
            policy.digest(),
            encoded,
        )


def save_open(
    ledger: Ledger,
    state: RunState,
    decisions: Mapping[tuple[int, int], Decision],
    inputs: InputsSeen | None,
    *,
    covered: Coverage | None = None,
) -> None:
    """Store the snapshot of what is left of ``state`` (its ``decisions``)."""
    save_left(ledger, settle(state, decisions), decisions, inputs, covered=covered)


def save_left(
    ledger: Ledger,
    left: RunState,
    decisions: Mapping[tuple[int, int], Decision],
    inputs: InputsSeen | None,
    *,
    covered: Coverage | None = None,
) -> None:
    """Store ``left`` (what ``settle`` gave), its rollouts decided in ``decisions``."""
    encoded = left_bytes(left, decisions, inputs, covered=covered)
    if encoded is not None:
        # One per run: the policy it was folded under is in the state (the
        # key's policy digest is left empty, as for the writer's index).
        ledger.save_snapshot(
            left.as_of_seq, bytes.fromhex(left.head_hash), OPEN_VERSION, "", encoded
        )


def replay_kept(ledger: Ledger) -> RunState:
    """``replay``, and a writer that folded a long tail keeps what it folded.

    A resume from the snapshot of what is left (P-8) saves no whole state;
    this keeps the whole one close to the head for the commands that need
    every rollout (record, results, history, the report).
    """
    done = replay_counted(ledger)
    if done.tail >= KEEP_AFTER and ledger.writable:
        save_snapshot(ledger, done.state, done.policy)
    return done.state
