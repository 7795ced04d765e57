"""``import_run``: import a run saved without a ledger, then publish (REC-70, REC-74).

``ledger.import_legacy_run`` writes the log; this module replays it, writes the
published files under the run lock and returns the coverage. With
``dry_run`` the would-be log is folded as a ledger's is, and nothing is
written.
``import_into_store`` loads a file-based run into a run in a store (SC-2),
importing it beside its files first when it was saved without a ledger.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

import msgspec

from ledger import (
    Clock,
    ImportReport,
    Ledger,
    RunLock,
    RunPaths,
    copy_into_store,
    import_legacy_run,
)
from ledger.events import StoredEvent
from projections.decisions.completion import Coverage, coverage
from projections.decisions.rules import TaskDecisions, decide_all
from projections.fold.reading import StoredLog, replay
from projections.fold.settled import settle
from projections.fold.state import RunState
from projections.operations.keep import save_left
from projections.operations.publishing import publish

__all__ = ["ImportResult", "StoreImport", "import_into_store", "import_run"]

#: Called with the bytes read so far and the bytes to read in all.
Progress = Callable[[int, int], None]


class ImportResult:
    """What the import recorded (or would record), the state and its coverage.

    ``state`` is the whole run's. After a real import it is replayed when
    first read: the import itself keeps no state of a million rollouts
    beside the snapshot it saves (P-9).
    """

    def __init__(
        self,
        report: ImportReport,
        state: RunState | None,
        coverage: Coverage,
        *,
        out: Path | str | None = None,
    ) -> None:
        self.report = report
        self.coverage = coverage
        self._state = state
        self._out = out

    @property
    def state(self) -> RunState:
        """The whole run's folded state."""
        if self._state is None:
            assert self._out is not None
            with Ledger.open(self._out) as reader:
                self._state = replay(reader)
        return self._state


def import_run(out: Path | str, **options: Any) -> ImportResult:
    """Import the run at ``out`` and publish its files (REC-70..REC-74).

    ``options`` are those of ``ledger.import_legacy_run``: ``inputs``,
    ``skip_rejected``, ``dry_run``, ``lock`` and ``clock``. Without ``lock``
    the run lock is held for the import and the publishing together; a dry run
    takes no lock and writes nothing. On a run that has a ledger, the rows
    another collector appended since are adopted (REC-86), and ``state`` is
    the whole run's.
    """
    if options.get("dry_run"):
        report = import_legacy_run(out, **options)
        state = replay(_would_be(out, report))
        return ImportResult(report, state, coverage(state, TaskDecisions(state)))
    lock = options.pop("lock", None)
    if lock is not None:
        return _import_and_publish(out, lock, options)
    with RunLock(out) as held:
        return _import_and_publish(out, held, options)


class StoreImport(msgspec.Struct, frozen=True, kw_only=True):
    """A file-based run loaded into a store's run, or with ``dry_run`` not yet."""

    url: str
    source: str
    #: The import of a run saved without a ledger, made first (REC-70).
    imported: ImportResult | None
    #: The loaded run's last seq and head hash, the source's; ``None`` when
    #: a dry run imported nothing to load.
    seq: int | None
    head: bytes | None
    dry_run: bool


def import_into_store(
    url: str,
    source: Path | str,
    *,
    inputs: Path | str | None = None,
    skip_rejected: bool = False,
    dry_run: bool = False,
    clock: Clock | None = None,
    progress_bar: Callable[[], AbstractContextManager[Progress | None]] | None = None,
) -> StoreImport:
    """Load the file-based run at ``source`` into the new run at ``url`` (SC-2).

    A run saved without a ledger is imported beside its files first (REC-70,
    with ``inputs``, ``skip_rejected`` and ``clock`` as ``import_run`` takes
    them), and rows another collector appended to one that has a ledger are
    adopted first (REC-86); ``progress_bar`` is entered for that import only,
    and gives the callback its progress is reported to. ``dry_run`` writes nothing: it
    reports the import that would be made, or the head that would be loaded.
    """
    imported = None
    if _to_import(source):
        with (progress_bar or nullcontext)() as progress:
            imported = import_run(
                source,
                inputs=inputs,
                skip_rejected=skip_rejected,
                dry_run=dry_run,
                clock=clock,
                progress=progress,
            )
        if dry_run:
            return StoreImport(
                url=url,
                source=str(source),
                imported=imported,
                seq=None,
                head=None,
                dry_run=True,
            )
    if dry_run:
        with Ledger.open(source) as led:
            seq, head = led.head()
    else:
        copied = copy_into_store(source, url)
        seq, head = copied.seq, copied.head
    return StoreImport(
        url=url,
        source=str(source),
        imported=imported,
        seq=seq,
        head=head,
        dry_run=dry_run,
    )


def _to_import(source: Path | str) -> bool:
    """Saved without a ledger (REC-70), or rows wait to be adopted (REC-86)."""
    if not RunPaths.of(source).db.exists():
        return True
    with Ledger.open(source) as reader:
        return bool(reader.waiting())


def _would_be(out: Path | str, report: ImportReport) -> StoredLog | list[StoredEvent]:
    """The whole log a dry run's events would extend (only an adoption's do).

    A dry run of an import gives a log replay reads as it reads a ledger's,
    without holding its events (P-9).
    """
    if not report.adopting:
        events = report.events
        return events if isinstance(events, StoredLog) else list(events)
    with Ledger.open(out) as reader:
        return [*reader.events(), *report.events]


def _import_and_publish(
    out: Path | str, lock: RunLock, options: dict[str, Any]
) -> ImportResult:
    report = import_legacy_run(out, lock=lock, **options)
    # A reader, though we hold the lock: a writer's open would run the EV-12
    # repair and cut a torn last line the import skipped, and an import never
    # modifies a collector file (REC-70). The next writer's open does that.
    with Ledger.open(out) as reader:
        # P-9: the log is folded in one streaming pass (the import keeps none
        # of its events), and the rollouts are decided a task at a time: a
        # dict of a million decisions would not fit beside their state.
        state = replay(reader)
        cover = coverage(state, TaskDecisions(state))
        publish(reader, state, lock=lock, cover=cover)
        # P-8: the snapshot of what is left, so the first resume reads no
        # more than the next ones. Each task is freed once summed.
        left = settle(state, TaskDecisions(state), consume=True)
        del state
    # A writer that leaves the collector files to the next writer's open, as
    # the import's reader did (REC-70): only the snapshot is written.
    with Ledger.open(out, lock=lock, adopting=True) as writer:
        save_left(writer, left, decide_all(left), None, covered=cover)
    return ImportResult(report, None, cover, out=out)
