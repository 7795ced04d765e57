"""``replay``: a pure fold of stored events into a :class:`RunState` (REC-1..REC-16).

The fold classifies every outcome under the policy in force at the head of the
log (REC-60): the policy events are read first, cheaply, then every event is
folded once. No I/O and no clock: the same events always give the same state.

A ledger is replayed on a fast path (P-3, P-4): its rows are read without the
columns the fold does not use, and an outcome's facts are decoded, and so
checked, the first time the fold meets their bytes; a fold keeps what it
classified per distinct facts. Every body is still checked as
``Ledger.events`` checks it, and a body that does not decode raises the same
error, from the same code (``ledger.store.decode.decode_row``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

import msgspec

from ledger import events as ev
from ledger.policy.log import policy_from_events
from ledger.policy.model import RecoveryPolicy
from ledger.store.decode import decode_row
from ledger.store.sqlite import EventRow
from projections.fold import FAST_DECODER, FoldStep
from projections.state import RunState, gc_paused

__all__ = ["EventSource", "apply", "replay"]

_POLICY_KINDS = ("run_created", "policy_changed")


class EventSource(Protocol):
    """A ledger: anything with ``events(from_seq, *, kinds)``."""

    def events(
        self, from_seq: int = 1, *, kinds: Any = ()
    ) -> Iterable[ev.StoredEvent]: ...


def _head_policy(events: Iterable[ev.StoredEvent]) -> RecoveryPolicy:
    return policy_from_events(event.body for event in events)


class _PolicyOnly(msgspec.Struct, tag_field="kind", tag="run_created"):
    """``run_created`` as the policy read decodes it: its policy, not its index."""

    policy: dict[str, Any] = {}


_POLICY_DECODER = msgspec.json.Decoder(_PolicyOnly)
#: A ``run_created`` to carry a decoded policy to ``policy_from_events``, which
#: reads nothing else of it.
_CARRIER = ev.RunCreated(
    run_id="-", created_at="-", materialized_digest="-", config_digest="-",
    max_rollout_attempts=1,
)  # fmt: skip


def _ledger_policy(ledger: Any) -> RecoveryPolicy:
    """The head policy of a ledger, its ``run_created`` decoded for the policy only.

    The index (one entry per rollout) is decoded once, by the fold (P-4, P-5).
    A body that does not decode so is decoded in full, for its error.
    """
    return _policy_of_rows(ledger.raw_events(1, kinds=_POLICY_KINDS), [], ledger)


def _policy_of_rows(
    rows: Iterable[EventRow], bodies: list[object], ledger: Any
) -> RecoveryPolicy:
    """``_ledger_policy`` over ``rows``, after the policy bodies ``bodies``."""
    path = ledger.where
    for row in rows:
        data = bytes(row.body)
        if row.kind == "run_created":
            try:
                light = _POLICY_DECODER.decode(data)
            except msgspec.DecodeError:
                light = None
            if light is not None:
                bodies.append(msgspec.structs.replace(_CARRIER, policy=light.policy))
                continue
        bodies.append(decode_row(row, path=path).body)
    return policy_from_events(bodies)


def replay(
    events: EventSource | Iterable[ev.StoredEvent],
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
    if isinstance(events, Iterable):
        stream: Iterable[ev.StoredEvent] = list(events)
        policy = policy_override or _head_policy(
            e for e in stream if e.kind in _POLICY_KINDS
        )
    else:
        fast = _has_fast_rows(events)
        if fast and state is None and not use_snapshot and policy_override is None:
            started = _replay_from_start(events)
            if started is not None:
                return started
        if policy_override is not None:
            policy = policy_override
        elif fast:
            policy = _ledger_policy(events)
        else:
            policy = _head_policy(events.events(1, kinds=_POLICY_KINDS))
        if state is None and use_snapshot and policy_override is None:
            state = _snapshot(events, policy)
        from_seq = 1 if state is None else state.as_of_seq + 1
        if fast:
            return _replay_rows(events, from_seq, policy, state)
        stream = events.events(from_seq)
    folded = state if state is not None else RunState()
    folded.policy = policy.to_json_dict()
    step = FoldStep(folded, policy)
    last = None
    for last in stream:
        step.fold(last)
    if last is not None:  # the head, once (hex per event costs P-3 time)
        step.at(last.seq, last.hash)
    return folded


def _has_fast_rows(source: Any) -> bool:
    # A ledger's rows, unless its events() was replaced on the instance (a
    # wrapper or a test double is read through what it replaced it with).
    own = getattr(type(source), "events", None)
    bound = getattr(source.events, "__func__", None)
    return (
        hasattr(source, "rows_for_fold")
        and hasattr(source, "raw_events")
        and own is not None
        and bound is own
    )


def _replay_rows(
    ledger: Any, from_seq: int, policy: RecoveryPolicy, state: RunState | None
) -> RunState:
    """``replay``'s fast path over a ledger's rows (same state, same errors)."""
    with gc_paused():
        return _fold_rows(ledger, from_seq, policy, state)


def _fold_rows(
    ledger: Any, from_seq: int, policy: RecoveryPolicy, state: RunState | None
) -> RunState:
    folded = state if state is not None else RunState()
    folded.policy = policy.to_json_dict()
    step = FoldStep(folded, policy)
    last = _fold_tail(step, ledger, from_seq)
    if last is not None:
        step.at(last, _hash_at(ledger, last))
    return folded


def _row_at(ledger: Any, seq: int) -> EventRow:
    row: EventRow = next(iter(ledger.raw_events(seq)))
    return row


def _hash_at(ledger: Any, seq: int) -> bytes:
    return bytes(_row_at(ledger, seq).hash)


def _fold_tail(step: FoldStep, ledger: Any, from_seq: int) -> int | None:
    """Fold the ledger's rows from ``from_seq``; the last seq folded, if any."""
    rows = ledger.rows_for_fold(from_seq)
    return step.fold_rows(rows, ledger.where, lambda seq: _row_at(ledger, seq))


def _replay_from_start(ledger: Any) -> RunState | None:
    """A full replay that reads and decodes ``run_created`` once (P-3).

    Its body (one index entry per rollout, megabytes) gives both the head
    policy and the fold's first step; a separate policy read would fetch it
    twice. ``None`` when the first row is not a ``run_created`` that decodes:
    the caller then replays as usual, which raises what it always raised.
    """
    read_at = getattr(ledger, "raw_events_at", None)
    first = None if read_at is None else next(iter(read_at([1])), None)
    if first is None or first.kind != "run_created":
        return None
    try:
        body = FAST_DECODER.decode(first.body)
    except msgspec.DecodeError:
        return None
    first_hash = bytes(first.hash)
    del first  # megabytes: nothing of them is kept (P-3's peak RSS)
    if type(body) is not ev.RunCreated:
        return None
    later = ledger.raw_events(2, kinds=_POLICY_KINDS)
    policy = _policy_of_rows(later, [body], ledger)
    with gc_paused():
        folded = RunState(policy=policy.to_json_dict())
        step = FoldStep(folded, policy)
        step._run_created(body, 1, "")
        del body  # the decoded index: the state keeps what it needs of it
        last = _fold_tail(step, ledger, 2) or 1
    step.at(last, first_hash if last == 1 else _hash_at(ledger, last))
    return folded


def _snapshot(events: EventSource, policy: RecoveryPolicy) -> RunState | None:
    load = getattr(events, "load_snapshot", None)
    if load is None:
        return None
    from projections.snapshot import load_snapshot  # snapshot imports this module

    return load_snapshot(events, policy)  # type: ignore[arg-type]


def apply(state: RunState, event: ev.StoredEvent, policy: RecoveryPolicy) -> None:
    """Fold one more event into ``state`` (the incremental view of R-3)."""
    FoldStep(state, policy).apply(event)
