"""One rollout as the viewer shows it: every attempt with what its row holds.

For each attempt: the events that record it, and its row read back from the
collector's file: the response's text, the reward, the failure kind, class,
message and HTTP status, and the timings the row gives. With them the input
messages (the materialized row), the decision in words and, for auditors,
its rule. Every text passes ``redact_secrets`` and is cut at ``CUT``
characters (the whole of it is kept up to ``WHOLE``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from ledger import Ledger, redact_secrets
from projections.decisions.rules import Decision
from projections.fold.locations import raw_location
from projections.fold.state import RunState
from projections.views.next_steps import NextSteps, held_choices
from projections.words.describe import describe_rollout

__all__ = [
    "CUT",
    "Attempted",
    "RolloutDetail",
    "Text",
    "failure_messages",
    "rollout_detail",
]

CUT = 600
WHOLE = 200_000
_DECODER = msgspec.json.Decoder()
_TIMING_WORDS = ("time", "latency", "duration", "elapsed", "seconds")


class Text(msgspec.Struct, frozen=True):
    """A text cut for a page: its start, and the whole when it was cut."""

    head: str
    whole: str | None = None

    @classmethod
    def of(cls, text: str) -> Text:
        text = redact_secrets(text)[:WHOLE]
        return cls(text) if len(text) <= CUT else cls(text[:CUT], text)


class Attempted(msgspec.Struct, frozen=True, kw_only=True):
    """One attempt: its events and what its row holds."""

    attempt: int
    events: list[dict[str, Any]]
    file: str | None = None
    response: Text | None = None
    reward: float | None = None
    kind: str | None = None
    failure_class: str | None = None
    message: Text | None = None
    http_status: int | None = None
    timings: dict[str, float] = {}


class RolloutDetail(msgspec.Struct, frozen=True, kw_only=True):
    """A rollout, its decision and its attempts (the newest first)."""

    task: int
    rollout: int
    decision: str
    reason: str
    rule: str
    words: str
    reward: float | None
    messages: list[tuple[str, Text]]
    attempts: list[Attempted]
    #: A held rollout's choices, each in words with its command (issue 28).
    choices: list[tuple[str, str]] = []

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the API (``docs/json.md``)."""
        found: dict[str, Any] = msgspec.to_builtins(self)
        return found


def _text(value: Any) -> str:
    """The text inside a message content (a string, or parts holding text)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_text(part) for part in value if part is not None)
    if isinstance(value, Mapping):
        for key in ("text", "content", "output_text", "arguments"):
            if key in value:
                return _text(value[key])
    return ""


def _messages(row: Mapping[str, Any]) -> list[tuple[str, Text]]:
    params = row.get("responses_create_params")
    given = params.get("input") if isinstance(params, Mapping) else None
    if isinstance(given, str):
        return [("user", Text.of(given))]
    if not isinstance(given, list):
        return []
    return [
        (str(m.get("role") or m.get("type") or "message"), Text.of(_text(m)))
        for m in given
        if isinstance(m, Mapping)
    ]


def _response(row: Mapping[str, Any]) -> Text | None:
    response = row.get("response")
    if not isinstance(response, Mapping):
        return None
    output = response.get("output")
    parts = [
        _text(item.get("content") or item.get("arguments") or "")
        for item in output or []
        if isinstance(item, Mapping)
    ]
    text = "\n".join(p for p in parts if p)
    return Text.of(text) if text else None


def _status(row: Mapping[str, Any]) -> int | None:
    for source in (row, row.get("error")):
        if isinstance(source, Mapping):
            for key in ("http_status", "status_code", "status"):
                value = source.get(key)
                if isinstance(value, int) and not isinstance(value, bool):
                    return value
    return None


def _message(row: Mapping[str, Any]) -> Text | None:
    for key in ("error", "message", "_ng_failure_message", "detail"):
        value = row.get(key)
        if value:
            return Text.of(
                value if isinstance(value, str) else _text(value) or str(value)
            )
    return None


def _timings(row: Mapping[str, Any]) -> dict[str, float]:
    return {
        key: float(value)
        for key, value in row.items()
        if any(word in key for word in _TIMING_WORDS)
        and isinstance(value, int | float)
        and not isinstance(value, bool)
    }


def _read(ledger: Ledger, file: str, offset: int, length: int) -> bytes | None:
    with ledger.files.reader() as reader:
        return reader.read_at(file, offset, length)


def _row(ledger: Ledger, where: Any) -> dict[str, Any] | None:
    data = _read(ledger, where.file, where.offset, where.length)
    try:
        found = _DECODER.decode(data) if data is not None else None
    except (msgspec.DecodeError, RecursionError):
        return None
    return found if isinstance(found, dict) else None


def _attempted(ledger: Ledger, number: int, seqs: list[int]) -> Attempted:
    events, row, where = [], None, None
    for seq in sorted(set(seqs)):
        event = next(ledger.events(seq), None)
        if event is None or event.seq != seq:
            continue
        said = {"seq": seq, "kind": event.kind, "at": event.at, "by": event.actor}
        reason = getattr(event.body, "reason", None)
        if isinstance(reason, str):
            said["reason"] = redact_secrets(reason)
        events.append(said)
        place = getattr(event.body, "location", None)
        if place is not None:
            where, row = place, _row(ledger, place)
    if row is None:
        return Attempted(attempt=number, events=events)
    failure_class = row.get("_ng_failure_class")
    reward = row.get("reward")
    return Attempted(
        attempt=number,
        events=events,
        file=None if where is None else ledger.files.describe(where.file),
        response=_response(row),
        reward=float(reward) if isinstance(reward, int | float) else None,
        failure_class=redact_secrets(failure_class)
        if isinstance(failure_class, str)
        else None,
        message=_message(row),
        http_status=_status(row),
        timings=_timings(row),
    )


def rollout_detail(
    ledger: Ledger, state: RunState, decision: Decision, task: int, rollout: int
) -> RolloutDetail:
    """The rollout ``(task, rollout)`` of ``state`` (``KeyError``: none such)."""
    kept = state.rollout(task, rollout)
    materialized = _read(
        ledger, ledger.files.names.materialized, kept.offset, kept.length
    )
    try:
        given = _DECODER.decode(materialized) if materialized else {}
    except (msgspec.DecodeError, RecursionError):
        given = {}
    attempts = []
    attempt = kept.latest
    while attempt is not None:
        seqs = [attempt.seq] + [
            j.outcome_seq or j.seq for j in kept.judgments_of(attempt.attempt)
        ]
        approved = (kept.approvals or {}).get(attempt.attempt)
        if approved:
            seqs.append(approved)
        found = _attempted(ledger, attempt.attempt, [s for s in seqs if s])
        attempts.append(msgspec.structs.replace(found, kind=attempt.kind))
        attempt = attempt.earlier
    return RolloutDetail(
        task=task,
        rollout=rollout,
        decision=decision.value,
        reason=decision.reason,
        rule=decision.rule,
        words=describe_rollout(state, task, rollout, decision),
        reward=decision.score,
        messages=_messages(given if isinstance(given, Mapping) else {}),
        attempts=attempts,
        choices=_choices(ledger, state, decision, task, rollout),
    )


def _choices(
    ledger: Ledger, state: RunState, decision: Decision, task: int, rollout: int
) -> list[tuple[str, str]]:
    """A held rollout's choices: run it again, or grade the answer it kept."""
    if decision.value != "held":
        return []
    steps = NextSteps.of(ledger, state)
    key = (task, rollout, decision.attempt, decision.reason, decision.kind)
    choices = held_choices(steps, [key])
    held = choices.rollouts[0]
    found = []
    if held.kept_answer:
        found.append(
            (
                "Run it again (a new attempt; the saved answer is discarded)",
                held.sample_again,
            )
        )
        found += [
            (
                f"Or grade the saved answer: every held rollout of kind {g.kind} "
                f"({g.rollouts} here) is graded by the judge next round; the dry "
                "run names each one that moves",
                g.command,
            )
            for g in choices.grade_saved
        ]
    else:
        found.append(("Run it again (a new attempt)", held.sample_again))
    return found


def failure_messages(ledger: Ledger, state: RunState) -> dict[tuple[int, int], str]:
    """The failure message of each rollout whose selected attempt failed.

    Read from the failure rows themselves (one read of them all), for the
    list's text search; redacted, at most ``CUT`` characters each.
    """
    wanted: dict[int, tuple[int, int]] = {}
    for task, by_rollout in state.rollouts.items():
        for index, rollout in by_rollout.items():
            latest = rollout.latest
            if latest is not None and latest.kind is not None and latest.seq:
                wanted[latest.seq] = (task, index)
    places = []
    for row in ledger.raw_events_at(sorted(wanted)):
        where = raw_location(row)
        if where is not None:
            places.append((wanted[row.seq], where))
    found: dict[tuple[int, int], str] = {}
    with ledger.files.reader() as reader:
        datas = reader.read_many([(w.file, w.offset, w.length) for _, w in places])
    for (key, _), data in zip(places, datas, strict=True):
        try:
            decoded = _DECODER.decode(data) if data else None
        except (msgspec.DecodeError, RecursionError):
            continue
        said = _message(decoded) if isinstance(decoded, dict) else None
        if said is not None:
            found[key] = said.head
    return found
