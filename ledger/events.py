"""The event vocabulary (EV-1..EV-3): one frozen tagged Struct per kind, one union.

Every body is a frozen msgspec Struct on the base :class:`Event`, tagged with a
stable ``kind`` string (never the class name). Bodies are encoded once, with
deterministic order, and those exact bytes are hashed and stored (EV-2).
A new field gets a default and goes at the end of its class; a field never
changes type; a breaking change is a new kind (house style, "Evolve without
breaking"). Events never hold a raw row, a response or a credential.
"""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

from ledger.event_base import (
    AttemptKey,
    Event,
    IndexEntry,
    Location,
    NonNegative,
    Positive,
    Reason,
    Sha256Hex,
)
from ledger.event_files import (
    NEWLINE_APPENDED,
    NEWLINE_RECORDED,
    TAIL_CUT,
    RowRefused,
    TailAction,
    TailRepaired,
)
from ledger.rows.facts import RowFacts

__all__ = [
    "EVENT_TYPES",
    "KINDS",
    "NEWLINE_APPENDED",
    "NEWLINE_RECORDED",
    "TAIL_CUT",
    "ZERO_HASH",
    "AnyEvent",
    "AttemptKey",
    "AttemptReserved",
    "AttemptsExtended",
    "AttemptsReleased",
    "DriftAccepted",
    "Event",
    "FailureBudgetReset",
    "FailureSaved",
    "IdentityAdopted",
    "IdentityOverridden",
    "IndexEntry",
    "JudgeAdmitted",
    "JudgeOutcomeSaved",
    "LegacyImported",
    "LegacyRejection",
    "LegacySource",
    "Location",
    "OmissionSaved",
    "PolicyChange",
    "PolicyChanged",
    "RerunApproved",
    "ResultSaved",
    "ResumeStarted",
    "RowRefused",
    "RunCreated",
    "StoredEvent",
    "TailAction",
    "TailRepaired",
    "chain_hash",
    "decode_body",
    "encode_body",
    "encode_header",
    "header_tail",
]


class RunCreated(Event, tag="run_created", frozen=True, kw_only=True):
    """The first event: the manifest (ID-30), identity, policy and input index."""

    format: str = "rollout-ledger/manifest"
    schema_version: int = 1
    run_id: str
    created_at: str
    source_path: str | None = None
    source_digest: str = "unverified"
    materialized_digest: str
    config_digest: str
    identity_scheme: int = 1
    max_rollout_attempts: Positive
    selection_policy: str = "latest_allocated"
    legacy_import: bool = False
    identity_overridden: bool = False
    identity: dict[str, Any] | None = None
    policy: dict[str, Any] = {}  # noqa: RUF012 (a msgspec Struct field; msgspec copies it)
    index: tuple[IndexEntry, ...] = ()


class LegacySource(msgspec.Struct, frozen=True, kw_only=True):
    """A source file an import read, with its size and digest."""

    file: str
    size: NonNegative
    sha256: Sha256Hex
    lines: NonNegative = 0  # newline-terminated lines in the file at import


class LegacyRejection(msgspec.Struct, frozen=True, kw_only=True):
    """One row an import refused, and why."""

    file: str
    line: Positive
    reason: Reason


class LegacyImported(Event, tag="legacy_imported", frozen=True, kw_only=True):
    """What an import of a run saved without a ledger read and took (REC-70)."""

    sources: tuple[LegacySource, ...] = ()
    rows_read: NonNegative = 0
    rows_imported: NonNegative = 0
    rows_rejected: NonNegative = 0
    rejections: tuple[LegacyRejection, ...] = ()
    foreign_manifest: dict[str, Any] | None = None


class AttemptsReleased(Event, tag="attempts_released", frozen=True, kw_only=True):
    """Attempts a plan released for dispatch or re-judgment (REC-3)."""

    dispatch: tuple[AttemptKey, ...] = ()
    rejudge: tuple[AttemptKey, ...] = ()


class AttemptReserved(
    Event, tag="attempt_reserved", frozen=True, kw_only=True, omit_defaults=True
):
    """An attempt reserved durably before its request is sent.

    ``stage_index`` (ROW-64): the later stage of a multistage attempt this
    reservation continues at; absent (and not encoded) otherwise.
    """

    task: NonNegative
    rollout: NonNegative
    attempt: NonNegative
    run_id: str
    stage_index: NonNegative | None = None


class ResultSaved(
    Event, tag="result_saved", frozen=True, kw_only=True, omit_defaults=True
):
    """A result row was written and flushed to ``OUT``.

    ``stage_index`` and ``final_stage_index`` (ROW-64): the stage a multistage
    row saves and its rollout's final stage; absent (and not encoded, so a
    plain row's event keeps its bytes) otherwise.
    """

    task: NonNegative
    rollout: NonNegative
    attempt: NonNegative
    location: Location
    facts: RowFacts
    stage_index: NonNegative | None = None
    final_stage_index: NonNegative | None = None


class FailureSaved(
    Event, tag="failure_saved", frozen=True, kw_only=True, omit_defaults=True
):
    """A failure row was written to the sidecar (stage fields: ``ResultSaved``)."""

    task: NonNegative
    rollout: NonNegative
    attempt: NonNegative
    location: Location
    sidecar_line: NonNegative
    facts: RowFacts
    stage_index: NonNegative | None = None
    final_stage_index: NonNegative | None = None


class OmissionSaved(Event, tag="omission_saved", frozen=True, kw_only=True):
    """An intentional omission stand-in was written to the sidecar (REC-35)."""

    task: NonNegative
    rollout: NonNegative
    attempt: NonNegative
    location: Location
    sidecar_line: NonNegative
    reason: Reason


class JudgeAdmitted(Event, tag="judge_admitted", frozen=True, kw_only=True):
    """A judge-only re-judgment was admitted, before the judge call (REC-30)."""

    admission_id: str
    task: NonNegative
    rollout: NonNegative
    attempt: NonNegative
    judge: str


class JudgeOutcomeSaved(Event, tag="judge_outcome_saved", frozen=True, kw_only=True):
    """The re-judgment's row was saved; this closes its admission (REC-30)."""

    admission_id: str
    outcome: str  # "graded" or "failed"
    reward: float | None = None
    failure_kind: str | None = None
    location: Location
    sidecar_line: NonNegative | None = None


class RerunApproved(Event, tag="rerun_approved", frozen=True, kw_only=True):
    """An operator approved one masked result to run again (REC-25)."""

    task: NonNegative
    rollout: NonNegative
    attempt: NonNegative
    reason: Reason


class AttemptsExtended(Event, tag="attempts_extended", frozen=True, kw_only=True):
    """The total attempt extension now in force (REC-11)."""

    total: Positive
    reason: Reason | None = None


class FailureBudgetReset(Event, tag="failure_budget_reset", frozen=True, kw_only=True):
    """Sidecar lines before this reset no longer count against the budget (REC-16)."""

    excluded_lines: NonNegative
    before_seq: NonNegative
    reason: Reason


class PolicyChange(msgspec.Struct, frozen=True, kw_only=True):
    """One policy setting's old and new value."""

    old: Any
    new: Any


class PolicyChanged(Event, tag="policy_changed", frozen=True, kw_only=True):
    """Policy settings changed after creation (REC-60)."""

    changes: dict[str, PolicyChange]
    reason: Reason | None = None


class DriftAccepted(Event, tag="drift_accepted", frozen=True, kw_only=True):
    """A resume proceeded across operational drift (REC-53)."""

    from_digest: str
    to_digest: str
    operational_keys: tuple[str, ...]
    identity: dict[str, Any]


class IdentityAdopted(Event, tag="identity_adopted", frozen=True, kw_only=True):
    """A run saved without an identity took the current one (REC-57)."""

    from_digest: str
    to_digest: str
    identity: dict[str, Any]


class IdentityOverridden(Event, tag="identity_overridden", frozen=True, kw_only=True):
    """``--allow-unsafe`` proceeded across a refusal (REC-54)."""

    from_digest: str
    to_digest: str
    semantic_keys: tuple[str, ...]
    identity: dict[str, Any]
    materialized_digest: str
    source_digest: str
    reason: Reason | None = None


class ResumeStarted(Event, tag="resume_started", frozen=True, kw_only=True):
    """A resume passed the gate; its plan's counts and options."""

    config_digest: str
    counts: dict[str, int]
    options: dict[str, Any] = {}  # noqa: RUF012 (a msgspec Struct field; msgspec copies it)


AnyEvent = (
    RunCreated
    | LegacyImported
    | AttemptsReleased
    | AttemptReserved
    | ResultSaved
    | FailureSaved
    | OmissionSaved
    | JudgeAdmitted
    | JudgeOutcomeSaved
    | RerunApproved
    | AttemptsExtended
    | FailureBudgetReset
    | PolicyChanged
    | DriftAccepted
    | IdentityAdopted
    | IdentityOverridden
    | TailRepaired
    | ResumeStarted
    | RowRefused
)

EVENT_TYPES: tuple[type[Event], ...] = AnyEvent.__args__
#: Every kind tag this version knows, mapped to its Struct.
KINDS: dict[str, type[Event]] = {
    msgspec.inspect.type_info(t).tag: t  # type: ignore[attr-defined]
    for t in EVENT_TYPES
}

ZERO_HASH = bytes(32)

# One encoder and one decoder, reused (house style). "deterministic" keeps
# Struct fields in definition order and sorts dict keys, so equal bodies are
# equal bytes.
_BODY_ENCODER = msgspec.json.Encoder(order="deterministic")
_BODY_DECODER: msgspec.json.Decoder[AnyEvent] = msgspec.json.Decoder(AnyEvent)


def encode_body(body: Event) -> bytes:
    """The stored bytes of an event body (EV-2)."""
    return _BODY_ENCODER.encode(body)


def decode_body(data: bytes) -> AnyEvent:
    """Decode stored body bytes into their Struct."""
    return _BODY_DECODER.decode(data)


def kind_of(body: Event) -> str:
    """The kind tag of a body."""
    return body.__struct_config__.tag  # type: ignore[return-value]


def encode_header(seq: int, kind: str, at: str, actor: str) -> bytes:
    """``[seq, kind, at, actor]`` as deterministic JSON plus a newline (EV-2)."""
    return _BODY_ENCODER.encode([seq, kind, at, actor]) + b"\n"


def header_tail(kind: str, at: str, actor: str) -> bytes:
    """The header after its seq: ``b"[%d" % seq + header_tail(...)`` is the header.

    ``,"kind","at","actor"]`` and the newline, as :func:`encode_header` encodes
    them (a JSON integer is its decimal digits), so a batch encodes it once.
    """
    return b"," + _BODY_ENCODER.encode([kind, at, actor])[1:] + b"\n"


def chain_hash(
    prev_hash: bytes, seq: int, kind: str, at: str, actor: str, body: bytes
) -> bytes:
    """``sha256(prev_hash || header || body_bytes)`` as 32 raw bytes (EV-2)."""
    header = _BODY_ENCODER.encode([seq, kind, at, actor])
    return hashlib.sha256(b"".join((prev_hash, header, b"\n", body))).digest()


class StoredEvent(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """An event as stored: the envelope of EV-1 around its decoded body.

    Not tracked by the garbage collector (``gc=False``): it holds strings,
    bytes and a frozen body, so it can never be part of a reference cycle,
    and writers and readers make millions of them (P-2, P-3).
    """

    seq: int
    kind: str
    at: str
    actor: str
    body: AnyEvent
    prev_hash: bytes
    hash: bytes
