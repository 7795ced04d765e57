"""The log of a run kept in memory: events, rows and snapshots in plain objects.

The store contract (SC-6) without a disk: gap-free ``seq``, one hash chain
computed as SQLite computes it, a transaction that commits whole or is undone.
Runs live in a process-wide table by name, for :mod:`ledger.store.memory.runs`.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from ledger.errors import ConcurrencyConflict, CorruptLedger, Refused
from ledger.events import ZERO_HASH
from ledger.store.chain import chained_rows, fold_triples
from ledger.store.port import Builder, EventRow, NewEvent, NewRow

__all__ = ["SCHEME", "MemoryStore", "forget_all", "new_run", "run_named", "runs"]

SCHEME = "memory://"


@dataclass
class _Run:
    """One run's state; every change happens under ``guard``."""

    events: list[EventRow] = field(default_factory=list)
    files: dict[str, bytearray] = field(default_factory=dict)
    lines: dict[str, int] = field(default_factory=dict)
    published: dict[str, bytes] = field(default_factory=dict)
    snapshots: dict[tuple[str, str], tuple[int, bytes, bytes]] = field(
        default_factory=dict
    )
    guard: threading.RLock = field(default_factory=threading.RLock)
    holder: str | None = None
    #: Commits made, for tests that count transactions.
    commits: int = 0
    #: A seq whose insert fails inside its transaction, for tests of rollback.
    fail_at: int | None = None


def new_run() -> _Run:
    """An empty run, to fill and then enter in the table."""
    return _Run()


_RUNS: dict[str, _Run] = {}
_RUNS_GUARD = threading.Lock()


@contextlib.contextmanager
def runs() -> Iterator[dict[str, _Run]]:
    """The table of runs by name, held for a change."""
    with _RUNS_GUARD:
        yield _RUNS


def run_named(name: str) -> _Run | None:
    """The run kept under ``name``, if any."""
    with _RUNS_GUARD:
        return _RUNS.get(name)


def forget_all() -> None:
    """Drop every run kept in memory (tests call it between cases)."""
    with _RUNS_GUARD:
        _RUNS.clear()


class MemoryStore:
    """The log of one run kept in memory (the store contract, SC-6)."""

    def __init__(self, name: str, run: _Run, *, writable: bool) -> None:
        self.name = name
        self.path = SCHEME + name
        self.run = run
        self.writable = writable

    @classmethod
    def create(cls, name: str) -> MemoryStore:
        """A new, empty run named ``name`` (refused when the name is taken)."""
        with runs() as table:
            if name in table:
                raise Refused(f"{SCHEME}{name} exists already")
            run = table[name] = _Run()
        return cls(name, run, writable=True)

    @classmethod
    def open(cls, name: str, *, writable: bool) -> MemoryStore:
        """The run named ``name``; a reader may not append."""
        run = run_named(name)
        if run is None:
            raise CorruptLedger(
                f"{SCHEME}{name}: there is no such run in this process (create it "
                "with `Ledger.create` first)",
                path=SCHEME + name,
            )
        return cls(name, run, writable=writable)

    def check_schema(self) -> int:
        """Always 1: a memory run is as new as this process."""
        return 1

    @contextlib.contextmanager
    def transaction(self) -> Iterator[_Run]:
        """Every change inside commits whole, or is undone on any exception."""
        run = self.run
        with run.guard:
            events = len(run.events)
            files = {name: len(data) for name, data in run.files.items()}
            lines, published = dict(run.lines), dict(run.published)
            try:
                yield run
            except BaseException:
                del run.events[events:]
                for name in list(run.files):
                    if name not in files:
                        del run.files[name]
                    else:
                        del run.files[name][files[name] :]
                run.lines, run.published = lines, published
                raise
            run.commits += 1

    def head(self) -> tuple[int, bytes]:
        """``(seq, hash)`` of the newest event; ``(0, ZERO_HASH)`` when empty."""
        with self.run.guard:
            if not self.run.events:
                return 0, ZERO_HASH
            last = self.run.events[-1]
            return last.seq, last.hash

    def append_many(
        self, events: Sequence[NewEvent], *, expected_seq: int | None = None
    ) -> list[EventRow]:
        """Append ``events`` in one transaction, chained on the head (EV-11)."""
        self._require_writable()
        with self.transaction():
            return self.append_in_transaction(events, expected_seq=expected_seq)

    def append_in_transaction(
        self, events: Sequence[NewEvent], *, expected_seq: int | None = None
    ) -> list[EventRow]:
        """Append inside a transaction the caller already holds."""
        seq, prev = self.head()
        if expected_seq is not None and expected_seq != seq:
            raise ConcurrencyConflict(expected_seq=expected_seq, actual_seq=seq)
        rows = chained_rows(events, seq, prev)
        for row in rows:
            if row.seq == self.run.fail_at:
                raise CorruptLedger(f"{self.path}: injected failure at seq {row.seq}")
            self.run.events.append(row)
        return rows

    def append_built(
        self, build: Builder, *, expected_seq: int | None = None
    ) -> list[EventRow]:
        """Append what ``build`` makes of the files' ends, rows with their events."""
        self._require_writable()
        with self.transaction() as run:
            ends = {
                name: [len(data), run.lines.get(name, 0)]
                for name, data in run.files.items()
            }
            events, rows = build(ends)
            for row in rows:
                if row is not None:
                    self._put_row(row)
            return self.append_in_transaction(events, expected_seq=expected_seq)

    def _put_row(self, row: NewRow) -> None:
        target = self.run.files.setdefault(row.file, bytearray())
        if len(target) != row.offset:
            raise CorruptLedger(
                f"{self.path}: {row.file} ends at {len(target)}, not {row.offset}"
            )
        target += row.data
        self.run.lines[row.file] = self.run.lines.get(row.file, 0) + 1

    def rows(
        self, from_seq: int = 1, *, kinds: Sequence[str] = ()
    ) -> Iterator[EventRow]:
        """Stored rows in ``seq`` order from ``from_seq``, streamed (EV-13)."""
        wanted = set(kinds)
        index = max(from_seq, 1) - 1
        while True:
            with self.run.guard:
                if index >= len(self.run.events):
                    return
                row = self.run.events[index]
            index += 1
            if not wanted or row.kind in wanted:
                yield row

    def rows_at(self, seqs: Sequence[int]) -> Iterator[EventRow]:
        """The stored rows of ``seqs`` (those that exist), in ``seq`` order."""
        with self.run.guard:
            events = list(self.run.events)
        for seq in sorted(set(seqs)):
            if 1 <= seq <= len(events):
                yield events[seq - 1]

    def fold_rows(
        self, from_seq: int = 1, *, after: bytes | None = None
    ) -> Iterator[tuple[int, str, bytes]]:
        """``(seq, kind, body)`` of the rows from ``from_seq``: replay's read.

        With ``after``, checked as the chain that follows it (R-5).
        """
        return fold_triples(
            self.rows(from_seq), where=self.path, from_seq=from_seq, after=after
        )

    def distinct_kinds(self) -> set[str]:
        """Every kind stored in the log."""
        with self.run.guard:
            return {row.kind for row in self.run.events}

    def last_rows(self, count: int) -> list[EventRow]:
        """The newest ``count`` rows, oldest first."""
        with self.run.guard:
            return list(self.run.events[-count:]) if count > 0 else []

    def save_snapshot(
        self,
        seq: int,
        head_hash: bytes,
        code_version: str,
        policy_digest: str,
        state: bytes,
    ) -> None:
        """Store a projection snapshot (EV-14); one per code version and policy."""
        self._require_writable()
        with self.transaction() as run:
            run.snapshots[(code_version, policy_digest)] = (seq, head_hash, state)

    def load_snapshot(
        self, code_version: str, policy_digest: str
    ) -> tuple[int, bytes, bytes] | None:
        """``(seq, head_hash, state)`` of the stored snapshot, if any (EV-14)."""
        with self.run.guard:
            return self.run.snapshots.get((code_version, policy_digest))

    def hash_at(self, seq: int) -> bytes | None:
        """The stored hash of event ``seq``, if there is one."""
        with self.run.guard:
            if 1 <= seq <= len(self.run.events):
                return self.run.events[seq - 1].hash
        return None

    def journal_mode(self) -> str:
        """``memory``: nothing is durable beyond this process."""
        return "memory"

    def lock_holder(self) -> str | None:
        """Who holds the run lock in this process, or ``None``."""
        return self.run.holder

    def close(self) -> None:
        """Nothing to close: the run stays in memory for the process's life."""

    def _require_writable(self) -> None:
        if not self.writable:
            raise Refused(f"{self.path} is open read-only; appends need the run lock")
