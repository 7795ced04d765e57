"""The row rules of rows.md (ROW-1..ROW-50) as pure functions of one row.

This module is the row-level API: the policy-independent answers are read from
the row directly (:mod:`ledger.rows.answers`, :mod:`ledger.rows.kinds`,
:mod:`ledger.rows.calls`), and every policy-dependent rule is
``rule(row_facts(row), policy)`` over :mod:`ledger.rows.policy_rules`, the same
functions projections call on stored facts. Each takes any mapping and treats a
value of the wrong type as absent; only :func:`rollout_id` raises (``RowError``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ledger.policy.model import RecoveryPolicy
from ledger.rows import policy_rules as facts_rules
from ledger.rows.all_facts import row_facts
from ledger.rows.answers import (
    NG_NO_GENERATION_METADATA,
    has_native_partial,
    has_saved_generation,
    keeps_response,
    keeps_saved_answer,
    names_kept_deliverable,
)
from ledger.rows.calls import model_calls, reduce_call, rollout_wallclock
from ledger.rows.facts import CallFacts, Delivery
from ledger.rows.failure_kinds import kind_is
from ledger.rows.kinds import (
    FinalContext,
    applied_result_class,
    final_context,
    rollout_id,
    row_route,
    selected_failure_kind,
)

__all__ = [
    "NG_NO_GENERATION_METADATA",
    "FinalContext",
    "applied_result_class",
    "faults_own_window",
    "final_context",
    "has_native_partial",
    "has_recorded_grade",
    "has_saved_generation",
    "is_final_agent_timeout",
    "is_infrastructure_agent_timeout",
    "is_server_fault_call",
    "keeps_response",
    "keeps_saved_answer",
    "kind_is",
    "masked_candidate_kind",
    "masked_infrastructure_kind",
    "masked_kept_answer_kind",
    "masked_regrade_kind",
    "masked_without_artifact_kind",
    "model_calls",
    "names_kept_deliverable",
    "rollout_id",
    "rollout_wallclock",
    "route_failure",
    "row_facts",
    "row_route",
    "sandbox_or_tool_fault",
    "selected_failure_kind",
]

Row = Mapping[str, Any]


def has_recorded_grade(row: Row, *, policy: RecoveryPolicy | None = None) -> bool:
    """Whether the verifier finished grading this attempt (ROW-12)."""
    return facts_rules.has_recorded_grade(row_facts(row), policy)


def is_server_fault_call(
    call: CallFacts | Mapping[str, Any], *, policy: RecoveryPolicy | None = None
) -> bool:
    """Whether a model call shows evaluation-side evidence material in time (ROW-31).

    ``call`` is a reduced call from :func:`model_calls`, or a mapping of the
    reduced fields (``status_code``, ``upstream_status_code``, ...), reduced here.
    """
    reduced = call if isinstance(call, CallFacts) else reduce_call(call)
    return facts_rules.is_server_fault_call(reduced, policy)


def faults_own_window(row: Row, *, policy: RecoveryPolicy | None = None) -> bool:
    """Whether server-faulted model calls own the attempt's window (ROW-32)."""
    return facts_rules.faults_own_window(row_facts(row), policy)


def sandbox_or_tool_fault(row: Row, *, policy: RecoveryPolicy | None = None) -> bool:
    """Whether an eligible sandbox or tool-server failure event is ours (ROW-33)."""
    return facts_rules.sandbox_or_tool_fault(row_facts(row), policy)


def is_infrastructure_agent_timeout(
    row: Row, *, policy: RecoveryPolicy | None = None
) -> bool:
    """Whether an ``agent_timeout`` row's window held a server-side fault (ROW-35)."""
    return facts_rules.is_infrastructure_agent_timeout(row_facts(row), policy)


def is_final_agent_timeout(row: Row, *, policy: RecoveryPolicy | None = None) -> bool:
    """Whether the agent ran out of its own deadline and kept its answer (ROW-36)."""
    return facts_rules.is_final_agent_timeout(row_facts(row), policy)


def route_failure(row: Row) -> Delivery | None:
    """The delivery of a selected route failure, else ``None`` (ROW-37)."""
    return facts_rules.route_failure(row_facts(row))


def masked_candidate_kind(
    row: Row, *, policy: RecoveryPolicy | None = None
) -> str | None:
    """The evaluation-side kind of an environment-masked result (ROW-40)."""
    return facts_rules.masked_candidate_kind(row_facts(row), policy)


def masked_infrastructure_kind(
    row: Row, *, policy: RecoveryPolicy | None = None
) -> str | None:
    """The kind of a masked result infrastructure left unmeasured (ROW-41)."""
    return facts_rules.masked_infrastructure_kind(row_facts(row), policy)


def masked_kept_answer_kind(
    row: Row, *, policy: RecoveryPolicy | None = None
) -> str | None:
    """The kind of a masked result with a kept answer and no grade (ROW-42)."""
    return facts_rules.masked_kept_answer_kind(row_facts(row), policy)


def masked_regrade_kind(
    row: Row, *, policy: RecoveryPolicy | None = None
) -> str | None:
    """The kind of a masked result whose saved answer is graded again (ROW-43)."""
    return facts_rules.masked_regrade_kind(row_facts(row), policy)


def masked_without_artifact_kind(
    row: Row, *, policy: RecoveryPolicy | None = None
) -> str | None:
    """The part of masked-without-artifact a row alone decides (ROW-44)."""
    return facts_rules.masked_without_artifact_kind(row_facts(row), policy)
