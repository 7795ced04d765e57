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
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, NamedTuple

__all__ = ["Folded", "Listed", "RunSet"]


class Listed(NamedTuple):
    """A run as the runs page lists it: its key in URLs and its card."""

    key: str
    card: Any
    head: int


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
        self._listed: dict[str, Listed] = {}  # by target, as of a head
        self._folding: dict[str, threading.Lock] = {}  # one fold per target

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
        """The run at ``target`` as of its head now (folded once at a time: a
        request for a run being folded waits for that fold)."""
        with self._guard:
            folding = self._folding.setdefault(str(target), threading.Lock())
        with folding, self._open(target) as led:
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

    def listed(self) -> list[Listed]:
        """Every run found, as the runs page lists it (a run that cannot be read
        now is left out).

        Issue 30: a card is read from the run's snapshot of what is left (as
        ``status`` reads it), not from a fold of every rollout; each run not
        folded at its head yet is then folded in the background, so that its
        page is ready sooner.
        """
        import ledger

        found = []
        for target in self.scan():
            try:
                item = self._card(target)
            except ledger.LedgerError:
                continue
            found.append(item)
            with self._guard:
                kept = self._folded.get(str(target))
            if kept is None or kept.head != item.head:
                threading.Thread(
                    target=self._prefetch, args=(target,), daemon=True
                ).start()
        return found

    def _card(self, target: Path | str) -> Listed:
        import msgspec

        import projections

        with self._open(target) as led:
            head, _ = led.head()
            with self._guard:
                folded = self._folded.get(str(target))
                kept = self._listed.get(str(target))
            if folded is not None and folded.head == head:
                folded.follow_writer(led)
                return Listed(folded.key, folded.card, head)
            if kept is not None and kept.head == head:
                card = msgspec.structs.replace(
                    kept.card, writer=projections.writer_of(led)
                )
            else:
                card = projections.run_card(led, target)
        with self._guard:
            made = Listed(self._key_of(target, card.header.run_id), card, head)
            self._listed[str(target)] = made
        return made

    def _prefetch(self, target: Path | str) -> None:
        import ledger

        with suppress(ledger.LedgerError):  # said when its page is asked for
            self.folded(target)

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
            self.listed()  # a run made since the start
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
