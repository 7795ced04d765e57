"""What a row keeps: responses, generations, saved answers, grades (ROW-1..ROW-12).

These answers decide whether a model's answer may ever be sampled again, so the
seed's distinctions are kept exactly: a completed response with empty output is
a retained response, a no-generation placeholder is not, an agent-stage
response the outcome policy rejected (``_ng_failure_response``) is diagnostic
only, and a native cleanup's partial response is a kept answer even when empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from ledger.rows.values import (
    as_float,
    as_list,
    as_mapping,
    as_str,
    dig,
    is_mapping,
    is_true,
)

__all__ = [
    "DIAGNOSTIC_KEYS",
    "LEGACY_FAILURE_CLASSES",
    "NG_NO_GENERATION_METADATA",
    "Answers",
    "answers",
    "counts_as_generation",
    "grade_record",
    "has_native_partial",
    "has_saved_generation",
    "is_diagnostic_error",
    "is_legacy_placeholder",
    "is_placeholder",
    "is_sidecar_row",
    "is_typed_response",
    "keeps_response",
    "keeps_saved_answer",
    "names_kept_deliverable",
    "raised_after_policy",
    "result_reward",
]

#: The ``response.metadata`` key an agent sets on a response built without generation.
NG_NO_GENERATION_METADATA: Final = "ng_no_generation"

#: ROW-1: the only keys a diagnostic error object has.
DIAGNOSTIC_KEYS: Final = frozenset(
    {"error", "message", "detail", "code", "type", "status", "status_code"}
)

#: ROW-5: producer classes of older agents whose failure paths built placeholders.
#: ROW-61 extends the placeholder shapes to every failure row, whatever its
#: class, so this list no longer gates them; it stays as ROW-5's record.
LEGACY_FAILURE_CLASSES: Final = frozenset(
    {
        "timeout_exceeded",
        "remote_agent_error",
        "kill_shaped",
        "transient",
        "legitimate",
        "incomplete",
        "skipped",
        "permanent",
    }
)
# ROW-5, ROW-61: response ids a producer's failure path gives its placeholder
# (stirrup's `-permanent-failure`, the conversational simulation's `_failed`).
_LEGACY_ID_SUFFIXES: Final = (
    "-failed",
    "_failed",
    "-timeout",
    "-killed",
    "-skipped",
    "-incomplete",
    "-error",
    "-permanent-failure",
)


# ROW-1 .. ROW-3: what a response object is and whether it counts as generation.


def is_typed_response(value: object) -> bool:
    """Whether ``value`` has an ``output`` key or ``"object": "response"`` (ROW-1)."""
    return is_mapping(value) and (
        "output" in value or value.get("object") == "response"
    )


def is_diagnostic_error(value: object) -> bool:
    """Whether ``value`` is an untyped, non-empty mapping of error keys only (ROW-1)."""
    return (
        is_mapping(value)
        and bool(value)
        and not is_typed_response(value)
        and all(key in DIAGNOSTIC_KEYS for key in value)
    )


def _output_items(response: Mapping[str, Any]) -> int:
    items = as_list(response.get("output"))
    return 0 if items is None else len(items)


def counts_as_generation(value: object) -> bool:
    """Whether a typed response has an output item or a status (ROW-2).

    Decision: a status counts when it is a non-empty string (Responses-API
    statuses are strings); any other value is of the wrong type, so absent.
    """
    if not is_typed_response(value):
        return False
    response = as_mapping(value)
    return _output_items(response) > 0 or as_str(response.get("status")) is not None


def is_placeholder(value: object) -> bool:
    """Whether a typed response is a placeholder, never a generation (ROW-3).

    It has neither output items nor a status, or its metadata carries
    ``NG_NO_GENERATION_METADATA``.
    """
    if not is_typed_response(value):
        return False
    marked = is_true(dig(value, "metadata", NG_NO_GENERATION_METADATA))
    return marked or not counts_as_generation(value)


# ROW-5: placeholders built by older agents' failure paths.


def is_sidecar_row(row: Mapping[str, Any]) -> bool:
    """Whether the row routes to the sidecar: a failure row or an omission (rows.md)."""
    return (
        as_str(row.get("_ng_failure_class")) is not None
        or is_mapping(row.get("_ng_failure_record"))
        or row.get("_ng_omitted") is True
    )


def is_legacy_placeholder(row: Mapping[str, Any]) -> bool:
    """Whether ROW-5 and ROW-61 apply to the row's ``response``: a placeholder
    a producer's failure path built, on a failure row of any class."""
    response = row.get("response")
    if not is_typed_response(response) or not is_sidecar_row(row):
        return False
    return _failure_path_response(as_mapping(response))


def _failure_path_response(response: Mapping[str, Any]) -> bool:
    # ROW-61: a placeholder id, every assistant message empty (tau2, pinchbench),
    # or `status: "failed"` with nothing in the output (harbor).
    return (
        _has_legacy_id(response)
        or _only_empty_messages(response)
        or _failed_without_output(response)
    )


def _has_legacy_id(response: Mapping[str, Any]) -> bool:
    ident = as_str(response.get("id"))
    return ident is not None and ident.endswith(_LEGACY_ID_SUFFIXES)


def _only_empty_messages(response: Mapping[str, Any]) -> bool:
    # Decision: every output item must be an assistant message, so an output
    # that also holds a tool call or reasoning (a real trajectory) is no
    # placeholder, even when its closing message is empty.
    items = as_list(response.get("output"))
    if not items:
        return False
    return all(_is_empty_assistant_message(as_mapping(item)) for item in items)


def _is_empty_assistant_message(item: Mapping[str, Any]) -> bool:
    is_message = item.get("type", "message") == "message"
    return is_message and item.get("role") == "assistant" and _text(item) == ""


def _failed_without_output(response: Mapping[str, Any]) -> bool:
    return response.get("status") == "failed" and not as_list(response.get("output"))


def _text(message: Mapping[str, Any]) -> str:
    # Decision: the text of a message is its string content, or the `text` and
    # `refusal` strings of its content parts; anything else carries no text.
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = as_list(content) or ()
    pieces = (dig(p, key) for p in parts for key in ("text", "refusal"))
    return "".join(piece for piece in pieces if isinstance(piece, str))


# ROW-4, ROW-6, ROW-7, ROW-10: generations, responses and saved answers.


def has_saved_generation(row: Mapping[str, Any]) -> bool:
    """Whether the row's ``response`` is a generation and no placeholder (ROW-4)."""
    response = row.get("response")
    # ROW-4: `_ng_failure_response` is diagnostic only and never consulted here.
    return (
        counts_as_generation(response)
        and not is_placeholder(response)
        and not is_legacy_placeholder(row)
    )


def keeps_response(row: Mapping[str, Any]) -> bool:
    """Whether the row keeps a typed response object, placeholders included (ROW-6)."""
    keys = ("response", "_ng_failure_response", "_ng_failure_partial_response")
    return any(is_typed_response(row.get(key)) for key in keys)


def has_native_partial(row: Mapping[str, Any]) -> bool:
    """Whether ``_ng_failure_partial_response`` is typed, even when empty (ROW-7)."""
    return is_typed_response(row.get("_ng_failure_partial_response"))


def keeps_saved_answer(row: Mapping[str, Any]) -> bool:
    """Whether the row holds a saved answer that is never sampled again (ROW-10).

    Decision: a collector projection whose ``kept_answer`` is not a boolean
    carries no flag of its own, so the row's responses decide.
    """
    flag = dig(row, "_ng_collector_projection", "kept_answer")
    if isinstance(flag, bool):
        return flag
    return has_saved_generation(row) or has_native_partial(row)


class Answers(NamedTuple):
    """What a row keeps (ROW-4..ROW-10), each answer computed once (P-7)."""

    has_saved_generation: bool
    legacy_placeholder: bool
    keeps_response: bool
    has_native_partial: bool
    keeps_saved_answer: bool


def answers(row: Mapping[str, Any], *, sidecar: bool) -> Answers:
    """``has_saved_generation``, ``is_legacy_placeholder``, ``keeps_response``,
    ``has_native_partial`` and ``keeps_saved_answer`` of ``row`` at once.

    ``sidecar`` is ``is_sidecar_row(row)``, which the caller has already.
    """
    response = row.get("response")
    typed = is_typed_response(response)
    legacy = typed and sidecar and _failure_path_response(as_mapping(response))
    # has_saved_generation: a generation (so typed) that is no placeholder,
    # i.e. not marked as built without generation (ROW-3), and not ROW-5's.
    saved = (
        counts_as_generation(response)
        and not is_true(dig(response, "metadata", NG_NO_GENERATION_METADATA))
        and not legacy
    )
    native = is_typed_response(row.get("_ng_failure_partial_response"))
    keeps = typed or native or is_typed_response(row.get("_ng_failure_response"))
    flag = dig(row, "_ng_collector_projection", "kept_answer")
    kept = flag if isinstance(flag, bool) else saved or native
    return Answers(saved, legacy, keeps, native, kept)


# ROW-62, ROW-63: failures raised after the policy finished (NeMo Gym 0.7.0's
# stirrup agent names no stage for a verifier's timeout or exception).


def names_kept_deliverable(row: Mapping[str, Any]) -> bool:
    """Whether the row names a kept deliverable (ROW-63).

    ``reuse_cached_deliverable: true``, or a non-empty ``deliverables_dir``.
    """
    folder = row.get("deliverables_dir")
    named = isinstance(folder, str) and folder != ""
    return row.get("reuse_cached_deliverable") is True or named


def _complete_response(value: object) -> bool:
    # ROW-62: `status: "completed"`, or, when no status is given, the policy's
    # final message present (the output ends in an assistant message with text).
    # Decision: any other status (`incomplete`, `failed`) says the policy did
    # not finish, whatever the output holds.
    response = as_mapping(value)
    status = response.get("status")
    if status is not None:
        return as_str(status) == "completed"
    items = as_list(response.get("output")) or ()
    last = as_mapping(items[-1]) if items else {}
    is_message = last.get("type", "message") == "message"
    return is_message and last.get("role") == "assistant" and _text(last) != ""


def raised_after_policy(
    row: Mapping[str, Any], *, kind: str | None, stage: str | None, saved: bool
) -> bool:
    """Whether a failure row's failure was raised in verification (ROW-62, ROW-63).

    A ``timeout_exceeded`` failure whose saved response is complete, or a
    failure that names a kept deliverable. ``kind`` is the selected kind,
    ``stage`` the final stage and ``saved`` ``has_saved_generation``.

    Decision: a row that names a stage other than ``verification`` keeps it;
    the producer's own stage is better evidence than the response's shape.
    """
    if stage not in (None, "verification"):
        return False
    if names_kept_deliverable(row):
        return True
    return (
        kind == "timeout_exceeded" and saved and _complete_response(row.get("response"))
    )


# ROW-12: the policy-independent halves of a recorded grade.


def grade_record(row: Mapping[str, Any]) -> float | None:
    """The ``_ng_grade`` reward when its status is ``completed``, else ``None``."""
    grade = as_mapping(row.get("_ng_grade"))
    if grade.get("status") != "completed":
        return None
    return as_float(grade.get("reward"))


def result_reward(row: Mapping[str, Any]) -> float | None:
    """A result row's numeric ``reward``; ``None`` on a sidecar row (a placeholder)."""
    if is_sidecar_row(row):
        return None
    return as_float(row.get("reward"))
