"""The runs ``view`` serves, each read afresh when its log moved.

The runs are found under the places given at start (folders, ``OUT`` files,
run URLs) and looked for again when the runs page loads. A run is read
read-only; what was folded from it is kept until its head moves, so a page
of a large run is cut from memory, and a run a writer appends to is read
again within a request of its new events.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["Folded", "RunSet"]


class Folded:
    """What the viewer keeps of one run, as of one head."""

    def __init__(self, target: Path | str, led: Any, head: int) -> None:
        import projections

        self.target = target
        self.key = ""  # the run's id in URLs (the run id; a copy's is suffixed)
        self.head = head
        self.state = projections.replay(led)
        self.decisions = projections.decide_all(state := self.state)
        self.card = projections.run_card(led, target, state)
        self.entries = projections.rollout_entries(state, self.decisions)
        self.counts = projections.entry_counts(self.entries)
        self.coverage = projections.coverage(state, self.decisions)
        self.metrics = projections.reward_metrics(led, state, decisions=self.decisions)
        self.lines = projections.metrics_lines(self.metrics)
        self.workers = _workers(led)  # a run on PostgreSQL
        self.integrity = ""
        self._proof: object = None
        self.check_integrity(led)

        self._messages: dict[tuple[int, int], str] | None = None

    def follow_writer(self, led: Any) -> None:
        """Say who holds the run now, and what its workers hold (no event marks
        a writer's start or end, nor a worker's claim)."""
        import msgspec

        import projections

        writer = projections.writer_of(led)
        if writer != self.card.writer:
            self.card = msgspec.structs.replace(self.card, writer=writer)
        self.workers = _workers(led)
        self.check_integrity(led)

    def check_integrity(self, led: Any) -> None:
        """What came after the last verify, checked again when that proof moved
        (issue 30): ``integrity`` says what was checked, in words."""
        import projections

        proof = projections.read_proof(led)
        if proof == self._proof and self.integrity:
            return
        self._proof = proof
        since, self.integrity = projections.integrity(led, out=self.target, quick=True)
        if since is not None and since.findings:
            found = "; ".join(str(f) for f in since.findings)
            self.integrity += f". Does not hold: {found}"

    def messages(self, led: Any) -> dict[tuple[int, int], str]:
        """Each failed rollout's failure message, read once (the text search)."""
        import projections

        if self._messages is None:
            self._messages = projections.failure_messages(led, self.state)
        return self._messages

    @property
    def run_id(self) -> str:
        return self.card.header.run_id


def _workers(led: Any) -> list[dict[str, Any]] | None:
    """The run's workers as the pages show them; ``None``: a run in files."""
    import projections

    seen = projections.workers_seen(led)
    return None if seen is None else [w.to_dict() for w in seen]


class RunSet:
    """The runs under ``places``, by run id; each folded again when it moved."""

    def __init__(self, places: Sequence[Path | str]) -> None:
        self.places = list(places)
        self._guard = threading.Lock()
        self._folded: dict[str, Folded] = {}  # by target
        self._ids: dict[str, Path | str] = {}  # by key
        self._keys: dict[str, str] = {}  # by target

    def scan(self) -> list[Path | str]:
        """Look for runs again; every run found, in order."""
        import projections

        found = projections.find_runs(self.places)
        with self._guard:
            known = {str(t) for t in found}
            for target in [t for t in self._folded if t not in known]:
                del self._folded[target]
        return found

    @contextmanager
    def _open(self, target: Path | str) -> Iterator[Any]:
        import ledger

        with ledger.open_run(target) as led:
            yield led

    def folded(self, target: Path | str) -> Folded:
        """The run at ``target`` as of its head now."""
        with self._open(target) as led:
            head, _ = led.head()
            with self._guard:
                kept = self._folded.get(str(target))
            if kept is not None and kept.head == head:
                kept.follow_writer(led)  # a writer may come or go between events
                return kept
            made = Folded(target, led, head)
        with self._guard:
            made.key = self._key_of(target, made.run_id)
            self._folded[str(target)] = made
        return made

    def _key_of(self, target: Path | str, run_id: str) -> str:
        """A run's id in URLs: its run id, or for a copy of a run found already
        (an exported copy keeps its run id) the run id and a number."""
        known = self._keys.get(str(target))
        if known is not None:
            return known
        key, number = run_id, 1
        while key in self._ids:
            number += 1
            key = f"{run_id}-{number}"
        self._ids[key] = target
        self._keys[str(target)] = key
        return key

    def every(self) -> list[Folded]:
        """Every run found (a run that cannot be read now is left out)."""
        import ledger

        found = []
        for target in self.scan():
            try:
                found.append(self.folded(target))
            except ledger.LedgerError:
                continue
        return found

    def by_id(self, run_id: str) -> Folded | None:
        """The run ``run_id`` names, read as of its head; ``None``: no such run."""
        with self._guard:
            target = self._ids.get(run_id)
        if target is None:
            self.every()  # a run made since the start
            with self._guard:
                target = self._ids.get(run_id)
        return None if target is None else self.folded(target)

    def messages(self, folded: Folded) -> dict[tuple[int, int], str]:
        """``folded``'s failure messages (read from its rows the first time)."""
        with self._open(folded.target) as led:
            return folded.messages(led)

    def detail(self, folded: Folded, task: int, rollout: int) -> Any:
        """One rollout of ``folded`` (``KeyError``: no such rollout)."""
        import projections

        decision = folded.decisions[task, rollout]
        with self._open(folded.target) as led:
            return projections.rollout_detail(
                led, folded.state, decision, task, rollout
            )
