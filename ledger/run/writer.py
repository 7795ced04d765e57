"""The one write path of a run: checked bodies, one transaction, the index in step.

:class:`Writer` appends what a ledger appends: operator events directly, the
recorder's operations through the home's :class:`ledger.store.port.RowSink`
(rows located and made durable with or before their events). Every body is
checked before it is stored, every stored event is built by
:func:`stored_events`, and the writer's index follows every append.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import msgspec

from ledger.clock import Clock
from ledger.errors import Refused
from ledger.events import (
    KINDS,
    AttemptReserved,
    Event,
    StoredEvent,
    decode_body,
    encode_body,
    kind_of,
)
from ledger.run.index_keeper import IndexKeeper
from ledger.store.decode import stored_from_row
from ledger.store.port import EventStore, NewEvent, RowSink
from ledger.store.prepared import Prepared

__all__ = ["WORKER_KINDS", "Writer", "checked", "fast_kind"]

#: What a worker of a shared log may append without the run lock (SC-4).
#: ``row_refused`` is part of recording (issue 25): a line of its collector's
#: files that a worker does not record is kept in the log by name, as ``run``
#: keeps one (issue 29).
WORKER_KINDS = frozenset(
    {
        "attempt_reserved",
        "result_saved",
        "failure_saved",
        "omission_saved",
        "judge_admitted",
        "judge_outcome_saved",
        "row_refused",
    }
)


class Writer:
    """Appends to one run's log; a worker may append only what workers may."""

    def __init__(
        self,
        store: EventStore,
        sink: RowSink,
        keeper: IndexKeeper,
        clock: Clock,
        *,
        coordinator: bool,
        where: str,
        fence: Callable[[], None] | None = None,
    ) -> None:
        self._store = store
        self._sink = sink
        self.keeper = keeper
        self._clock = clock
        self._coordinator = coordinator
        self._where = where
        #: Raises ``LockLost`` when the run lock is known lost (RunLock.check).
        self._fence = fence
        #: Rows went through this writer (``commit``): the collector files moved.
        self.committed_rows = False

    def append(
        self,
        bodies: Sequence[Event],
        *,
        expected_seq: int | None,
        actor: str,
        check: Callable[[Event], bytes] | None = None,
    ) -> list[StoredEvent]:
        """Append ``bodies`` in one transaction (EV-11); returns them as stored."""
        self._refuse_for_worker(bodies)
        self.check_lock()
        check = check or checked
        at = self._clock.now()  # one instant per transaction: its events land together
        make = tuple.__new__  # a NewEvent without its Python-level __new__ (P-2)
        new = [make(NewEvent, (fast_kind(b), at, actor, check(b))) for b in bodies]
        with self.keeper.guard:
            rows = self._store.append_many(new, expected_seq=expected_seq)
            self.keeper.follow(bodies, rows[-1].seq if rows else None)
        return [
            stored_from_row(row, body) for row, body in zip(rows, bodies, strict=True)
        ]

    def commit(
        self, ops: Sequence[Prepared], *, actor: str, written: bool = False
    ) -> list[StoredEvent]:
        """Append the recorder's ``ops`` through the sink, rows with their events.

        ``written`` says the rows are in their files already (EV-12 repair).
        """
        if not ops:
            return []
        if not self._coordinator:  # the coordinator may append anything (SC-4)
            self._refuse_for_worker([op.body for op in ops if op.body is not None])
        self.check_lock()  # before any row is written (EV-12)
        at = self._clock.now()
        make = tuple.__new__  # a NewEvent without its Python-level __new__ (P-7)

        def encode(body: Event) -> NewEvent:
            # The recorder's reservations are valid by construction (P-7).
            return make(NewEvent, (fast_kind(body), at, actor, recorder_checked(body)))

        with self.keeper.guard:
            index = self.keeper.index
            ends = {file: (end.offset, end.lines) for file, end in index.ends.items()}
            self.committed_rows = True
            rows, bodies = self._sink.commit(
                ops, encode=encode, recorded_ends=ends, written=written
            )
            self.keeper.follow(bodies, rows[-1].seq if rows else None)
        return [
            stored_from_row(row, body) for row, body in zip(rows, bodies, strict=True)
        ]

    def check_lock(self) -> None:
        """Raise ``LockLost`` when the run lock this writer holds is known lost.

        Called before every append and commit (and a snapshot's save): a
        holder that lost its lock stops before it writes anything.
        """
        if self._fence is not None:
            self._fence()

    def _refuse_for_worker(self, bodies: Sequence[Event]) -> None:
        # SC-4: without the run lock a worker reserves, records and admits
        # judgments; releases, resumes and operator actions are the
        # coordinator's.
        if self._coordinator:
            return
        for body in bodies:
            kind = fast_kind(body)
            if kind not in WORKER_KINDS:
                raise Refused(
                    f"{self._where}: a worker (without the run lock) may reserve, "
                    f"record and admit judgments, not append {kind}; take the run "
                    "lock (RunLock(url)) to act as the coordinator"
                )

    def close(self) -> None:
        """Close what the sink holds open."""
        self._sink.close()


_KIND_OF_TYPE: dict[type, str] = {cls: kind for kind, cls in KINDS.items()}


def fast_kind(body: Event) -> str:
    """The body's kind: a dict lookup per event instead of two attribute reads (P-2)."""
    kind = _KIND_OF_TYPE.get(type(body))
    return kind_of(body) if kind is None else kind


#: One decoder per event type: the full check of ``checked``.
_CHECKERS: dict[type, msgspec.json.Decoder[Any]] = {
    cls: msgspec.json.Decoder(cls) for cls in KINDS.values()
}


def checked(body: Event) -> bytes:
    """The body's bytes, once they decode as its type (what every replay needs)."""
    # A Struct built in code skips its Meta constraints and field types; what
    # is stored must decode, or every later replay would stop at it (REC-12).
    # Decoding with the body's own type is the whole check (its tag included)
    # at about half the union decoder's cost (1.2 against 2.1 us an event on
    # the P-2 stream, measured 2026-11-29); msgspec.convert would pass a
    # Struct instance through unchecked.
    data = encode_body(body)
    checker = _CHECKERS.get(type(body))
    try:
        if checker is None:  # a subclass of an event type: the union decides
            decode_body(data)
        else:
            checker.decode(data)
    except msgspec.ValidationError as exc:
        raise Refused(f"refusing to append a {kind_of(body)} event: {exc}") from exc
    return data


def recorder_checked(body: Event) -> bytes:
    """``checked``, but a reservation the recorder built is valid by construction."""
    # Recorder.prepare_reserve builds an AttemptReserved only from an attempt
    # the write index holds as released (whose task, rollout and attempt came
    # from validated events) and the run's own id: decoding it again would
    # only cost (P-7). Every other body the recorder appends carries
    # row-derived facts: checked in full.
    if type(body) is AttemptReserved:
        return encode_body(body)
    return checked(body)
