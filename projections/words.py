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
from typing import TYPE_CHECKING, Final

from ledger import side
from projections.words_tables import (
    COVERAGE_TERMS,
    DECISIONS,
    KIND_PHRASES,
    REASON_PHRASES,
    REASONS,
    RULES,
    SIDE_WORDS,
)

if TYPE_CHECKING:
    from projections.decide import Decision

__all__ = [
    "GLOSSARY",
    "GLOSSARY_SECTIONS",
    "describe_decision",
    "describe_kind",
    "describe_rule",
]


def _merged(*tables: Mapping[str, str]) -> Mapping[str, str]:
    merged: dict[str, str] = {}
    for table in tables:
        for key, sentence in table.items():
            merged.setdefault(key, sentence)  # a decision value's own sentence wins
    return MappingProxyType(merged)


#: Every decision value, reason and coverage term -> one plain sentence.
GLOSSARY: Final[Mapping[str, str]] = _merged(DECISIONS, REASONS, COVERAGE_TERMS)

#: The glossary's sections, in the order ``docs/glossary.md`` shows them.
GLOSSARY_SECTIONS: Final[tuple[tuple[str, Mapping[str, str]], ...]] = (
    ("Decisions", DECISIONS),
    (
        "Reasons",
        MappingProxyType({k: v for k, v in REASONS.items() if k not in DECISIONS}),
    ),
    ("Other terms", COVERAGE_TERMS),
)


def describe_kind(kind: str | None) -> str:
    """A failure kind in words, with its side when the kind table gives one.

    ``"a server call timed out (infrastructure)"``; an unregistered kind is
    named as recorded (``"failure 'tau2:placeholder'"``).
    """
    if kind is None:
        return "no failure recorded"
    phrase = KIND_PHRASES.get(kind, f"failure '{kind}'")
    where = side(kind)
    return phrase if where is None else f"{phrase} ({SIDE_WORDS[where]})"


def _attempts_used(decision: Decision) -> int:
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


def describe_decision(decision: Decision, *, cap: int | None = None) -> str:
    """One decision in words (REC-20), never its rule id.

    ``"retry: a server call timed out (infrastructure); counted toward the cap;
    2 of 3 attempts used"``. With ``cap`` the line ends with the attempts used
    of the cap; without it, with the attempt concerned.
    """
    reason = REASON_PHRASES.get(decision.reason, decision.reason.replace("_", " "))
    parts = [reason + (_score(decision.score) if decision.value == "complete" else "")]
    if decision.kind is not None:
        parts.insert(0, describe_kind(decision.kind))
    used = _attempts_used(decision)
    if cap is not None:
        word = "attempt" if cap == 1 else "attempts"
        parts.append(f"{used} of {cap} {word} used")
    elif decision.value != "pending":
        parts.append(f"attempt {decision.attempt}")
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
