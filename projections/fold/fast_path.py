"""The fold over a ledger's undecoded rows: replay's fast path (P-3, P-4).

A row is ``(seq, kind, body bytes)``; outcomes are decoded through the partial
views of ``ledger.event_views`` with their facts left as bytes, and the facts
decoded and classified once per distinct bytes. Every body is still checked as
``Ledger.events`` checks it, and a body that does not decode raises the same
error, from the same code (``ledger.store.decode.decode_row``). The state is
the one ``fold.FoldStep`` gives the decoded events: the same handlers fold it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Union

import msgspec

from ledger import events as ev
from ledger.errors import UnknownEvent
from ledger.event_views import FailureSavedRawFacts, ResultSavedRawFacts
from ledger.rows.facts import RowFacts
from ledger.store.decode import decode_row
from ledger.store.port import EventRow
from projections.fold.apply import HANDLERS, NEEDS_AT, FoldStep, Outcome
from projections.fold.stages import stage_reserved
from projections.fold.state import RESERVED

__all__ = ["FAST_DECODER", "FoldRow", "RowFold"]

#: A stored row as the fast path reads it: seq, kind, body bytes.
FoldRow = tuple[int, str, bytes]

_FAST_TYPES: tuple[type, ...] = tuple(
    {ev.ResultSaved: ResultSavedRawFacts, ev.FailureSaved: FailureSavedRawFacts}.get(
        t, t
    )
    for t in ev.EVENT_TYPES
)
FAST_DECODER: msgspec.json.Decoder[Any] = msgspec.json.Decoder(
    Union[_FAST_TYPES]  # noqa: UP007  (a union of a runtime tuple of types)
)
_FACTS_DECODER = msgspec.json.Decoder(RowFacts)
_FAST_TYPE_OF_KIND: dict[str, type] = {
    t.__struct_config__.tag: t  # type: ignore[attr-defined]
    for t in _FAST_TYPES
}
# How the fast path folds each kind.
_PLAIN, _WITH_AT, _RESERVED, _SAVED = range(4)
_MODE_OF_KIND: dict[str, int] = {
    kind: _WITH_AT if kind in NEEDS_AT else _PLAIN for kind in _FAST_TYPE_OF_KIND
} | {"attempt_reserved": _RESERVED, "result_saved": _SAVED, "failure_saved": _SAVED}


def _checked_body(seq: int, kind: str, data: bytes, path: Any) -> Any:
    # The full decoder's verdict, and its error, for a body the fast path
    # could not take (decode_row raises what Ledger.events raises).
    return decode_row(EventRow(seq, kind, "", "", data, b"", b""), path=path).body


class RowFold(FoldStep):
    """A ``FoldStep`` that also folds stored rows, undecoded."""

    def fold_rows(
        self,
        rows: Iterator[FoldRow],
        path: Any,
        row_at: Callable[[int], EventRow],
        admit: Callable[[str, Any], None] | None = None,
    ) -> int | None:
        """Fold stored rows, decoding each as ``Ledger.events`` would; the last seq.

        ``row_at(seq)`` reads one stored row, for the few kinds that fold ``at``.
        ``admit(kind, body)``, given, sees each decoded body before it is
        folded; what it raises stops the fold there.
        """
        handlers, decode = HANDLERS, FAST_DECODER.decode
        outcomes, rollouts = self.outcomes, self.state.rollouts
        last = None
        for seq, kind, data in rows:
            expected = _FAST_TYPE_OF_KIND.get(kind)
            if expected is None:
                raise UnknownEvent(seq=seq, kind=kind, path=path)
            try:
                body = decode(data)
            except (msgspec.DecodeError, RecursionError):
                body = _checked_body(seq, kind, data, path)
            if type(body) is not expected:
                body = _checked_body(seq, kind, data, path)
            if admit is not None:
                admit(kind, body)
            last = seq
            mode = _MODE_OF_KIND[kind]
            if mode == _RESERVED:  # _attempt_reserved, inlined: half of a log
                by_rollout = rollouts.get(body.task)
                rollout = None if by_rollout is None else by_rollout.get(body.rollout)
                if rollout is not None:
                    record = rollout.add_attempt(body.attempt)
                    bits = record.bits
                    if not bits & RESERVED:
                        record.bits = bits | RESERVED
                        record.seq = record.seq or seq  # an outcome's seq stays
                    if body.stage_index is not None:  # ROW-64: a continuation
                        stage_reserved(rollout, body, seq)
            elif mode == _SAVED and type(body.facts) is msgspec.Raw:
                key = bytes(body.facts)
                outcome = outcomes.get(key)
                if outcome is None:
                    outcome = self._raw_outcome(key, seq, kind, data, path)
                self.saved(body, seq, outcome)
            else:
                handler = handlers.get(kind)
                if handler is not None:
                    handler(self, body, seq, row_at(seq).at if mode == _WITH_AT else "")
        return last

    def _raw_outcome(
        self, key: bytes, seq: int, kind: str, data: bytes, path: Any
    ) -> Outcome:
        try:
            facts = _FACTS_DECODER.decode(key)
        except (msgspec.DecodeError, RecursionError):
            facts = _checked_body(seq, kind, data, path).facts
        return self.remember(key, facts)
