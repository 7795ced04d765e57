"""What a rollout's row holds, for its trail in the report (issue 27).

The response's text, and the failure's kind, class, message and HTTP status,
read from the row its outcome event located (through ``Ledger.files``, as
``results`` reads rows), for the rollouts whose trail the report lists only,
one row each: the selected attempt's outcome (a re-judged rollout's, the row
judged again), or, for a rollout waiting to run again, its latest outcome's. Every text
passes ``redact_secrets`` and is cut: ``TEXT_LIMIT`` characters of each while
the page's ``PAGE_BUDGET`` lasts, ``PREVIEW`` past it, so 5,000 rollouts
with long answers still make a page a browser opens (P-4).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, NamedTuple

import msgspec

from ledger import LedgerError, RowFacts, redact_secrets
from ledger.events import Location
from ledger.store.port import RunFiles

__all__ = ["PAGE_BUDGET", "PREVIEW", "TEXT_LIMIT", "Place", "read_content"]

#: Characters of a text the trail shows before "show it whole".
PREVIEW = 300
#: Characters of a text the page keeps at most.
TEXT_LIMIT = 4000
#: Characters the page keeps of every row's texts together; past it, previews.
PAGE_BUDGET = 4_000_000
#: Characters read of a text before it is redacted and cut: redacting a whole
#: megabyte answer to keep 4,000 characters of it would be wasted.
_READ_LIMIT = 4 * TEXT_LIMIT
#: Rows read per query (one pass over the files each, for a run in a folder).
_CHUNK = 512

Key = tuple[int, int]
_DECODER = msgspec.json.Decoder(dict[str, Any])


class Place(NamedTuple):
    """Where one attempt's outcome row is, and the facts its event recorded."""

    attempt: int
    location: Location
    facts: RowFacts | None  # None: an omission's row (its event keeps none)


class _Budget:
    """The characters the page may still keep."""

    def __init__(self, left: int) -> None:
        self.left = left

    def cut(self, text: str) -> dict[str, Any] | None:
        """``text`` redacted and cut, with its whole length; ``None`` if empty.

        The length is the redacted text's (the row's, past ``_READ_LIMIT``).
        """
        if not text:
            return None
        redacted = redact_secrets(text[:_READ_LIMIT])
        whole = len(redacted) if len(text) <= _READ_LIMIT else len(text)
        kept = redacted[: TEXT_LIMIT if self.left > 0 else PREVIEW]
        self.left -= len(kept)
        return {"text": kept, "chars": max(whole, len(kept))}


def read_content(files: RunFiles, places: Mapping[Key, Place]) -> dict[Key, Any]:
    """Each place's row in a few fields, read in chunks of ``_CHUNK`` rows."""
    keys = sorted(places)
    budget = _Budget(PAGE_BUDGET)
    found: dict[Key, Any] = {}
    with files.reader() as reader:
        for start in range(0, len(keys), _CHUNK):
            chunk = keys[start : start + _CHUNK]
            where = [places[key].location for key in chunk]
            try:
                rows = reader.read_many([(w.file, w.offset, w.length) for w in where])
            except LedgerError as exc:  # a file of the run cannot be read now
                reason = redact_secrets(str(exc))[:PREVIEW]
                found.update(
                    (key, {"attempt": places[key].attempt, "unreadable": reason})
                    for key in chunk
                )
                continue
            for key, data in zip(chunk, rows, strict=True):
                found[key] = _content(places[key], data, budget)
    return found


def _content(place: Place, data: bytes | None, budget: _Budget) -> dict[str, Any]:
    if data is None:
        return {"attempt": place.attempt, "unreadable": "its row's file is missing"}
    try:
        row = _DECODER.decode(data)
    except (msgspec.DecodeError, RecursionError):
        why = "its row no longer reads as JSON"
        return {"attempt": place.attempt, "unreadable": why}
    facts = place.facts
    kind = facts.selected_kind if facts else _string(row.get("_ng_failure_kind"))
    label = facts.failure_class if facts else _string(row.get("_ng_failure_class"))
    return {
        "attempt": place.attempt,
        "response": budget.cut(_response_text(row.get("response"))),
        "kind": _short(kind),
        "class": _short(label),
        "message": budget.cut(_message(row)),
        "http_status": None if facts is None else _http_status(facts),
        # shown as it stands, and said to have changed (verify names it).
        "changed": hashlib.sha256(data).hexdigest() != place.location.row_sha256,
    }


def _string(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _short(text: str | None) -> str | None:
    return None if text is None else redact_secrets(text[:_READ_LIMIT])[:PREVIEW]


def _response_text(response: object) -> str:
    """The assistant messages' text of a Responses API ``response``."""
    if not isinstance(response, Mapping):
        return ""
    output = response.get("output")
    items = output if isinstance(output, list) else []
    texts = [_message_text(item) for item in items if isinstance(item, Mapping)]
    return "\n\n".join(text for text in texts if text)


def _message_text(item: Mapping[str, Any]) -> str:
    if item.get("type", "message") != "message" or item.get("role") != "assistant":
        return ""
    content = item.get("content")
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    pieces = (
        part.get(key) for part in parts if isinstance(part, Mapping)
        for key in ("text", "refusal")
    )  # fmt: skip
    return "".join(piece for piece in pieces if isinstance(piece, str))


def _message(row: Mapping[str, Any]) -> str:
    """The failure's message: the collector's, the row's error, or its record's."""
    error = row.get("error")
    record = row.get("_ng_failure_record")
    failure = record.get("failure") if isinstance(record, Mapping) else None
    for value in (
        row.get("_ng_failure_message"),
        error,
        error.get("message") if isinstance(error, Mapping) else None,
        failure.get("message") if isinstance(failure, Mapping) else None,
    ):
        if isinstance(value, str) and value:
            return value
    return ""


def _http_status(facts: RowFacts) -> int | None:
    """The failure's HTTP status: its record's, an event's, or a failed call's."""
    record = facts.record_failure
    statuses = [record.http_status if record else None]
    statuses += [event.http_status for event in facts.failure_events]
    for _, call in facts.calls.evidence:
        statuses += [call.status_code, call.upstream_status_code]
    return next((s for s in statuses if s is not None and s >= 400), None)
