"""``replay``: stored events folded into a :class:`RunState` (REC-1..REC-16).

The fold classifies every outcome under the policy in force at the head of the
log (REC-60): the policy is read first, cheaply, then every event is folded
once (``projections.fold.apply``). Given stored events, ``replay`` is that pure fold.
Given a ledger (anything with the methods of :class:`StoredLog`, the port this
module reads through), it reads what to fold: a matching snapshot (EV-14) and
the events after it, or the log from seq 1.

A ledger is replayed on a fast path (P-3, P-4): its rows are read as ``(seq,
kind, body)`` bytes, an outcome's facts decoded and classified once per
distinct bytes (``projections.fold.fast_path``), the garbage collector paused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

import msgspec

from ledger import events as ev
from ledger.errors import CorruptLedger
from ledger.event_views import RunCreatedPolicy, RunCreatedRawIndex
from ledger.policy.log import policy_from_events, policy_from_json
from ledger.policy.model import RecoveryPolicy
from ledger.store.decode import decode_row
from ledger.store.port import EventRow
from projections.fold.apply import FoldStep, fold_events
from projections.fold.bulk import gc_paused
from projections.fold.fast_path import FoldRow, RowFold
from projections.fold.snapshot import load_snapshot
from projections.fold.state import RunState

__all__ = [
    "KEEP_AFTER",
    "EventSource",
    "Replayed",
    "StoredLog",
    "apply",
    "fold_after",
    "head_policy",
    "replay",
    "replay_counted",
]

_POLICY_KINDS = ("run_created", "policy_changed")
#: A writer's replay that folded at least this many events after the stored
#: snapshot saves its state (the writer's choice: ``replay`` never writes).
KEEP_AFTER = 50_000


class Replayed(NamedTuple):
    """A replay of a ledger, and what a writer needs to keep it (EV-14)."""

    state: RunState
    #: The policy the state was folded under.
    policy: RecoveryPolicy
    #: Events folded after the stored snapshot (0 when none was used).
    tail: int


@runtime_checkable
class StoredLog(Protocol):
    """The ledger methods a replay reads through (``ledger.Ledger`` has them).

    Rows come undecoded (``EventRow``, or ``(seq, kind, body)`` for the fold):
    the fast path decodes and checks them. ``where`` names the log in errors.
    """

    @property
    def where(self) -> str: ...

    def raw_events(
        self, from_seq: int = 1, *, kinds: Sequence[str] = ()
    ) -> Iterator[EventRow]: ...

    def raw_events_at(self, seqs: Sequence[int]) -> Iterator[EventRow]: ...

    def rows_for_fold(self, from_seq: int = 1) -> Iterator[FoldRow]: ...

    def load_snapshot(
        self, code_version: str, policy_digest: str
    ) -> tuple[int, bytes, bytes] | None: ...


class EventSource(StoredLog, Protocol):
    """A ledger that also streams its decoded events (``history`` reads both)."""

    def events(
        self, from_seq: int = 1, *, kinds: Sequence[str] = ()
    ) -> Iterator[ev.StoredEvent]: ...


def replay(
    events: StoredLog | Iterable[ev.StoredEvent],
    *,
    policy_override: RecoveryPolicy | None = None,
    state: RunState | None = None,
    use_snapshot: bool = True,
) -> RunState:
    """Fold stored events (a ledger, or any iterable of them) into a ``RunState``.

    ``policy_override`` classifies under another policy, for what-if analysis;
    ``state`` continues a fold with the events that follow it. Given a ledger,
    a matching snapshot (EV-14) replaces the events it covers.
    """
    # The one place a ledger and stored events part ways.
    if isinstance(events, StoredLog):
        return _read(events, policy_override, state, use_snapshot).state
    stream = list(events)
    policy = policy_override or policy_from_events(
        e.body for e in stream if e.kind in _POLICY_KINDS
    )
    return fold_events(stream, policy, state)


def replay_counted(log: StoredLog) -> Replayed:
    """``replay`` of a ledger from its snapshot, with how long a tail it folded.

    A writer saves the state when the tail was long (``KEEP_AFTER``); a read
    never does.
    """
    return _read(log, None, None, True)


def apply(state: RunState, event: ev.StoredEvent, policy: RecoveryPolicy) -> None:
    """Fold one more event into ``state`` (the incremental view of R-3)."""
    FoldStep(state, policy).apply(event)


def fold_after(
    log: StoredLog,
    state: RunState,
    *,
    policy: RecoveryPolicy | None = None,
    admit: Callable[[str, Any], None] | None = None,
) -> int | None:
    """Fold the log's events after ``state``'s head into it; the last seq folded.

    Replay's fast path, each row checked as the chain that follows the head,
    under ``policy`` (by default the one ``state`` was folded under).
    ``admit(kind, body)`` sees each body first: what it raises stops the
    fold, and leaves ``state`` part-folded (the caller drops it). ``None``
    when no event followed the head.
    """
    with gc_paused():
        step = RowFold(state, policy or policy_from_json(state.policy))
        last = _fold_tail(step, log, state.as_of_seq + 1, admit)
        if last is not None:
            step.at(last, _hash_at(log, last))
    return last


def head_policy(log: StoredLog) -> RecoveryPolicy:
    """The policy in force at the head of the log (REC-60), read without the index.

    ``run_created``'s index (one entry per rollout) is decoded by the fold
    alone (P-4, P-5); a body that does not decode so is decoded in full, for
    its error.
    """
    return _policy_of_rows(log.raw_events(1, kinds=_POLICY_KINDS), [], log.where)


def _read(
    log: StoredLog,
    policy_override: RecoveryPolicy | None,
    state: RunState | None,
    use_snapshot: bool,
) -> Replayed:
    """``replay`` of a ledger: a snapshot and the rows after it, or every row."""
    if state is None and not use_snapshot and policy_override is None:
        started = _replay_from_start(log)
        if started is not None:
            return Replayed(started, policy_from_json(started.policy), 0)
    policy = policy_override or head_policy(log)
    if state is None and use_snapshot and policy_override is None:
        state = load_snapshot(log, policy)
        if state is None:  # no snapshot: from seq 1, the index an entry at a time
            started = _replay_from_start(log)
            if started is not None:
                return Replayed(started, policy, 0)
    folded = state if state is not None else RunState()
    folded.policy = policy.to_json_dict()
    from_seq = folded.as_of_seq + 1
    last = fold_after(log, folded, policy=policy)
    # EV-14: how much was folded past the snapshot; a writer keeps a long one
    # (a resume from the snapshot of what is left, P-8, saves no whole state;
    # this keeps the whole one close to the head for the commands that need
    # every rollout: record, results, history, the report).
    keep = use_snapshot and policy_override is None and last is not None
    tail = last - from_seq + 1 if keep and last is not None else 0
    return Replayed(folded, policy, tail)


_POLICY_DECODER = msgspec.json.Decoder(RunCreatedPolicy)
#: A ``run_created`` to carry a decoded policy to ``policy_from_events``, which
#: reads nothing else of it.
_CARRIER = ev.RunCreated(
    run_id="-", created_at="-", materialized_digest="-", config_digest="-",
    max_rollout_attempts=1,
)  # fmt: skip


def _policy_of_rows(
    rows: Iterable[EventRow], bodies: list[object], where: str
) -> RecoveryPolicy:
    """``head_policy`` over ``rows``, after the policy bodies ``bodies``."""
    for row in rows:
        data = bytes(row.body)
        if row.kind == "run_created":
            try:
                light = _POLICY_DECODER.decode(data)
            except (msgspec.DecodeError, RecursionError):
                light = None
            if light is not None:
                bodies.append(msgspec.structs.replace(_CARRIER, policy=light.policy))
                continue
        bodies.append(decode_row(row, path=where).body)
    return policy_from_events(bodies)


def _row_at(log: StoredLog, seq: int) -> EventRow:
    found = next(iter(log.raw_events(seq)), None)
    if found is None or found.seq != seq:  # a damaged index lost it
        raise CorruptLedger(
            f"event seq {seq} cannot be found in {log.where}; run "
            "`rollout-ledger verify`",
            seq=seq,
            path=log.where,
        )
    return found


def _hash_at(log: StoredLog, seq: int) -> bytes:
    return bytes(_row_at(log, seq).hash)


def _fold_tail(
    step: RowFold,
    log: StoredLog,
    from_seq: int,
    admit: Callable[[str, Any], None] | None = None,
) -> int | None:
    """Fold the log's rows from ``from_seq``; the last seq folded, if any."""
    rows = log.rows_for_fold(from_seq)
    return step.fold_rows(rows, log.where, lambda seq: _row_at(log, seq), admit)


def _replay_from_start(log: StoredLog) -> RunState | None:
    """A full replay that reads and decodes ``run_created`` once (P-3).

    Its body (one index entry per rollout, megabytes) gives both the head
    policy and the fold's first step; a separate policy read would fetch it
    twice. Its index is decoded an entry at a time as the fold takes it: a
    million entries as tuples (~250 MiB) would sit beside the state built
    from them (P-9). ``None`` when the first row is not a ``run_created``
    that decodes: the caller then replays as usual, which raises what it
    always raised.
    """
    first = next(iter(log.raw_events_at([1])), None)
    if first is None or first.kind != "run_created":
        return None
    try:
        body = _RAW_INDEX.decode(first.body)
        index = _entries(body.index)
    except (msgspec.DecodeError, RecursionError):
        return None
    first_hash = bytes(first.hash)
    del first  # megabytes: nothing of them is kept (P-3's peak RSS)
    carrier = msgspec.structs.replace(_CARRIER, policy=body.policy)
    later = log.raw_events(2, kinds=_POLICY_KINDS)
    policy = _policy_of_rows(later, [carrier], log.where)
    with gc_paused():
        folded = RunState(policy=policy.to_json_dict())
        step = RowFold(folded, policy)
        try:
            step.run_created(body, map(_ENTRY.decode, index))
        except (msgspec.DecodeError, RecursionError):
            return None
        del body, index  # the index: the state keeps what it needs of it
        last = _fold_tail(step, log, 2) or 1
    step.at(last, first_hash if last == 1 else _hash_at(log, last))
    return folded


_RAW_INDEX: msgspec.json.Decoder[Any] = msgspec.json.Decoder(RunCreatedRawIndex)
_RAW_ENTRIES = msgspec.json.Decoder(list[msgspec.Raw])
_ENTRY = msgspec.json.Decoder(ev.IndexEntry)


def _entries(index: msgspec.Raw | tuple[()]) -> list[msgspec.Raw]:
    """The index's entries, each left as bytes (``()``: a body without one)."""
    return _RAW_ENTRIES.decode(index) if isinstance(index, msgspec.Raw) else []
