"""The policy-dependent row rules, written once over stored :class:`RowFacts` (rows.md).

Each rule here is ``rule(facts, policy)``; the row-level function of the same
name in :mod:`ledger.rows.rules` is ``rule(row_facts(row), policy)``, and projections
call these on the facts stored in events, so the two can never drift apart and a
policy change applies on replay. ``policy=None`` means the shared defaults.
"""

from __future__ import annotations

from typing import Final

from ledger.policy.model import DEFAULT_POLICY, RecoveryPolicy
from ledger.rows.facts import CallFacts, Delivery, FailureEventFacts, RowFacts
from ledger.rows.failure_kinds import (
    Side,
    is_registered,
    is_transport_kind,
    kind_info,
    kind_is,
    side,
)

__all__ = [
    "faults_own_window",
    "has_recorded_grade",
    "is_final_agent_timeout",
    "is_infrastructure_agent_timeout",
    "is_regrade",
    "is_server_fault_call",
    "kind_side",
    "masked_candidate_kind",
    "masked_infrastructure_kind",
    "masked_kept_answer_kind",
    "masked_regrade_kind",
    "masked_without_artifact_kind",
    "route_failure",
    "sandbox_or_tool_fault",
]

# ROW-31: evidence that is material in time; timeouts, cancellations and
# truncated streams never are (a slow model is not time spent on our side).
# Which kinds are material is the failure-kind table's `material_in_time`.
_MATERIAL_CATEGORIES: Final = frozenset({"upstream_error", "connection", "rate_limit"})
# ROW-33: who may own a sandbox-or-tool fault, and the agent's execution window.
_FAULT_SOURCES: Final = frozenset({"sandbox", "session", "provider", "tool_server"})
_WINDOW_STAGES: Final = frozenset({"admission", "seed", "agent"})


def _or_default(policy: RecoveryPolicy | None) -> RecoveryPolicy:
    return DEFAULT_POLICY if policy is None else policy


def kind_side(facts: RowFacts, policy: RecoveryPolicy | None = None) -> Side | None:
    """The side of the row's selected kind at its final stage, with its applied class.

    Decision: the row's applied class (ROW-50) classifies the row's own kind
    here and in every rule below that reads it; the kinds of the events inside
    a record or a model call are other components' evidence and are classified
    without it.
    """
    return side(
        facts.selected_kind,
        facts.stage,
        policy=_or_default(policy),
        result_class=facts.result_class,
    )


def is_regrade(
    kind: str | None, stage: str | None, policy: RecoveryPolicy | None = None
) -> bool:
    """Whether ``kind`` is a regrade kind or a ``transport_*`` verify call (ROW-40)."""
    regrade = _or_default(policy).regrade_kinds
    verify_call = is_transport_kind(kind) and stage == "verification"
    return kind_is(kind, *regrade) or verify_call


# ROW-31, ROW-32: server faults in the captured model calls.


def _material_status(status: int | None) -> bool:
    # ROW-31: 429, or a 5xx other than 504 (a gateway timeout is a slow upstream).
    if status is None:
        return False
    return status == 429 or (500 <= status <= 599 and status != 504)


def _material_event(event: FailureEventFacts, policy: RecoveryPolicy) -> bool:
    # An unregistered kind has no side, so it is never material either.
    info = kind_info(event.kind)
    if info is None or not info.material_in_time:
        return False
    return side(event.kind, event.stage, policy=policy) == "evaluation"


def is_server_fault_call(call: CallFacts, policy: RecoveryPolicy | None = None) -> bool:
    """Whether the call shows evaluation-side evidence material in time (ROW-31).

    Non-material evidence on the same call never vetoes material evidence.
    """
    chosen = _or_default(policy)
    return (
        any(_material_status(s) for s in (call.status_code, call.upstream_status_code))
        or call.error_category in _MATERIAL_CATEGORIES
        or any(_material_event(e, chosen) for e in call.failure_events)
    )


def faults_own_window(facts: RowFacts, policy: RecoveryPolicy | None = None) -> bool:
    """Whether server-faulted model calls own the attempt's window (ROW-32).

    The last call faulted (no window needed), or the faulted calls' durations
    (unknown counts 0) fill at least ``policy.fault_share`` of the window: the
    wall time, else the span of the calls, when positive.
    """
    chosen = _or_default(policy)
    last = facts.calls.last
    if last is not None and is_server_fault_call(last, chosen):
        return True
    window = facts.wallclock if facts.wallclock is not None else facts.calls.span
    if window is None or window <= 0:
        return False
    faulted_ms = sum(
        call.duration_ms or 0.0
        for _, call in facts.calls.evidence
        if is_server_fault_call(call, chosen)
    )
    return faulted_ms / 1000 >= chosen.fault_share * window


# ROW-33, ROW-35, ROW-36: sandbox faults and agent timeouts.


def _fault_family(event: FailureEventFacts) -> bool:
    # The kind's family matters only for registered kinds: any other kind has
    # no side, and sandbox_or_tool_fault also asks for an evaluation-side kind.
    if event.source in _FAULT_SOURCES:
        return True
    info = kind_info(event.kind)
    return info is not None and info.sandbox_family


def sandbox_or_tool_fault(
    facts: RowFacts, policy: RecoveryPolicy | None = None
) -> bool:
    """Whether a sandbox or tool-server failure event in the window is ours (ROW-33).

    The events are the record's ``failure_events`` and the record's own failure
    (with the record's source). One counts when its source is a sandbox,
    session, provider or tool server, or its kind is of those families; when it
    names its own stage inside the agent's window (cleanup and verification lie
    outside); and when its kind classifies evaluation-side.
    """
    chosen = _or_default(policy)
    own = () if facts.record_failure is None else (facts.record_failure,)
    return any(
        _fault_family(event)
        and event.stage in _WINDOW_STAGES
        and side(event.kind, event.stage, policy=chosen) == "evaluation"
        for event in (*facts.failure_events, *own)
    )


def _agent_deadline(facts: RowFacts) -> bool:
    # ROW-35, ROW-36: the selected kind says the agent ran out of its deadline
    # (`agent_timeout`, or its alias `timeout_exceeded`). ROW-62: a timeout
    # raised in verification is the verifier's, never the agent's deadline.
    info = kind_info(facts.selected_kind)
    deadline = info is not None and info.agent_deadline
    return deadline and facts.stage != "verification"


def is_infrastructure_agent_timeout(
    facts: RowFacts, policy: RecoveryPolicy | None = None
) -> bool:
    """Whether an ``agent_timeout`` row's window held a server-side fault (ROW-35)."""
    return _agent_deadline(facts) and (
        sandbox_or_tool_fault(facts, policy) or faults_own_window(facts, policy)
    )


def is_final_agent_timeout(
    facts: RowFacts, policy: RecoveryPolicy | None = None
) -> bool:
    """Whether the agent ran out of its own deadline and kept its answer (ROW-36)."""
    return (
        _agent_deadline(facts)
        and facts.keeps_saved_answer
        and not is_infrastructure_agent_timeout(facts, policy)
    )


def route_failure(facts: RowFacts) -> Delivery | None:
    """The delivery of a selected route failure, else ``None`` (ROW-37)."""
    kind = facts.selected_kind
    collector_transport = (
        is_transport_kind(kind)
        and facts.record_source == "collector"
        and facts.stage != "verification"
    )
    info = kind_info(kind)
    if (info is not None and info.route) or collector_transport:
        return facts.delivery or "possibly_delivered"
    return None


# ROW-40 .. ROW-44: masked results.


def _masked_by_environment(facts: RowFacts) -> bool:
    return (
        facts.row_kind == "result"
        and facts.masked
        and facts.mask_owner == "environment"
    )


def _evaluation_kind(facts: RowFacts, policy: RecoveryPolicy) -> bool:
    # ROW-40: the kind itself must be registered; ROW-34 keeps registration to
    # the shared names (an alias such as `remote_agent_error` is not), while
    # the classifier resolves aliases.
    registered = is_registered(facts.selected_kind)
    return registered and kind_side(facts, policy) == "evaluation"


def masked_candidate_kind(
    facts: RowFacts, policy: RecoveryPolicy | None = None
) -> str | None:
    """The evaluation-side kind of an environment-masked result (ROW-40).

    What ROW-41 and ROW-42 share, all but the saved answer: regrade kinds and
    ``transport_*`` verify calls are left to ROW-43.
    """
    chosen = _or_default(policy)
    if not _masked_by_environment(facts) or facts.rejudgment_of is not None:
        return None
    if facts.omitted or not _evaluation_kind(facts, chosen):
        return None
    kind = facts.selected_kind
    return None if is_regrade(kind, facts.stage, chosen) else kind


def masked_infrastructure_kind(
    facts: RowFacts, policy: RecoveryPolicy | None = None
) -> str | None:
    """ROW-40's kind when the row keeps no saved answer (ROW-41)."""
    return None if facts.keeps_saved_answer else masked_candidate_kind(facts, policy)


def masked_kept_answer_kind(
    facts: RowFacts, policy: RecoveryPolicy | None = None
) -> str | None:
    """ROW-40's kind when the row keeps a saved answer and has no grade (ROW-42)."""
    if not facts.keeps_saved_answer or has_recorded_grade(facts, policy):
        return None
    return masked_candidate_kind(facts, policy)


def masked_regrade_kind(
    facts: RowFacts, policy: RecoveryPolicy | None = None
) -> str | None:
    """The kind of a masked result whose saved answer is graded again (ROW-43).

    A regrade kind or a ``transport_*`` verify call, on an environment-masked
    result row that keeps a saved answer.
    """
    if not _masked_by_environment(facts) or not facts.keeps_saved_answer:
        return None
    kind = facts.selected_kind
    return kind if is_regrade(kind, facts.stage, policy) else None


def masked_without_artifact_kind(
    facts: RowFacts, policy: RecoveryPolicy | None = None
) -> str | None:
    """What a row alone decides of masked-without-artifact: ROW-42's kind (ROW-44)."""
    return masked_kept_answer_kind(facts, policy)


# ROW-12: a recorded grade.


def has_recorded_grade(facts: RowFacts, policy: RecoveryPolicy | None = None) -> bool:
    """Whether the verifier finished grading this attempt (ROW-12)."""
    if facts.grade_record is not None:
        return True
    # ROW-12: a reward on a failure row (or an omission) is a placeholder.
    if facts.row_kind != "result" or facts.reward is None:
        return False
    return not _grader_placeholder(facts, _or_default(policy))


def _grader_placeholder(facts: RowFacts, policy: RecoveryPolicy) -> bool:
    # ROW-12: grading precedes cleanup, so a cleanup failure leaves a real grade;
    # any other environment-masked, evaluation-side row's reward is the grader's
    # placeholder.
    if facts.stage == "cleanup" or not _evaluation_kind(facts, policy):
        return False
    candidate = masked_candidate_kind(facts, policy) is not None
    return candidate or masked_regrade_kind(facts, policy) is not None
