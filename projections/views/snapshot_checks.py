"""``verify``'s checks of what is stored beside the log (EV-14, P-8).

Each stored snapshot must equal a refold of the events it covers: the whole
state, the writer's index and the file ends (the snapshot of what is left is
``projections.fold.left.open_problems``'). Each check returns what does
not hold, as ``(message, seq)``; ``verify`` makes them findings.
"""

from __future__ import annotations

import msgspec

from ledger import Ledger
from ledger.events import StoredEvent
from ledger.policy.log import policy_from_json
from ledger.run.index_keeper import ENDS_VERSION, encode_ends
from ledger.run.write_index import (
    END_KINDS,
    INDEX_CODE_VERSION,
    INDEX_KINDS,
    WriteIndex,
)
from projections.fold.reading import replay
from projections.fold.snapshot import load_snapshot
from projections.fold.state import RunState

__all__ = ["EndsCheck", "ends_problems", "index_problems", "state_problems"]

Problems = list[tuple[str, int]]


def state_problems(ledger: Ledger, state: RunState) -> Problems:
    """The stored whole state against a refold of the events it covers."""
    stored = load_snapshot(ledger, policy_from_json(state.policy))
    if stored is None:
        return []
    prefix = replay([e for e in ledger.events() if e.seq <= stored.as_of_seq])
    encode = msgspec.msgpack.Encoder().encode
    if encode(prefix) != encode(stored):
        return [
            (
                "the stored snapshot differs from a refold of "
                "the events it covers (replay ignores it only if stale)",
                stored.as_of_seq,
            )
        ]
    return []


def index_problems(ledger: Ledger) -> Problems:
    """The stored write index against a fold of the events it covers."""
    found = ledger.load_snapshot(INDEX_CODE_VERSION, "")
    if found is None:
        return []
    seq, _, stored = found
    events = (e for e in ledger.events(1, kinds=INDEX_KINDS) if e.seq <= seq)
    if WriteIndex.build(events).encode() != stored:
        return [
            (
                "the stored write index differs from a refold of the events it "
                "covers (a writer's open ignores it only if stale)",
                seq,
            )
        ]
    return []


def ends_problems(ledger: Ledger) -> Problems:
    """The stored file ends (P-8) against a fold of the events they cover."""
    ends = EndsCheck(ledger)
    if ends.seq is not None:
        for event in ledger.events(1, kinds=END_KINDS):
            ends.add(event)
    return ends.problems()


class EndsCheck:
    """``ends_problems`` fed the log's events by a pass that reads them for
    more (``verify``'s rows): any events, in seq order."""

    def __init__(self, ledger: Ledger) -> None:
        found = ledger.load_snapshot(ENDS_VERSION, "")
        self.seq: int | None = None if found is None else found[0]
        self._stored = b"" if found is None else found[2]
        self._index = WriteIndex()
        self._kinds = frozenset(END_KINDS)

    def add(self, event: StoredEvent) -> None:
        """Fold ``event`` if the stored ends cover it."""
        if self.seq is not None and event.seq <= self.seq and event.kind in self._kinds:
            self._index.apply(event.body)

    def problems(self) -> Problems:
        """What does not hold, once every event was added."""
        if self.seq is None or encode_ends(self._index) == self._stored:
            return []
        return [
            (
                "the stored file ends differ from a refold of the events they "
                "cover (an open ignores them only if stale)",
                self.seq,
            )
        ]
