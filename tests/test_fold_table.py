"""The fold's table: every event kind is folded or deliberately ignored.

A kind added to ``ledger.events`` without a handler would otherwise be skipped
by replay without a word, and the state would silently not reflect it.
"""

from __future__ import annotations

import inspect

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from ledger import events as ev
from tests.internals import (
    DEFAULT_POLICY,
    FAST_DECODER,
    HANDLERS,
    IGNORED_KINDS,
    NEEDS_AT,
    FoldStep,
    fold_events,
)
from tests.strategies import event_of


def test_every_kind_is_handled_or_deliberately_ignored() -> None:
    assert set(HANDLERS) | IGNORED_KINDS == set(ev.KINDS)
    assert not set(HANDLERS) & IGNORED_KINDS


def test_each_handler_is_a_fold_step_method_that_takes_its_kind() -> None:
    for kind, handler in HANDLERS.items():
        assert getattr(FoldStep, handler.__name__) is handler
        body = inspect.signature(handler).parameters["body"].annotation
        assert ev.KINDS[kind].__name__ in body  # (postponed annotations: text)
    assert len(HANDLERS) == len(ev.KINDS) - len(IGNORED_KINDS)


def test_the_kinds_that_read_their_time_are_handled() -> None:
    assert set(HANDLERS) >= NEEDS_AT


def _fast_verdict(kind: str) -> str:
    try:
        FAST_DECODER.decode(b'{"kind": "%s"}' % kind.encode())
    except msgspec.ValidationError as exc:
        return str(exc)
    return "decoded"


def test_the_fast_path_decodes_every_kind() -> None:
    verdicts = {kind: _fast_verdict(kind) for kind in ev.KINDS}
    assert len(verdicts) == len(ev.KINDS) > 0
    for kind, verdict in verdicts.items():  # the tag known, a field perhaps missing
        assert verdict == "decoded" or "missing required field" in verdict, kind
    assert "Invalid value" in _fast_verdict("no_such_kind")


@settings(max_examples=20)
@given(st.sampled_from(sorted(IGNORED_KINDS)).flatmap(lambda k: event_of(ev.KINDS[k])))
def test_an_ignored_kind_leaves_the_state_but_its_head(body: ev.Event) -> None:
    kind = ev.kind_of(body)
    assert kind in IGNORED_KINDS
    stored = ev.StoredEvent(
        seq=7, kind=kind, at="t", actor="a", body=body, prev_hash=b"", hash=b"\x01"
    )
    before = fold_events([], DEFAULT_POLICY)
    after = fold_events([stored], DEFAULT_POLICY)
    after_head = (after.as_of_seq, after.head_hash)
    after.as_of_seq, after.head_hash = before.as_of_seq, before.head_hash
    assert msgspec.msgpack.encode(after) == msgspec.msgpack.encode(before)
    assert after_head == (7, "01")
