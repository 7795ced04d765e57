"""The failure-kind table is the single source of what a kind means.

The classifier (ROW-34), the policy's defaults (REC-60), the policy-dependent
rules (``ledger.facts_rules``) and REC-20's classification read each kind's
attributes from ``KIND_INFO``; these tests pin the table to the spec and check,
kind by kind, that each reader answers what the table says.
"""

from __future__ import annotations

import pytest

from ledger import FAILURE_KINDS, RecoveryPolicy, RowFacts, facts_rules, side
from tests.internals import (
    DEFAULT_REGRADE_KINDS,
    KIND_ALIASES,
    KIND_INFO,
    STAGES,
    CallFacts,
    FailureEventFacts,
    KindInfo,
    classify,
    kind_info,
)

KINDS = sorted(FAILURE_KINDS)


def _with(attribute: str) -> set[str]:
    return {kind for kind, info in KIND_INFO.items() if getattr(info, attribute)}


# ROW-34, REC-60: one row per registered kind, and the defaults come from it.


def test_row_34_every_registered_kind_has_one_row() -> None:
    assert set(KIND_INFO) == FAILURE_KINDS
    assert len(KIND_INFO) == 24
    assert all(isinstance(info, KindInfo) for info in KIND_INFO.values())


def test_rec_60_default_regrade_kinds_are_the_tables() -> None:
    regraded = tuple(sorted(_with("regraded_by_default")))
    assert regraded == ("judge_failed", "judge_unparseable")
    assert regraded == DEFAULT_REGRADE_KINDS
    assert RecoveryPolicy().regrade_kinds == regraded


@pytest.mark.parametrize("kind", KINDS)
def test_row_34_side_is_the_tables(kind: str) -> None:
    info = KIND_INFO[kind]
    by_stage = info.stage_sides or {}
    for stage in STAGES:
        assert side(kind, stage) == by_stage.get(stage, info.side)
    # A kind whose side depends on the stage has none when the stage is unknown.
    assert side(kind) == (None if info.stage_sides else info.side)


@pytest.mark.parametrize(("alias", "shared"), sorted(KIND_ALIASES.items()))
def test_row_22_kind_info_resolves_aliases(alias: str, shared: str) -> None:
    assert kind_info(alias) is KIND_INFO[shared]


@pytest.mark.parametrize("kind", [None, 7, "transient", "srv:session_lost", ""])
def test_row_34_kind_info_of_no_registered_kind(kind: object) -> None:
    assert kind_info(kind) is None


# The spec's lists, each one attribute of the table.


@pytest.mark.parametrize(
    ("attribute", "kinds"),
    [
        # REC-4, REC-20.5e: the collector's own lifecycle.
        ("lifecycle", {"cancelled", "shutdown", "kill_shaped"}),
        # ROW-33: the sandbox, session, provider and tool-server families.
        (
            "sandbox_family",
            {
                "environment_server_failed",
                "provider_unavailable",
                "provider_quota_exhausted",
                "provider_oom_killed",
                "session_lost",
                "session_expired",
                "session_release_failed",
            },
        ),
        # ROW-37: the route failure named by kind.
        ("route", {"agent_request_failed"}),
        # ROW-35, ROW-36, REC-15: the agent's own deadline.
        ("agent_deadline", {"agent_timeout"}),
        # ROW-34: decided by the stage.
        ("stage_sides", {"provider_oom_killed"}),
    ],
)
def test_spec_lists_are_table_attributes(attribute: str, kinds: set[str]) -> None:
    assert _with(attribute) == kinds


def test_row_31_kinds_never_material_in_time() -> None:
    not_material = FAILURE_KINDS - _with("material_in_time")
    assert not_material == {"transport_timeout", "cancelled"}


# Each reader answers what the table says, for every registered kind.


@pytest.mark.parametrize("kind", KINDS)
def test_row_31_material_events_follow_the_table(kind: str) -> None:
    event = FailureEventFacts(kind=kind, stage="seed")
    call = CallFacts(failure_events=(event,))
    info = KIND_INFO[kind]
    expected = info.material_in_time and side(kind, "seed") == "evaluation"
    assert facts_rules.is_server_fault_call(call) is expected


@pytest.mark.parametrize("kind", KINDS)
def test_row_33_sandbox_faults_follow_the_table(kind: str) -> None:
    # No source of its own: only the kind's family can make it a candidate.
    event = FailureEventFacts(kind=kind, stage="seed")
    facts = RowFacts(row_kind="failure", failure_events=(event,))
    info = KIND_INFO[kind]
    expected = info.sandbox_family and side(kind, "seed") == "evaluation"
    assert facts_rules.sandbox_or_tool_fault(facts) is expected


@pytest.mark.parametrize("kind", KINDS)
def test_row_37_route_failures_follow_the_table(kind: str) -> None:
    # No collector record: a transport kind is no route failure here.
    facts = RowFacts(row_kind="failure", selected_kind=kind, stage="agent")
    routed = facts_rules.route_failure(facts) is not None
    assert routed is KIND_INFO[kind].route


@pytest.mark.parametrize("kind", KINDS)
def test_row_36_final_timeouts_follow_the_table(kind: str) -> None:
    facts = RowFacts(
        row_kind="failure", selected_kind=kind, stage="agent", keeps_saved_answer=True
    )
    final = facts_rules.is_final_agent_timeout(facts)
    assert final is KIND_INFO[kind].agent_deadline


@pytest.mark.parametrize("kind", KINDS)
def test_rec_20_free_lifecycle_follows_the_table(kind: str) -> None:
    facts = RowFacts(row_kind="failure", selected_kind=kind, stage="verification")
    branch = classify(facts, RecoveryPolicy())
    assert (branch.rule == "REC-20.5e") is KIND_INFO[kind].lifecycle


@pytest.mark.parametrize("kind", KINDS)
def test_rec_15_opted_in_timeouts_follow_the_table(kind: str) -> None:
    facts = RowFacts(row_kind="failure", selected_kind=kind, terminal=True)
    policy = RecoveryPolicy(retry_terminal_timeouts=True)
    reopened = classify(facts, policy).rule != "REC-20.5b"
    assert reopened is KIND_INFO[kind].agent_deadline
