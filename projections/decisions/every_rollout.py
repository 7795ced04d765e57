"""``Resume.decisions``: every rollout's decision, the settled ones on demand.

A resume from the snapshot of what is left (P-8) decides only the rollouts
still open; the others were summed when they settled (``state.settled``).
api.md promises ``Resume.decisions`` as ``{(task, rollout): Decision}`` over
the run (issue 25: a ``KeyError`` for a complete rollout broke it). This
mapping answers the open rollouts at once, from the plan's own decisions, and
the first question about any other rollout replays the log once and decides
them all, as the resume itself would have (the snapshot is used only while
nothing after it touches a settled rollout, so their decisions cannot have
moved). The plan's path stays as cheap as before: nothing is replayed unless
a settled rollout is asked about, or the mapping is walked whole.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ledger import Ledger, open_run
from projections.decisions.rules import Decision, decide_all
from projections.fold.reading import replay
from projections.fold.state import RunState

__all__ = ["RunDecisions"]

Key = tuple[int, int]


class RunDecisions(Mapping[Key, Decision]):
    """Every rollout's decision; the open ones given, the settled ones replayed."""

    def __init__(
        self, open_: dict[Key, Decision], state: RunState, ledger: Ledger | None
    ) -> None:
        self._open = open_
        self._total = state.expected
        self._settled = state.settled is not None
        self._ledger = ledger
        self._all: dict[Key, Decision] | None = None if self._settled else open_

    @property
    def open(self) -> dict[Key, Decision]:
        """The decisions the plan was made from (the rollouts still open)."""
        return self._open

    def _every(self) -> dict[Key, Decision]:
        if self._all is None:
            self._all = {**decide_all(self._replayed()), **self._open}
        return self._all

    def _replayed(self) -> RunState:
        if self._ledger is None:
            raise KeyError("this resume kept no way back to its run")
        try:
            return replay(self._ledger)
        except Exception:  # closed since: read the run again, read-only
            with open_run(self._ledger.target) as reader:
                return replay(reader)

    def __getitem__(self, key: Key) -> Decision:
        found = self._open.get(key)
        if found is not None:
            return found
        return self._every()[key]

    def __contains__(self, key: Any) -> bool:
        return key in self._open or key in self._every()

    def __iter__(self) -> Iterator[Key]:
        return iter(self._every())

    def __len__(self) -> int:
        return self._total if self._all is None else len(self._all)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return dict(self.items()) == dict(other.items())
        return NotImplemented

    def __repr__(self) -> str:
        settled = self._total - len(self._open) if self._all is None else 0
        return f"RunDecisions({len(self._open)} open, {settled} settled not read yet)"
