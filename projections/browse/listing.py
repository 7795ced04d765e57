"""A run's rollouts as the viewer lists them: filtered, sorted and paged.

One entry per rollout: its task and index, its decision and reason, the kind
of its selected attempt's failure, its decided reward and how many attempts
it took. A query filters by decision, failure kind, task and text (found in
the kind, the decision and its reason), sorts, and cuts one page; the counts
by decision and by kind are of the whole run, for the filters' menus.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import msgspec

from projections.decisions.rules import Decision
from projections.fold.state import RunState

__all__ = [
    "SORTS",
    "Entry",
    "RolloutPage",
    "RolloutQuery",
    "entry_counts",
    "query_rollouts",
    "rollout_entries",
]

#: The orders a query may ask for; the first is the default.
SORTS = ("task", "reward", "-reward", "attempts", "-attempts", "decision", "kind")
PAGE_SIZE = 100


class Entry(NamedTuple):
    """One rollout in the list (a tuple: a million of them stay light)."""

    task: int
    rollout: int
    decision: str
    reason: str
    kind: str
    reward: float | None
    attempts: int


class RolloutQuery(msgspec.Struct, frozen=True, kw_only=True):
    """What the list shows: filters, an order and a page (1-based)."""

    decision: str = ""
    kind: str = ""
    task: int | None = None
    q: str = ""
    sort: str = "task"
    page: int = 1
    per_page: int = PAGE_SIZE

    @classmethod
    def of(cls, params: Mapping[str, str]) -> RolloutQuery:
        """From a URL's query parameters; anything unreadable is left out."""
        task = params.get("task", "")
        page = params.get("page", "1")
        sort = params.get("sort", "task")
        return cls(
            decision=params.get("decision", "")[:64],
            kind=params.get("kind", "")[:128],
            task=int(task) if task.isdigit() and len(task) < 12 else None,
            q=params.get("q", "")[:200],
            sort=sort if sort in SORTS else "task",
            page=int(page) if page.isdigit() and len(page) < 9 else 1,
        )

    def params(self, **changed: Any) -> dict[str, str]:
        """The query as URL parameters (only those not at their default)."""
        values = msgspec.structs.asdict(self) | changed
        defaults = msgspec.structs.asdict(RolloutQuery())
        return {
            k: str(v)
            for k, v in values.items()
            if k != "per_page" and v != defaults.get(k) and v is not None
        }


class RolloutPage(msgspec.Struct, frozen=True, kw_only=True):
    """One page of the list, and what the whole run holds."""

    entries: list[Entry]
    total: int
    matched: int
    page: int
    pages: int
    by_decision: dict[str, int]
    by_kind: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        """Plain data for the API (``docs/json.md``)."""
        return {
            "rollouts": [e._asdict() for e in self.entries],
            "total": self.total,
            "matched": self.matched,
            "page": self.page,
            "pages": self.pages,
            "by_decision": self.by_decision,
            "by_kind": self.by_kind,
        }


def rollout_entries(
    state: RunState, decisions: Mapping[tuple[int, int], Decision]
) -> list[Entry]:
    """Every rollout of ``state`` (a full replay), in task order."""
    found = []
    for task in sorted(state.rollouts):
        by_rollout = state.rollouts[task]
        for index in sorted(by_rollout):
            rollout = by_rollout[index]
            decision = decisions[task, index]
            latest = rollout.latest
            kind = decision.kind or (latest.kind if latest is not None else None)
            found.append(
                Entry(
                    task,
                    index,
                    decision.value,
                    decision.reason,
                    kind or "",
                    decision.score,
                    0 if latest is None else latest.attempt + 1,
                )
            )
    return found


def _searched(entry: Entry, messages: Mapping[tuple[int, int], str]) -> str:
    message = messages.get((entry.task, entry.rollout), "")
    return f"{entry.kind} {entry.decision} {entry.reason} {message}"


_KEYS = {
    "task": lambda e: (e.task, e.rollout),
    "reward": lambda e: (e.reward is None, e.reward or 0.0, e.task, e.rollout),
    "-reward": lambda e: (e.reward is None, -(e.reward or 0.0), e.task, e.rollout),
    "attempts": lambda e: (e.attempts, e.task, e.rollout),
    "-attempts": lambda e: (-e.attempts, e.task, e.rollout),
    "decision": lambda e: (e.decision, e.task, e.rollout),
    "kind": lambda e: (e.kind == "", e.kind, e.task, e.rollout),
}


def entry_counts(listed: Sequence[Entry]) -> tuple[dict[str, int], dict[str, int]]:
    """How many rollouts of ``listed`` each decision and each failure kind has."""
    decisions = dict(Counter(e.decision for e in listed).most_common())
    kinds = dict(Counter(e.kind for e in listed if e.kind).most_common())
    return decisions, kinds


def query_rollouts(
    listed: Sequence[Entry],
    asked: RolloutQuery,
    messages: Mapping[tuple[int, int], str] | None = None,
    counts: tuple[dict[str, int], dict[str, int]] | None = None,
) -> RolloutPage:
    """The page ``asked`` shows of ``listed`` (every rollout of a run).

    ``messages``: each failed rollout's failure message, searched by ``q``
    with the kind, the decision and its reason; ``counts``: ``entry_counts``
    of ``listed``, when the caller keeps them.
    """
    text = asked.q.casefold()
    said = messages or {}
    by_decision, by_kind = entry_counts(listed) if counts is None else counts
    everything = not (asked.decision or asked.kind or text) and asked.task is None
    matched = (
        list(listed)
        if everything
        else [
            e
            for e in listed
            if (not asked.decision or e.decision == asked.decision)
            and (not asked.kind or e.kind == asked.kind)
            and (asked.task is None or e.task == asked.task)
            and (not text or text in _searched(e, said).casefold())
        ]
    )
    if asked.sort != "task":
        matched.sort(key=_KEYS[asked.sort])
    pages = max(1, -(-len(matched) // asked.per_page))
    page = min(max(asked.page, 1), pages)
    start = (page - 1) * asked.per_page
    return RolloutPage(
        entries=matched[start : start + asked.per_page],
        total=len(listed),
        matched=len(matched),
        page=page,
        pages=pages,
        by_decision=by_decision,
        by_kind=by_kind,
    )
