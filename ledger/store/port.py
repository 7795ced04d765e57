"""The store port: what every backend provides, and the values that cross it.

A backend is a :class:`RunHome` (where one run lives), chosen once from ``OUT``
or a run URL by :mod:`ledger.store.registry`. A home creates the run, opens its
:class:`EventStore` (the log), its :class:`RunFiles` (rows at recorded places,
published files) and its :class:`RowSink` (the recorder's one write path), and
makes the part of the run lock that is its own. ``Ledger`` holds what a home
opened without knowing which backend it is; nothing above this port asks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

if TYPE_CHECKING:
    from ledger.events import Event
    from ledger.store.materialize import MaterializedInputs
    from ledger.store.prepared import Prepared

__all__ = [
    "Builder",
    "EventRow",
    "EventStore",
    "LockPart",
    "NewEvent",
    "NewRow",
    "OpenRun",
    "RowReader",
    "RowSink",
    "RowStore",
    "RunFiles",
    "RunHome",
    "RunNames",
]


@dataclass(frozen=True)
class RunNames:
    """The file names of a run, derived from its stem as NeMo Gym derives them."""

    stem: str

    @property
    def out(self) -> str:
        """The results file."""
        return f"{self.stem}.jsonl"

    @property
    def sidecar(self) -> str:
        """The failure rows and omission stand-ins."""
        return f"{self.stem}_failures.jsonl"

    @property
    def materialized(self) -> str:
        """The materialized inputs."""
        return f"{self.stem}_materialized_inputs.jsonl"


class NewEvent(NamedTuple):
    """An event about to be appended: its kind, time, actor and encoded body."""

    kind: str
    at: str
    actor: str
    body: bytes


class EventRow(NamedTuple):
    """One stored row of the ``events`` table, undecoded."""

    seq: int
    kind: str
    at: str
    actor: str
    body: bytes
    prev_hash: bytes
    hash: bytes


class NewRow(NamedTuple):
    """An outcome row's bytes and where a file-based run holds them (SC-2)."""

    file: str
    offset: int
    data: bytes


#: What a store that keeps rows with their events is handed under its head
#: lock: the files' ends (``{file: [offset, lines]}``, advanced by it) in, the
#: events and each one's row (``None`` for an event without one) out.
Builder = Callable[
    [dict[str, list[int]]], tuple[Sequence[NewEvent], Sequence["NewRow | None"]]
]


class EventStore(Protocol):
    """Append with an expected seq, read from a seq, the head, and snapshots."""

    writable: bool

    def check_schema(self) -> int:
        """The stored schema version (refusing a newer one)."""
        ...

    def transaction(self) -> AbstractContextManager[object]:
        """One transaction: commit, or roll back on any exception."""
        ...

    def head(self) -> tuple[int, bytes]:
        """``(seq, hash)`` of the newest event."""
        ...

    def append_many(
        self, events: Sequence[NewEvent], *, expected_seq: int | None = None
    ) -> list[EventRow]:
        """Append ``events`` in one transaction, chained on the head."""
        ...

    def append_in_transaction(
        self, events: Sequence[NewEvent], *, expected_seq: int | None = None
    ) -> list[EventRow]:
        """Append inside a transaction the caller already holds."""
        ...

    def rows(
        self, from_seq: int = 1, *, kinds: Sequence[str] = ()
    ) -> Iterator[EventRow]:
        """Stored rows in ``seq`` order from ``from_seq``, streamed."""
        ...

    def rows_at(self, seqs: Sequence[int]) -> Iterator[EventRow]:
        """The stored rows of ``seqs`` (those that exist), in ``seq`` order."""
        ...

    def fold_rows(
        self, from_seq: int = 1, *, after: bytes | None = None
    ) -> Iterator[tuple[int, str, bytes]]:
        """``(seq, kind, body)`` of the rows from ``from_seq``: replay's read.

        With ``after`` (the hash of the event before ``from_seq``), the rows
        are checked as the chain that follows it: ``CorruptLedger`` names the
        first seq that is not its next link (R-5).
        """
        ...

    def distinct_kinds(self) -> set[str]:
        """Every kind stored in the log."""
        ...

    def last_rows(self, count: int) -> list[EventRow]:
        """The newest ``count`` rows, oldest first."""
        ...

    def save_snapshot(
        self,
        seq: int,
        head_hash: bytes,
        code_version: str,
        policy_digest: str,
        state: bytes,
    ) -> None:
        """Store a projection snapshot."""
        ...

    def load_snapshot(
        self, code_version: str, policy_digest: str
    ) -> tuple[int, bytes, bytes] | None:
        """``(seq, head_hash, state)`` of the stored snapshot, if any."""
        ...

    def hash_at(self, seq: int) -> bytes | None:
        """The stored hash of event ``seq``, if there is one."""
        ...

    def journal_mode(self) -> str:
        """How the backend makes commits durable."""
        ...

    def lock_holder(self) -> str | None:
        """Who holds the run lock, where the store knows it; ``None`` otherwise."""
        ...

    def close(self) -> None:
        """Close the store (idempotent)."""


class RowReader(Protocol):
    """Reads rows at recorded places; open for a whole pass, then closed."""

    def read_at(self, file: str, offset: int, length: int) -> bytes | None:
        """The ``length`` bytes at ``offset`` of ``file`` (``None``: no such file)."""
        ...

    def read_many(self, places: Sequence[tuple[str, int, int]]) -> list[bytes | None]:
        """``read_at`` of each ``(file, offset, length)``, at once where it helps."""
        ...


class RunFiles(Protocol):
    """A run's files, wherever they are kept."""

    @property
    def names(self) -> RunNames:
        """The run's file names."""
        ...

    def describe(self, file: str) -> str:
        """Where ``file`` is, for messages (a path, or the run URL and the name)."""
        ...

    def reader(self) -> AbstractContextManager[RowReader]:
        """A reader of rows at recorded places, closed when the pass ends."""
        ...

    def chunks(self, file: str) -> Iterator[bytes]:
        """The bytes of ``file`` in order (``FileNotFoundError`` when it is absent)."""
        ...

    def read_published(self, name: str) -> bytes | None:
        """A published file (``manifest.json``, ...), or ``None``."""
        ...

    def publish(self, name: str, data: bytes) -> None:
        """Replace a published file atomically (EV-31)."""
        ...


class RowSink(Protocol):
    """Where a writer's operations go: rows located, written, their events appended.

    The one write path (EV-12, SC-2): a sink locates each row where its file
    really ends (:func:`locate`), makes it durable, and appends every event in
    one transaction, rows never after their events.
    """

    def commit(
        self,
        ops: Sequence[Prepared],
        *,
        encode: Callable[[Event], NewEvent],
        recorded_ends: Mapping[str, tuple[int, int]],
        written: bool = False,
    ) -> tuple[list[EventRow], list[Event]]:
        """Append ``ops``; the stored rows and the events, in order.

        ``recorded_ends`` is where the writer's index says each file's recorded
        rows end (``(offset, lines)``); ``written`` says the rows are in their
        files already (EV-12 repair), to be located and recorded, not written.
        """
        ...

    def close(self) -> None:
        """Release what the sink holds open (idempotent)."""


class RowStore(EventStore, Protocol):
    """A store that keeps each outcome row with its event (SC-2)."""

    def append_built(
        self, build: Builder, *, expected_seq: int | None = None
    ) -> list[EventRow]:
        """Append what ``build`` makes of the files' ends, rows with events."""
        ...


class LockPart(Protocol):
    """One exclusive lock a :class:`ledger.RunLock` takes (EV-40)."""

    @property
    def name(self) -> str:
        """What is locked, for messages (a lock file's path, a run URL)."""
        ...

    @property
    def held(self) -> bool:
        """Whether this part is held by this object."""
        ...

    def acquire(self) -> None:
        """Take it, or raise ``LockHeld`` naming the holder."""
        ...

    def check(self) -> None:
        """Raise ``LockLost`` when this part, once taken, is known lost.

        Cheap (a ``stat``, no round trip): a writer calls it before each
        append. Where a lock can be lost without this process seeing it (a
        PostgreSQL session), the home's store fences each append as well.
        """
        ...

    def release(self) -> None:
        """Release it (idempotent)."""
        ...


@dataclass(frozen=True)
class OpenRun:
    """What a home opened: the log, the files and the write path of one run."""

    store: EventStore
    files: RunFiles
    #: Whether the store accepts appends (a writer, or a worker on a shared log).
    writable: bool
    #: Whether other processes append to the same log (workers, SC-4): a
    #: writer's index then follows the log rather than only its own appends.
    shared_log: bool
    #: The run's folder on disk, when its rows live in files there (EV-12's
    #: repair applies to it); ``None`` when rows are stored with their events.
    folder: Path | None


class RunHome(Protocol):
    """Where one run lives: a folder beside ``OUT``, a PostgreSQL run, ..."""

    @property
    def target(self) -> str:
        """What a lock names: ``OUT``'s absolute path, or the run URL."""
        ...

    @property
    def where(self) -> str:
        """The run's log, for messages (never with a credential)."""
        ...

    @property
    def folder(self) -> Path | None:
        """The folder the run's files live in, when it has one."""
        ...

    def refuse_existing(self) -> None:
        """Refuse to create a run that exists (any of its files, CLI-2)."""
        ...

    def create(
        self, first: NewEvent, inputs: MaterializedInputs, *, journal_mode: str
    ) -> None:
        """Create the run with its first event and inputs, whole or not at all."""
        ...

    def open(self, *, lock: LockPart | None = None) -> OpenRun:
        """Open the run: a writer with ``lock`` held, else a reader (or worker).

        ``lock`` is the held part this home made (:meth:`lock_part`); a store
        that fences each append on it (a PostgreSQL run) keeps it.
        """
        ...

    def check_opened(self, opened: OpenRun) -> None:
        """What this home checks of a run once its log is found sound (REC-51)."""
        ...

    def sink(self, opened: OpenRun) -> RowSink:
        """The write path of a writer (or worker) of this run."""
        ...

    def lock_part(self) -> LockPart:
        """The run lock's own part on this home (EV-40, SC-4)."""
        ...
