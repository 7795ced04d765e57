"""One pass over a run's events for the report: trails, failures, changes.

``Trails`` keeps, for the rollouts the report shows one by one, every attempt
and what happened to it (reserved, its outcome, approvals, re-judgments), and
for the whole run the failure outcomes by kind, side and time, and the
operator's changes (drift acceptances, budget resets, policy changes, attempt
extensions, identity adoptions and overrides). The decision's rule id and its
meaning close each trail, for auditors. ``places`` says where each listed
rollout's row is, for ``content.read_content``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any

import msgspec

from ledger import RecoveryPolicy, redact_secrets, side
from ledger import events as ev
from projections.decisions.rules import Decision
from projections.fold.state import RunState
from projections.report.content import Place
from projections.words.describe import describe_decision, describe_rule

__all__ = ["SIDE_NAMES", "Listed", "Trails"]

#: ``ledger.side``'s answer in the report's words.
SIDE_NAMES = {"evaluation": "infrastructure", "model": "model", None: "unknown"}

Key = tuple[int, int]
#: The events a report reads, given the rollouts it gives a trail (issue 30:
#: an event of a rollout not given one may be left out).
Listed = Callable[[set[Key]], Iterable[ev.StoredEvent]]


@lru_cache(maxsize=4096)
def _safe(text: str) -> str:
    """``redact_secrets``, once per distinct actor, kind or reason (ID-13)."""
    return redact_secrets(text)


#: Events that name one attempt of one rollout, and the operator's changes.
_KEYED = frozenset(
    {
        ev.AttemptReserved,
        ev.ResultSaved,
        ev.FailureSaved,
        ev.OmissionSaved,
        ev.RerunApproved,
        ev.JudgeAdmitted,
    }
)
_CHANGES = frozenset(
    {
        ev.DriftAccepted,
        ev.FailureBudgetReset,
        ev.PolicyChanged,
        ev.AttemptsExtended,
        ev.IdentityAdopted,
        ev.IdentityOverridden,
        ev.RowRefused,
    }
)
#: Refused collector lines the report lists one by one; the rest are counted.
_REFUSED_SHOWN = 500


def _score(value: float | None) -> str:
    return "none" if value is None else f"{value:g}"


def _json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def _reason(text: str | None) -> str:
    return f" ({_safe(text)})" if text else ""


class Trails:
    """Fed every event once (``add``); read ``trails()``, ``kinds``, ``times``."""

    def __init__(
        self,
        state: RunState,
        decisions: Mapping[Key, Decision],
        keys: set[Key],
        *,
        policy: RecoveryPolicy,
    ) -> None:
        self.state = state
        self.decisions = decisions
        self.keys = keys
        self.policy = policy
        self.attempts: dict[Key, dict[int, list[dict[str, Any]]]] = {}
        #: Where each attempt's outcome row is.
        self.outcomes: dict[Key, dict[int, Place]] = {}
        self.admissions: dict[str, tuple[int, int, int]] = {}
        #: (kind, side) -> failure outcomes recorded.
        self.kinds: Counter[tuple[str, str]] = Counter()
        #: (time, side) of each failure outcome, in log order.
        self.times: list[tuple[str, str]] = []
        self.changes: dict[str, list[dict[str, Any]]] = {
            "drift": [],
            "resets": [],
            "policy": [],
            "extensions": [],
            "identity": [],
            "refused": [],
        }
        self.refused_more = 0
        #: The newest event's time, once every event was added.
        self.last_at: str | None = None

    def _note(self, event: ev.StoredEvent, key: Key, attempt: int, text: str) -> None:
        by_attempt = self.attempts.setdefault(key, {})
        by_attempt.setdefault(attempt, []).append(
            {
                "seq": event.seq,
                "at": event.at,
                "actor": _safe(event.actor),
                "text": text,
            }
        )

    def add(self, event: ev.StoredEvent) -> None:
        """Take one event into account."""
        body = event.body
        self.last_at = event.at
        if isinstance(body, ev.FailureSaved):
            facts = body.facts
            where = side(
                facts.selected_kind,
                facts.stage,
                policy=self.policy,
                result_class=facts.result_class,
            )
            named = SIDE_NAMES.get(where, "unknown")
            self.kinds[_safe(facts.selected_kind or "unclassified"), named] += 1
            self.times.append((event.at, named))
        elif isinstance(body, ev.JudgeAdmitted):
            self.admissions[body.admission_id] = (
                body.task,
                body.rollout,
                body.attempt,
            )
        of = type(body)
        if of in _KEYED or of is ev.JudgeOutcomeSaved:
            self._keyed(event)
        elif of in _CHANGES:
            self._change(event)

    def _keyed(self, event: ev.StoredEvent) -> None:
        body: Any = event.body
        if isinstance(body, ev.JudgeOutcomeSaved):
            found = self.admissions.get(body.admission_id)
            if found is None or found[:2] not in self.keys:
                return
            text = (
                f"judged again: graded, reward {_score(body.reward)}"
                if body.outcome == "graded"
                else f"judged again: failed ({_safe(body.failure_kind or '?')})"
            )
            self._note(event, found[:2], found[2], text)
            return
        if type(body) not in _KEYED:
            return
        key = (body.task, body.rollout)
        if key in self.keys:
            self._note(event, key, body.attempt, _outcome_text(body))
            if isinstance(body, ev.ResultSaved | ev.FailureSaved | ev.OmissionSaved):
                facts = getattr(body, "facts", None)
                place = Place(body.attempt, body.location, facts)
                self.outcomes.setdefault(key, {})[body.attempt] = place

    def _change(self, event: ev.StoredEvent) -> None:
        body = event.body
        if type(body) not in _CHANGES:
            return
        at = {"seq": event.seq, "at": event.at, "actor": _safe(event.actor)}
        if isinstance(body, ev.DriftAccepted):
            keys = ", ".join(body.operational_keys) or "none"
            self.changes["drift"].append(at | {"text": f"settings changed: {keys}"})
        elif isinstance(body, ev.FailureBudgetReset):
            self.changes["resets"].append(
                at
                | {
                    "text": redact_secrets(
                        f"failures so far stop counting{_reason(body.reason)}"
                    )
                }
            )
        elif isinstance(body, ev.PolicyChanged):
            parts = ", ".join(
                f"{key}: {_json(change.old)} to {_json(change.new)}"
                for key, change in sorted(body.changes.items())
            )
            self.changes["policy"].append(
                at | {"text": redact_secrets(parts + _reason(body.reason))}
            )
        elif isinstance(body, ev.AttemptsExtended):
            self.changes["extensions"].append(
                at
                | {
                    "text": redact_secrets(
                        f"{body.total} more attempts per rollout{_reason(body.reason)}"
                    )
                }
            )
        elif isinstance(body, ev.RowRefused):
            if len(self.changes["refused"]) >= _REFUSED_SHOWN:
                self.refused_more += 1
                return
            where = "" if body.round is None else f"round {body.round}: "
            text = f"{where}{body.file} line {body.line}: {body.reason}"
            self.changes["refused"].append(at | {"text": redact_secrets(text)})
        elif isinstance(body, ev.IdentityAdopted | ev.IdentityOverridden):
            what = (
                "configuration adopted"
                if isinstance(body, ev.IdentityAdopted)
                else "configuration overridden: " + ", ".join(body.semantic_keys)
            )
            self.changes["identity"].append(at | {"text": redact_secrets(what)})

    def places(self) -> dict[Key, Place]:
        """Each listed rollout's row to show: its selected attempt's outcome.

        A re-judged rollout shows the row that was judged again (the
        re-judgment's own row holds a grade, no answer); a rollout waiting to
        run again (its decision names the next attempt), its latest outcome.
        """
        found = {}
        for key, by_attempt in self.outcomes.items():
            chosen = self.decisions[key].attempt
            before = [n for n in by_attempt if n <= chosen]
            if before:
                found[key] = by_attempt[max(before)]
        return found

    def trails(
        self, content: Mapping[Key, Any] | None = None
    ) -> dict[str, dict[str, Any]]:
        """``"task-rollout"`` -> its trail: attempts, decision in words, rule,
        and what its row holds (``content``'s, ``None`` when not read)."""
        content = content or {}
        cap = self.state.cap
        found = {}
        for key in sorted(self.keys):
            decision = self.decisions[key]
            by_attempt = self.attempts.get(key, {})
            found[f"{key[0]}-{key[1]}"] = {
                "task": key[0],
                "rollout": key[1],
                "value": decision.value,
                "words": describe_decision(decision, cap=cap),
                "rule": decision.rule,
                "rule_words": describe_rule(decision.rule),
                "attempts": [
                    {"attempt": number, "events": by_attempt[number]}
                    for number in sorted(by_attempt)
                ],
                "content": content.get(key),
            }
        return found


def _outcome_text(body: Any) -> str:
    if isinstance(body, ev.AttemptReserved):
        return "attempt started"
    if isinstance(body, ev.ResultSaved):
        masked = ", masked" if body.facts.masked else ""
        return f"result saved, reward {_score(body.facts.reward)}{masked}"
    if isinstance(body, ev.FailureSaved):
        facts = body.facts
        terminal = ", final" if facts.terminal else ""
        return (
            f"failure saved: {_safe(facts.selected_kind or 'unclassified')}{terminal} "
            f"(failures file line {body.sidecar_line + 1})"
        )
    if isinstance(body, ev.OmissionSaved):
        return f"left out on purpose{_reason(body.reason)}"
    if isinstance(body, ev.RerunApproved):
        return f"rerun approved{_reason(body.reason)}"
    return "sent to the judge again"
