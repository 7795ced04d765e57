"""Importing a run saved without a ledger (REC-70..REC-74).

An older collector left ``OUT``, perhaps its sidecar, its materialized inputs
and a NeMo Gym manifest. ``import_legacy_run`` reads them, in that order and
each in file order, and writes ``<stem>_ledger/``: ``run_created``,
``legacy_imported`` and one outcome event per row (actor ``import``), built in
a database aside and renamed into place, so an import killed at any instant
leaves no half run. It streams (P-9): every file is read line by line, the
outcome events are spooled to a nameless temporary file until
``legacy_imported`` can be written, then appended in batches, and the report
reads the events back from the log when asked for them (a dry run, from a
nameless temporary file that holds the log it would write). Collector files and
other tools' files are only read; the one file written outside the ledger
folder is the copy of ``--inputs`` when the run has no materialized inputs.
The published projections (coverage) are the caller's to write:
``projections.import_run`` does both.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
from pydantic import ValidationError

from ledger.clock import Clock
from ledger.collector_files.rows_seen import look_at_rows, save_rows_seen
from ledger.errors import (
    ConfigError,
    CorruptLedger,
    Refused,
    RowError,
)
from ledger.events import (
    LegacyImported,
    LegacyRejection,
    LegacySource,
    StoredEvent,
    encode_body,
)
from ledger.identity.manifest import RunManifest
from ledger.identity.secrets.redact import credential_safe
from ledger.legacy.adopt import AdoptedRows, adopt
from ledger.legacy.inputs import Materialized, inputs_file, read_materialized
from ledger.legacy.log import run_created_bytes, would_be, write_log
from ledger.legacy.manifest import (
    ForeignManifest,
    foreign_manifest_path,
    read_foreign_manifest,
)
from ledger.legacy.reading import Meter, OutcomeReader, Progress, listing
from ledger.legacy.recorded import RecordedEvents
from ledger.legacy.spool import EventSpool
from ledger.paths import RunPaths
from ledger.run.lock import RunLock
from ledger.validation import field_problems

__all__ = ["AdoptedRows", "ImportReport", "import_legacy_run"]


class ImportReport(msgspec.Struct, frozen=True, kw_only=True):
    """What an import recorded or, with ``dry_run``, would record (REC-70, REC-74).

    ``events`` are the events as stored (or as they would be), in ``seq``
    order: an import reads them back from the log it wrote when they are
    iterated or indexed (P-9), a dry run from the nameless temporary file it
    chained them in (a log ``projections.fold.reading`` folds); ``kinds`` counts
    them per kind, in the order each kind first comes; ``rows_read`` counts the
    lines of the sidecar and ``OUT``, each of which was imported or rejected
    (blank lines are rejections that never fail an import); ``inputs_copied``
    says ``--inputs`` became the run's materialized inputs. On a run that has
    a ledger (REC-86) ``adopting`` is set, ``adopted`` says per file which
    rows were adopted (or would be), ``events`` are their outcome events only,
    and ``rows_read`` counts the lines past the recorded ends.
    """

    out: str
    ledger_dir: str
    run_id: str
    dry_run: bool
    inputs_copied: bool
    sources: tuple[LegacySource, ...]
    rows_read: int
    rows_imported: int
    rows_rejected: int
    rejections: tuple[LegacyRejection, ...]
    foreign_manifest: dict[str, Any] | None
    events: Sequence[StoredEvent]
    adopting: bool = False
    adopted: tuple[AdoptedRows, ...] = ()
    kinds: dict[str, int] = {}


def import_legacy_run(
    out: Path | str,
    *,
    inputs: Path | str | None = None,
    skip_rejected: bool = False,
    dry_run: bool = False,
    lock: RunLock | None = None,
    clock: Clock | None = None,
    progress: Progress | None = None,
    jobs: int = 1,
) -> ImportReport:
    """Import the run an older collector left at ``out`` (REC-70..REC-74).

    ``inputs`` is required when ``<stem>_materialized_inputs.jsonl`` is missing,
    and is copied there. Without ``lock`` the run lock is taken for the
    import's duration; ``dry_run`` takes none and writes nothing. ``progress``
    is called with the work done so far and in all: the bytes of the
    materialized inputs (or ``inputs``), the sidecar and ``OUT`` as they are
    read, then the bytes of the outcome rows again as their events are
    appended. ``jobs``: processes that parse a large file's lines (issue 30);
    the events are the same bytes whatever their number.

    On a run that has a ledger already, the rows appended to ``OUT`` and the
    sidecar since its last recorded row are adopted (REC-86); with nothing
    appended, nothing is recorded.

    Raises:
        ConfigError: the run has no collector files, or no materialized inputs
            and no ``inputs``; ``inputs`` differs from the existing
            materialized inputs.
        RowError: a line was rejected and ``skip_rejected`` is not set (the
            message lists them with line numbers), or an input row is unusable.
        CorruptLedger: a NeMo Gym manifest beside the run cannot be read; on
            a run that has a ledger, a recorded row changed (R-7).
        LockHeld: another process holds the run lock.
    """
    paths = RunPaths.of(out)
    clock = clock or Clock()
    options = _Options(
        inputs, clock, progress, skip_rejected=skip_rejected, jobs=max(1, jobs)
    )
    if dry_run:
        return _import(paths, options, lock=None)
    if lock is not None:
        _require_lock(lock, paths)
        return _import(paths, options, lock=lock)
    with RunLock(paths.out) as held:
        return _import(paths, options, lock=held)


def _require_lock(lock: RunLock, paths: RunPaths) -> None:
    if not lock.held or lock.paths.out != paths.out:
        raise Refused(f"importing {paths.out} needs its held RunLock; acquire it first")


class _Options(NamedTuple):
    inputs: Path | str | None
    clock: Clock
    progress: Progress | None
    skip_rejected: bool
    jobs: int = 1


def _import(
    paths: RunPaths, options: _Options, *, lock: RunLock | None
) -> ImportReport:
    if paths.db.exists():  # REC-74: the database is the run; REC-86 adopts
        return _adopt(paths, options, lock)
    _refuse_missing(paths)
    write = lock is not None
    # Issue 30: the rows are hashed as they are read; files that did not move
    # while read are noted as the writer notes them, for status's stat.
    looked = look_at_rows(paths)
    source, copy = inputs_file(paths, options.inputs)
    outcomes = sum(map(_size, _outcome_files(paths)))
    # Reading every file, then appending the outcome rows' events (as much work
    # again as reading their files, for the progress bar).
    meter = Meter(options.progress, _size(source) + 2 * outcomes)
    name = paths.relative(paths.materialized)
    materialized = read_materialized(source, name, advance=meter.advance)
    foreign = read_foreign_manifest(foreign_manifest_path(paths))
    manifest = _manifest(materialized, foreign, options.clock, paths)
    with EventSpool(paths.folder if write else None) as spool:
        reader = OutcomeReader(
            materialized.keys,
            manifest.run_id,
            sink=spool.add,
            meter=meter,
            jobs=options.jobs,
            encoded_sink=spool.add_encoded,
        )
        legacy = _legacy_imported(paths, materialized, foreign, reader)
        spool.finish()
        if reader.failing and not options.skip_rejected:
            raise _rejected(paths, reader)
        first = [
            ("run_created", run_created_bytes(manifest, materialized, paths.out)),
            ("legacy_imported", encode_body(legacy)),
        ]
        now = options.clock.now
        if write:
            copied = (source, paths.materialized) if copy else None
            write_log(paths.db, first, spool, now, copy=copied, share=(outcomes, meter))
            manifest.write(paths.manifest)  # ID-32: an imported run has no identity
            save_rows_seen(paths, looked=looked)
            events: Sequence[StoredEvent] = RecordedEvents(
                paths.out, first=1, count=len(first) + spool.count
            )
        else:
            events = would_be(first, spool, now)
        kinds = {kind: 1 for kind, _ in first} | spool.kinds
    meter.finish()
    return ImportReport(
        out=str(paths.out),
        ledger_dir=str(paths.ledger_dir),
        run_id=manifest.run_id,
        dry_run=not write,
        inputs_copied=copy,
        sources=legacy.sources,
        rows_read=legacy.rows_read,
        rows_imported=legacy.rows_imported,
        rows_rejected=legacy.rows_rejected,
        rejections=legacy.rejections,
        foreign_manifest=legacy.foreign_manifest,
        events=events,
        kinds=kinds,
    )


def _legacy_imported(
    paths: RunPaths,
    materialized: Materialized,
    foreign: ForeignManifest | None,
    reader: OutcomeReader,
) -> LegacyImported:
    """Read the sidecar, then OUT; what was read, taken and rejected (REC-70)."""
    sources = _sources(paths, materialized, foreign, reader)
    return LegacyImported(
        sources=sources,
        rows_read=reader.rows_read,
        rows_imported=reader.imported,
        rows_rejected=len(reader.rejections),
        rejections=tuple(reader.rejections),
        # ID-13: another tool's file, kept whole but for its credentials.
        foreign_manifest=None
        if foreign is None
        else credential_safe(foreign.value, resolved=True),
    )


def _adopt(paths: RunPaths, options: _Options, lock: RunLock | None) -> ImportReport:
    """REC-86: record the rows appended since the ledger last recorded a row."""
    if options.inputs is not None:
        inputs_file(paths, options.inputs)  # refuses other inputs than the run's
    found = adopt(paths, lock=lock, clock=options.clock)
    kinds: dict[str, int] = {}
    for event in found.events:
        kinds[event.kind] = kinds.get(event.kind, 0) + 1
    return ImportReport(
        out=str(paths.out),
        ledger_dir=str(paths.ledger_dir),
        run_id=found.run_id,
        dry_run=lock is None,
        inputs_copied=False,
        sources=(),
        rows_read=found.rows_read,
        rows_imported=len(found.events),
        rows_rejected=0,
        rejections=(),
        foreign_manifest=None,
        events=found.events,
        adopting=True,
        adopted=found.files,
        kinds=kinds,
    )


def _refuse_missing(paths: RunPaths) -> None:
    # REC-84: a collector that died before its first row left only its
    # materialized inputs; that is a run with every rollout pending.
    if not (
        paths.out.exists() or paths.sidecar.exists() or paths.materialized.exists()
    ):
        raise ConfigError(
            f"none of {paths.out}, {paths.sidecar} and {paths.materialized} "
            "exists: there is no run to import; start a new one with "
            "`rollout-ledger create`",
            path=paths.out,
        )


def _manifest(
    materialized: Materialized,
    foreign: ForeignManifest | None,
    clock: Clock,
    paths: RunPaths,
) -> RunManifest:
    # REC-73: a NeMo Gym manifest's run id and digest are kept; its digest
    # follows another algorithm, so matches_config never accepts it (REC-57).
    try:
        return RunManifest.import_legacy(
            (),
            materialized_sha256=materialized.sha256,
            run_id=None if foreign is None else foreign.run_id,
            config_digest=None if foreign is None else foreign.config_digest,
            clock=clock,
        )
    except ValidationError as exc:
        raise CorruptLedger(
            f"the NeMo Gym manifest {foreign_manifest_path(paths)} gives an "
            "unusable run id or digest: "
            + "; ".join(field_problems(exc, RunManifest, show_input=False)),
            path=foreign_manifest_path(paths),
        ) from None


def _outcome_files(paths: RunPaths) -> tuple[Path, Path]:
    """The files of outcome rows, in the order they are read (REC-70)."""
    return paths.sidecar, paths.out


def _sources(
    paths: RunPaths,
    materialized: Materialized,
    foreign: ForeignManifest | None,
    reader: OutcomeReader,
) -> tuple[LegacySource, ...]:
    """Read the sidecar, then OUT (REC-70); every file read, with size and digest."""
    found = [
        LegacySource(
            file=paths.relative(paths.materialized),
            size=materialized.size,
            sha256=materialized.sha256,
            lines=materialized.lines,
        )
    ]
    if foreign is not None:
        name = paths.relative(foreign_manifest_path(paths))
        found.append(_whole(name, foreign.data))
    for path in _outcome_files(paths):
        source = reader.read(path, paths.relative(path), sidecar=path == paths.sidecar)
        if source is not None:
            found.append(source)
    return tuple(found)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _whole(file: str, data: bytes) -> LegacySource:
    return LegacySource(
        file=file,
        size=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        lines=data.count(b"\n"),
    )


def _rejected(paths: RunPaths, reader: OutcomeReader) -> RowError:
    failing = reader.failing
    first = failing[0]
    return RowError(
        f"{len(failing)} line{'' if len(failing) == 1 else 's'} of "
        f"{paths.out.name} or its sidecar cannot be imported, so nothing was "
        f"written:\n"
        f"{listing([(r.file, r.line, r.reason) for r in failing])}\n"
        "fix or move these lines aside, or import the rest with --skip-rejected "
        "(the skipped lines are recorded)",
        path=paths.folder / first.file,
        line=first.line,
    )
