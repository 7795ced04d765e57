"""Plain words: the glossary, decisions and rule ids in words (issue 16)."""

from __future__ import annotations

import re

import projections
from projections import GLOSSARY, Decision, describe_decision, describe_rule
from tests.internals import BRANCHES, KIND_ALIASES, KIND_INFO

DECISION_VALUES = ("pending", "retry", "rejudge", "complete", "held", "terminal",
                   "exhausted", "omitted")  # fmt: skip
# REC-41: coverage's splits, as recovery.md lists them.
SPLITS = ("graded", "graded_failure", "settled_zero", "rejudged", "infra_cut",
          "unscored", "unknown", "free", "failed", "masked_without_artifact",
          "route_kept_response", "kept_answer", "unaccepted_omission", "cap",
          "free_attempts", "accepted")  # fmt: skip
_ID = re.compile(r"\b(REC|CLI|ROW|ID|EV|R|P|SC)-[0-9]")


def test_rec20_every_decision_value_has_a_sentence() -> None:
    for value in DECISION_VALUES:
        assert GLOSSARY[value].endswith("."), value


def test_rec41_every_reason_of_coverage_and_decide_has_a_sentence() -> None:
    """Every split of REC-41 and every reason REC-20's branches give."""
    reasons = set(SPLITS) | {branch.reason for branch in BRANCHES}
    reasons |= {"pending", "unknown", "free_attempts", "cap", "terminal", "rejudged",
                "open_admission", "judge_failed", "infra_cut", "accepted"}  # fmt: skip
    missing = sorted(r for r in reasons if r not in GLOSSARY)
    assert not missing


def test_row34_every_registered_kind_has_words_and_a_side() -> None:
    for kind, info in KIND_INFO.items():
        text = projections.describe_kind(kind)
        assert not text.startswith("failure "), kind
        if info.stage_sides is None:
            assert text.endswith(("(infrastructure)", "(model)")), kind
    for alias, kind in KIND_ALIASES.items():
        assert projections.describe_kind(alias) == projections.describe_kind(kind)


def test_glossary_says_no_rule_id() -> None:
    for term, sentence in GLOSSARY.items():
        assert not _ID.search(sentence), term


def test_rec20_describe_decision_retry_names_kind_side_and_attempts() -> None:
    decision = Decision("retry", 2, "REC-20.5c", "transport_timeout", "failed")
    text = describe_decision(decision, cap=3)
    assert text == (
        "retry: a server call timed out (infrastructure); counted toward the cap; "
        "2 of 3 attempts used"
    )
    assert "REC" not in text


def test_rec21_describe_decision_settled_zero_is_the_model_side() -> None:
    decision = Decision(
        "complete", 0, "REC-20.5a", "agent_timeout", "settled_zero", 0.0
    )
    text = describe_decision(decision, cap=3)
    assert text.startswith("complete: the agent ran out of its time limit (model); ")
    assert "reward 0" in text
    assert text.endswith("1 of 3 attempts used")


def test_rec20_describe_decision_without_cap_names_no_attempt() -> None:
    decision = Decision("complete", 1, "REC-20.4e", None, "graded", 0.5)
    assert describe_decision(decision) == "complete: graded, reward 0.5"
    pending = Decision("pending", 0, "REC-20.1", None, "pending")
    assert (
        describe_decision(pending, cap=3)
        == "pending: no attempt yet; 0 of 3 attempts used"
    )


def test_row22_describe_decision_resolves_aliases_and_names_unregistered_kinds() -> (
    None
):
    alias = Decision("held", 0, "REC-20.5h", "timeout_exceeded", "kept_answer")
    assert "the agent ran out of its time limit (model)" in describe_decision(alias)
    own = Decision("retry", 1, "REC-20.5i", "tau2:placeholder", "failed")
    assert describe_decision(own).startswith("retry: failure 'tau2:placeholder'; ")


def test_rec20_every_rule_a_decision_carries_is_described() -> None:
    """REC-20's branches, REC-4, REC-25, REC-35, REC-81 and REC-82 in words."""
    rules = {branch.rule for branch in BRANCHES}
    rules |= {"REC-20.1", "REC-20.3", "REC-4", "REC-25", "REC-35"}
    fallback = describe_rule("REC-999")
    for rule in sorted(rules):
        text = describe_rule(rule)
        assert text != fallback, rule
        assert not _ID.search(text), rule
    assert describe_rule("REC-20.5z") == describe_rule("REC-20.5")
    assert not _ID.search(fallback)


def test_words_are_public_names_of_projections() -> None:
    for name in ("GLOSSARY", "describe_decision", "describe_rule", "describe_kind"):
        assert name in projections.__all__


def test_rec80_describe_decision_follows_the_policy_s_side_overrides() -> None:
    """REC-80: a kind moved to the model's side is said as the model's."""
    decision = Decision("held", 0, "REC-20.5h", "session_lost", "kept_answer")
    assert "(infrastructure)" in describe_decision(decision)
    moved = describe_decision(decision, side_overrides={"session_lost": "model"})
    assert "the sandbox session was lost (model)" in moved


def test_rec21_a_settled_zero_is_said_as_the_model_s_result() -> None:
    """REC-21, REC-20.5h: a settled zero is the model's, whatever the kind."""
    decision = Decision("complete", 0, "REC-20.5h", "session_lost", "settled_zero", 0.0)
    assert describe_decision(decision).startswith(
        "complete: the sandbox session was lost (model); scored zero"
    )


def test_plural_says_one_in_the_singular() -> None:
    """Counts a person reads: "1 row", "2 rows", "0 rows", irregular plurals."""
    from ledger import plural

    assert plural(1, "row") == "1 row"
    assert plural(0, "row") == "0 rows"
    assert plural(2, "entry", "entries") == "2 entries"


def _golden_state(name: str) -> projections.RunState:
    from tests.test_golden import golden_rows, stored_events

    return projections.replay(stored_events(golden_rows(name)))


def test_rec13_describe_rollout_counts_failures_against_the_cap() -> None:
    """REC-13: the words count the failures the cap counts, not attempts made."""
    state = _golden_state("infrastructure")
    decisions = projections.decide_all(state)
    (task, rollout), decision = next(
        (k, d) for k, d in sorted(decisions.items()) if d.value == "exhausted"
    )
    text = projections.describe_rollout(state, task, rollout)
    assert text == projections.describe_rollout(state, task, rollout, decision)
    assert text.startswith("exhausted: ")
    assert text.endswith(f"; {state.cap} of {state.cap} counted failures")


def test_rec16_describe_rollout_after_a_budget_reset_says_so() -> None:
    """REC-16: failures before the latest reset no longer count, and it says so."""
    state = _golden_state("budget_and_policy")
    assert state.before_seq > 0
    decisions = projections.decide_all(state)
    task, rollout = next(k for k, d in sorted(decisions.items()) if d.value == "retry")
    text = projections.describe_rollout(state, task, rollout)
    assert text.endswith("counted failures since the budget reset")


def test_rec20_4d_an_infrastructure_timeout_is_said_as_infrastructure() -> None:
    """ROW-35, REC-20.5c: an agent timeout cut short by us is not the model's."""
    decision = Decision("exhausted", 1, "REC-20.5c", "agent_timeout", "cap")
    assert "(infrastructure)" in describe_decision(decision)
    final = Decision("complete", 0, "REC-20.5a", "agent_timeout", "graded_failure", 1)
    assert "(model)" in describe_decision(final)
