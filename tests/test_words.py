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


def test_rec20_describe_decision_without_cap_names_the_attempt() -> None:
    decision = Decision("complete", 1, "REC-20.4e", None, "graded", 0.5)
    assert describe_decision(decision) == "complete: graded, reward 0.5; attempt 1"
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
