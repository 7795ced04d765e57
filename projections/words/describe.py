"""Plain words for decisions, reasons, coverage terms and rule ids.

``GLOSSARY`` maps every decision value, every reason a decision gives and every
term ``status`` prints to one plain sentence (``docs/glossary.md`` is generated
from it). ``describe_decision`` says one decision in a line a person reads,
``describe_rule`` says what a rule id a decision carries means, for the
report's audit trail. Nothing here names a rule id in its output: ids stay in
``--json`` fields and event payloads.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Final

from ledger import side
from projections.decisions.rules import counted_failures, decide
from projections.words.tables import (
    CONFIG_TERMS,
    COVERAGE_TERMS,
    DECISIONS,
    KIND_PHRASES,
    REASON_LABELS,
    REASON_PHRASES,
    REASONS,
    REWARD_TERMS,
    RULES,
    SIDE_WORDS,
)

if TYPE_CHECKING:
    from projections.decisions.rules import Decision
    from projections.fold.state import RunState

__all__ = [
    "GLOSSARY",
    "GLOSSARY_SECTIONS",
    "REASON_LABELS",
    "RULE_WORDS",
    "decision_side",
    "describe_decision",
    "describe_kind",
    "describe_reason",
    "describe_rollout",
    "describe_rule",
]

#: Reasons whose side is settled by the reason itself: a settled zero is the
#: model's own result (REC-21, REC-20.5h), whatever the kind table says.
_SIDE_OF_REASON = {"settled_zero": "model"}
#: Rules whose side is settled by the rule: an infrastructure agent timeout
#: (ROW-35, REC-20.4d and 5c) and a masked infrastructure result (ROW-41) are
#: the infrastructure's; a final agent timeout (ROW-36, REC-20.5a) the model's.
_SIDE_OF_RULE = {
    "REC-20.4b": "evaluation",
    "REC-20.4d": "evaluation",
    "REC-20.5c": "evaluation",
    "REC-20.5a": "model",
}


def _merged(*tables: Mapping[str, str]) -> Mapping[str, str]:
    merged: dict[str, str] = {}
    for table in tables:
        for key, sentence in table.items():
            merged.setdefault(key, sentence)  # a decision value's own sentence wins
    return MappingProxyType(merged)


#: Every decision value, reason, coverage term, reward figure's word and
#: configuration option -> one plain sentence.
GLOSSARY: Final[Mapping[str, str]] = _merged(
    DECISIONS, REASONS, COVERAGE_TERMS, REWARD_TERMS, CONFIG_TERMS
)

#: The glossary's sections, in the order ``docs/glossary.md`` shows them.
GLOSSARY_SECTIONS: Final[tuple[tuple[str, Mapping[str, str]], ...]] = (
    ("Decisions", DECISIONS),
    (
        "Reasons",
        MappingProxyType({k: v for k, v in REASONS.items() if k not in DECISIONS}),
    ),
    ("Other terms", COVERAGE_TERMS),
    ("Reward figures", REWARD_TERMS),
    ("Configuration files", CONFIG_TERMS),
)


class _Overrides:
    """What ``ledger.side`` reads of a policy: its ``side_overrides`` (REC-80)."""

    def __init__(self, overrides: Mapping[str, Any]) -> None:
        self.side_overrides = {
            k: v for k, v in overrides.items() if v in ("evaluation", "model")
        }


#: Every rule id a decision carries (and a few the audit trail names) -> words.
RULE_WORDS: Final[Mapping[str, str]] = RULES


def describe_kind(
    kind: str | None,
    *,
    side_overrides: Mapping[str, Any] | None = None,
    known_side: str | None = None,
) -> str:
    """A failure kind in words, with its side when the kind table gives one.

    ``"a server call timed out (infrastructure)"``; an unregistered kind is
    named as recorded (``"failure 'tau2:placeholder'"``). ``side_overrides``
    (the policy's, ROW-34 and REC-80) move a kind; ``known_side`` is a side the
    decision itself settles.
    """
    if kind is None:
        return "no failure recorded"
    phrase = KIND_PHRASES.get(kind, f"failure '{kind}'")
    policy = None if not side_overrides else _Overrides(side_overrides)
    where = known_side or side(kind, policy=policy)
    return phrase if where is None else f"{phrase} ({SIDE_WORDS[where]})"


def decision_side(
    decision: Decision,
    *,
    side_overrides: Mapping[str, Any] | None = None,
    stage: object = None,
    result_class: object = None,
) -> str | None:
    """The side of a decision's failure kind (``ledger.side``'s answer), or ``None``.

    As ``describe_decision`` says it: a side the decision itself settles (a
    settled zero is the model's, an infrastructure timeout the
    infrastructure's) first, then the kind's under the policy's
    ``side_overrides``; ``stage`` and ``result_class`` are those of the row
    that failed, when it was read (ROW-34, ROW-50). ``None`` without a kind,
    or when the side cannot be said.
    """
    if decision.kind is None:
        return None
    known = _SIDE_OF_REASON.get(decision.reason) or _SIDE_OF_RULE.get(decision.rule)
    if known is not None:
        return known
    policy = None if not side_overrides else _Overrides(side_overrides)
    return side(decision.kind, stage, policy=policy, result_class=result_class)


def describe_reason(reason: str) -> str:
    """A decision's reason as a short phrase (``"counted toward the cap"``)."""
    return REASON_PHRASES.get(reason, reason.replace("_", " "))


def _attempts_made(decision: Decision) -> int:
    # A retry names the attempt to dispatch next; every other decision names
    # the selected attempt (attempts are numbered from 0).
    if decision.value == "pending":
        return 0
    if decision.value == "retry":
        return decision.attempt
    return decision.attempt + 1


def _score(value: float | None) -> str:
    if value is None:
        return ""
    return f", reward {value:g}"


def describe_decision(
    decision: Decision,
    *,
    cap: int | None = None,
    counted: int | None = None,
    side_overrides: Mapping[str, Any] | None = None,
) -> str:
    """One decision in words (REC-20), never its rule id.

    ``"retry: a server call timed out (infrastructure); counted toward the cap;
    2 of 3 attempts used"``. With ``cap`` the line ends with the attempts made
    of the cap, or with ``counted`` (the rollout's failures the cap counts
    since the latest budget reset, REC-13) ``"2 of 3 counted failures"``.
    ``side_overrides`` are the run policy's, so the side shown is the one the
    run decided with.
    """
    reason = describe_reason(decision.reason)
    parts = [reason + (_score(decision.score) if decision.value == "complete" else "")]
    if decision.kind is not None:
        known = _SIDE_OF_REASON.get(decision.reason) or _SIDE_OF_RULE.get(decision.rule)
        kind = describe_kind(
            decision.kind, side_overrides=side_overrides, known_side=known
        )
        parts.insert(0, kind)
    if cap is not None and counted is not None:
        noun = "counted failure" if cap == 1 else "counted failures"
        parts.append(f"{counted} of {cap} {noun}")
    elif cap is not None:
        noun = "attempt" if cap == 1 else "attempts"
        parts.append(f"{_attempts_made(decision)} of {cap} {noun} used")
    return f"{decision.value}: " + "; ".join(parts)


def describe_rule(rule_id: str) -> str:
    """What a rule id means, in words (for the report's audit trail).

    Every id a decision carries (REC-20's branches, REC-4, REC-25, REC-35,
    REC-81, REC-82) has its own sentence; a branch this version does not know
    falls back to its numbered rule's, and anything else to a plain note.
    """
    found = RULES.get(rule_id)
    if found is not None:
        return found
    head = rule_id.rstrip("abcdefghijklmnopqrstuvwxyz")
    if head != rule_id and head in RULES:
        return RULES[head]
    return "A rule of the recovery specification this version does not describe."


#: Decisions the attempt cap no longer concerns (REC-40: the run's finished work).
_DONE = ("complete", "omitted")


def describe_rollout(
    state: RunState, task: int, rollout: int, decision: Decision | None = None
) -> str:
    """A rollout's decision in words, as the run decided it (REC-20, REC-13).

    The cap in force, the rollout's counted failures since the latest budget
    reset (not said for a complete or omitted rollout) and the policy's side
    overrides come from ``state``; ``decision`` is decided when not given
    (``KeyError`` for an unknown key).
    """
    if decision is None:
        decision = decide(state, task, rollout)
    sides = state.policy.get("side_overrides") or None
    if decision.value in _DONE:  # the cap no longer matters to it
        return describe_decision(decision, side_overrides=sides)
    counted = counted_failures(state.rollout(task, rollout), state.before_seq)
    words = describe_decision(
        decision, cap=state.cap, counted=counted, side_overrides=sides
    )
    # REC-16: failures before the latest budget reset no longer count.
    return words + (" since the budget reset" if state.before_seq else "")
