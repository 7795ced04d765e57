"""Copying a run between its two homes (SC-2, SC-5): files and PostgreSQL.

``export_files`` writes any run (usually one on PostgreSQL) as a file-based
run in a folder: its results, sidecar and materialized inputs byte for byte,
and a SQLite ``ledger.db`` holding the same events with the same hashes, so
the copy's head hash is the source's (checked before anything is renamed into
place). ``import_into_store`` loads a file-based run into a new run on
PostgreSQL: the same events, each outcome row stored with its event, the rest
of each file's bytes kept beside them, and the published files.

Events are copied as stored, never re-encoded (EV-2: the chain is over the
stored bytes); the copy's chain is recomputed as it is appended and must end
on the source's head hash, or the copy is refused and removed.

A run may be exported while its writer (or a worker) appends: the export
copies the log up to the head it read at its start, and of each collector
file the bytes the events up to that head record (a row written later, or not
yet recorded, is left out), so the copy is a consistent prefix that verifies.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from ledger.collector_files.waiting import adopt_advice, group_waiting
from ledger.errors import ConfigError, CorruptLedger, StorageError, plural
from ledger.events import Location
from ledger.files import atomic_replace, open_regular
from ledger.paths import RunPaths, check_out_path
from ledger.postgres.store import PostgresStore
from ledger.postgres.url import RunUrl
from ledger.run.ledger import Ledger
from ledger.run.lock import RunLock
from ledger.run.write_index import INDEX_KINDS, WriteIndex
from ledger.store.built_aside import built_aside
from ledger.store.decode import decode_row
from ledger.store.port import EventRow, NewEvent, NewRow

__all__ = ["PUBLISHED_NAMES", "export_files", "import_into_store", "load_into_store"]

#: The published files a run may hold (architecture.md, "Files of one run").
PUBLISHED_NAMES = (
    "identity.json",
    "manifest.json",
    "coverage.json",
    "resume_drift.log",
    "failure_budget.log",
)
_BATCH = 5000
_GAP_CHUNK = 1 << 20


def _new_events(rows: Sequence[EventRow]) -> list[NewEvent]:
    return [NewEvent(r.kind, r.at, r.actor, bytes(r.body)) for r in rows]


def _batches(rows: Iterator[EventRow]) -> Iterator[list[EventRow]]:
    batch: list[EventRow] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= _BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _refuse_broken_source(source: Ledger) -> tuple[int, bytes]:
    """The source's head, read first: the chain is verified at least up to it."""
    head = source.head()
    broken = source.verify_chain()
    if broken is not None:
        raise CorruptLedger(
            f"{source.where}: event seq {broken.seq}: {broken.reason}; a run whose "
            "chain does not verify is not copied (run `rollout-ledger verify`)",
            seq=broken.seq,
            path=source.where,
        )
    return head


# -- to files ---------------------------------------------------------------------


def export_files(source: Ledger, folder: Path | str) -> RunPaths:
    """Write ``source`` as a file-based run in ``folder``; its ``RunPaths``.

    Refuses a folder that already holds any file of the run. The ledger is
    built aside and renamed into place last, so an interrupted export leaves
    no run, only files that a second export refuses to overwrite (remove them).
    The copy ends on the head read at the start (see the module's docstring).
    """
    names = source.files.names
    paths = RunPaths.of(check_out_path(Path(folder) / names.out, "--files DIR"))
    existing = [
        p
        for p in (paths.out, paths.sidecar, paths.materialized, paths.db)
        if p.exists()
    ]
    if existing:
        raise ConfigError(
            f"{existing[0]} exists: export --files writes a new run; choose an "
            "empty folder",
            path=existing[0],
        )
    # Published files first: each is checked at its own seq (coverage.json) or
    # against the log, so one read before the head is never ahead of the copy.
    published = {name: source.files.read_published(name) for name in PUBLISHED_NAMES}
    head = _refuse_broken_source(source)
    ends = _ends_at(source, head[0])
    made_dir = not paths.ledger_dir.exists()
    written = [paths.materialized, paths.out, paths.sidecar]
    written += [
        path
        for name in published
        if not (path := paths.ledger_dir / name).exists()  # only what it writes
    ]
    try:
        try:
            paths.ledger_dir.mkdir(parents=True, exist_ok=True)
            _write_file(source, names.materialized, paths.materialized, None)
            for name in (names.out, names.sidecar):
                _write_file(source, name, paths.folder / name, ends.get(name, 0))
            for name, data in published.items():
                if data is not None:
                    atomic_replace(paths.ledger_dir / name, data)
        except OSError as exc:
            raise StorageError(
                f"could not write into {folder}: "
                f"{(exc.strerror or str(exc)).lower()} ({exc.filename or folder}); "
                "what was written is removed: free space there (or choose "
                "another folder), then export again",
                path=folder,
            ) from exc
        _write_ledger(source, paths, head)
    except BaseException:
        # A half-made copy must not stay: a second export would refuse it.
        _remove_copy(written, paths.ledger_dir if made_dir else None)
        raise
    return paths


def _remove_copy(written: list[Path], made_dir: Path | None) -> None:
    """Remove the files an export that failed wrote (it checked none existed)."""
    for path in written:
        path.unlink(missing_ok=True)
    if made_dir is not None:
        with contextlib.suppress(OSError):  # not empty: files it did not write stay
            made_dir.rmdir()


def _ends_at(source: Ledger, seq: int) -> dict[str, int]:
    """Where each collector file's recorded rows end, as of event ``seq``."""
    events = itertools.takewhile(
        lambda event: event.seq <= seq, source.events(1, kinds=INDEX_KINDS)
    )
    return {file: end.offset for file, end in WriteIndex.build(events).ends.items()}


def _write_file(source: Ledger, name: str, target: Path, end: int | None) -> None:
    """Copy ``name``: all of it, or its first ``end`` bytes (the recorded rows)."""
    chunks = source.files.chunks(name)
    try:
        first = next(chunks, None)
    except FileNotFoundError:
        return
    if end == 0 or (first is None and end is not None):
        return  # no rows there: NeMo Gym creates the file with its first row
    left = end
    with target.open("xb") as handle:
        for chunk in itertools.chain([] if first is None else [first], chunks):
            piece = chunk if left is None else chunk[:left]
            handle.write(piece)
            if left is not None:
                left -= len(piece)
                if left == 0:
                    break
        handle.flush()
        os.fsync(handle.fileno())


def _write_ledger(source: Ledger, paths: RunPaths, head: tuple[int, bytes]) -> None:
    with built_aside(paths.db, suffix=".exporting") as store:
        rows = itertools.takewhile(lambda row: row.seq <= head[0], source.raw_events(1))
        for batch in _batches(rows):
            store.append_many(_new_events(batch))
        copied = store.head()
        if copied != head:
            raise CorruptLedger(
                f"the exported ledger ends on seq {copied[0]}, hash "
                f"{copied[1].hex()}, not the source's seq {head[0]}, hash "
                f"{head[1].hex()}: the source's events changed while they were "
                "copied; run `rollout-ledger verify` on it, then export again",
                path=source.where,
            )


# -- into PostgreSQL --------------------------------------------------------------


def load_into_store(out: Path | str, url: RunUrl | str) -> tuple[int, bytes]:
    """``import_into_store`` of the run at ``out`` under both runs' locks; its head.

    The file-based run's lock keeps its writer out while it is copied; the new
    run's lock makes this process its coordinator until the copy is whole.
    """
    target = url if isinstance(url, RunUrl) else RunUrl.parse(url)
    with RunLock(out), RunLock(str(target)), Ledger.open(out) as source:
        return import_into_store(source, target)


def import_into_store(source: Ledger, url: RunUrl | str) -> tuple[int, bytes]:
    """Load the file-based run ``source`` into a new run at ``url``; its head.

    The source must verify (its chain) and have no pending repair; the new
    run appears whole, in one transaction, or not at all.
    """
    if source.folder is None:
        raise ConfigError(f"{source.where} is kept in a store already, not in files")
    head = _refuse_broken_source(source)
    pending = source.pending_repairs()
    waiting = group_waiting((p.file, p.line, p.what) for p in pending)
    if waiting:  # REC-86: another collector's rows; `import` adopts them
        raise ConfigError(
            f"{adopt_advice(source.where, waiting)}, then load it again",
            path=source.where,
        )
    if pending:
        raise ConfigError(
            f"{source.where} has {plural(len(pending), 'pending repair')} (rows a "
            "killed writer left unrecorded); open it as a writer first, for "
            "example with `rollout-ledger status --publish`",
            path=source.where,
        )
    ends = source.write_index().ends
    folder = source.paths.folder

    def fill(store: PostgresStore) -> None:
        rows = _RowSource(folder)
        try:
            for batch in _batches(source.raw_events(2)):
                located = [rows.row_of(row) for row in batch]
                store.append_in_transaction(_new_events(batch), rows=located)
        finally:
            rows.close()
        names = source.files.names
        store.put_file_bytes(names.materialized, _materialized_pieces(source))
        for name in (names.out, names.sidecar):
            covered = rows.covered.get(name, [])
            store.put_file_bytes(name, _gaps(folder / name, covered))
        store.set_file_ends(
            {
                names.materialized: [source.paths.materialized.stat().st_size, 0],
                **{file: [end.offset, end.lines] for file, end in ends.items()},
            }
        )
        for published in PUBLISHED_NAMES:
            data = source.files.read_published(published)
            if data is not None:
                store.put_published(published, data)

    first = next(source.raw_events(1))
    created = PostgresStore.create(
        url, events=_new_events([first]), stem=source.paths.stem, fill=fill
    )
    try:
        copied = created.head()
        created.analyze()  # the planner's statistics, for the tables just filled
    finally:
        created.close()
    if copied != head:  # unreachable unless the source changed under its lock
        raise CorruptLedger(
            f"the imported run ends on seq {copied[0]}, not the source's {head[0]}",
            path=source.where,
        )
    return copied


_LOCATED_KINDS = frozenset(
    {"result_saved", "failure_saved", "omission_saved", "judge_outcome_saved"}
)


class _RowSource:
    """Reads each recorded row from the source's files, keeping them open."""

    def __init__(self, folder: Path) -> None:
        self._folder = folder
        self._handles: dict[str, BinaryIO] = {}
        #: ``{file: [(offset, length), ...]}`` of every row read.
        self.covered: dict[str, list[tuple[int, int]]] = {}

    def row_of(self, row: EventRow) -> NewRow | None:
        if row.kind not in _LOCATED_KINDS:
            return None
        where = getattr(decode_row(row).body, "location", None)
        if not isinstance(where, Location):
            return None
        handle = self._handles.get(where.file)
        if handle is None:
            handle = self._handles[where.file] = open_regular(self._folder / where.file)
        handle.seek(where.offset)
        data = handle.read(where.length)
        self.covered.setdefault(where.file, []).append((where.offset, where.length))
        return NewRow(where.file, where.offset, data)

    def close(self) -> None:
        for handle in self._handles.values():
            handle.close()


def _materialized_pieces(source: Ledger) -> Iterator[tuple[int, bytes]]:
    """Each materialized row as a piece (point reads by offset), then any rest."""
    created = source.run_created()
    with open_regular(source.paths.materialized) as handle:
        end = 0
        for entry in created.index:
            offset, length = entry[2], entry[3]
            handle.seek(offset)
            yield offset, handle.read(length)
            end = max(end, offset + length)
        handle.seek(end)
        rest = handle.read()
        if rest:
            yield end, rest


def _gaps(path: Path, rows: list[tuple[int, int]]) -> Iterator[tuple[int, bytes]]:
    """The bytes of ``path`` that no recorded row covers, as pieces, streamed."""
    if not path.exists():
        return
    with open_regular(path) as handle:
        position = 0
        for offset, length in sorted(rows):
            if offset > position:
                handle.seek(position)
                yield position, handle.read(offset - position)
            position = max(position, offset + length)
        handle.seek(position)
        while chunk := handle.read(_GAP_CHUNK):
            yield position, chunk
            position += len(chunk)
