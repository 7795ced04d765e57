"""A run in a folder beside ``OUT``: its files, ``ledger.db`` and a ``flock``.

The collector files keep NeMo Gym's names beside ``OUT``; the ledger's own live
in ``<stem>_ledger/`` (architecture.md). Rows are written to their files before
their events reach SQLite (:class:`ledger.store.file_sink.FileSink`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ledger.errors import ConfigError, CorruptLedger
from ledger.files import atomic_replace, refuse_irregular
from ledger.paths import RunPaths
from ledger.store.built_aside import built_aside
from ledger.store.file_lock import FileLock
from ledger.store.file_sink import FileSink
from ledger.store.materialize import MaterializedInputs
from ledger.store.missing import require_run_at
from ledger.store.port import LockPart, NewEvent, OpenRun
from ledger.store.run_files import FolderFiles
from ledger.store.sqlite.store import SQLiteStore

__all__ = ["FolderHome"]


@dataclass(frozen=True)
class FolderHome:
    """The home of the run whose output is ``OUT``, in ``OUT``'s folder."""

    paths: RunPaths

    @classmethod
    def of(cls, out: Path | str) -> FolderHome:
        """The home of the run at ``out``."""
        return cls(RunPaths.of(out))

    @property
    def target(self) -> str:
        """``OUT``'s absolute path."""
        return str(self.paths.out)

    @property
    def where(self) -> str:
        """``ledger.db``'s path."""
        return str(self.paths.db)

    @property
    def folder(self) -> Path:
        """``OUT``'s folder."""
        return self.paths.folder

    def refuse_existing(self) -> None:
        """Refuse when the run's database, results or sidecar exist (CLI-2)."""
        # A lock file alone does not count; the materialized inputs may exist
        # from a create that died before its database (accepted when
        # byte-identical, in create).
        paths = self.paths
        for path in (paths.db, paths.out, paths.sidecar):
            if path.exists():
                raise ConfigError(
                    f"{path} exists: this run was started already; continue it with "
                    "`rollout-ledger resume`, or bring an older run in with "
                    "`rollout-ledger import`"
                )

    def create(
        self, first: NewEvent, inputs: MaterializedInputs, *, journal_mode: str
    ) -> None:
        """Write the materialized inputs once, then ``ledger.db`` with ``first``."""
        self._write_materialized(inputs)
        self._build_database(first, journal_mode)

    def _write_materialized(self, inputs: MaterializedInputs) -> None:
        self.paths.ledger_dir.mkdir(parents=True, exist_ok=True)
        target = self.paths.materialized
        if target.exists():
            # A create that died before its database left these bytes: accept
            # them only when identical, never overwrite a collector's file.
            if target.read_bytes() != inputs.data:
                # REC-84: a collector that died before its first row left it;
                # only its own bytes adopt it, never other rows.
                raise ConfigError(
                    f"{target} exists and holds other rows than the inputs given "
                    "(a run was started here, perhaps by a collector that stopped "
                    "before its first row); no run was created. To continue that "
                    f"run, pass that file as --inputs, or bring it in with "
                    f"`rollout-ledger import {self.paths.out}`; to start another "
                    "run, choose another OUT",
                    path=target,
                )
            return
        atomic_replace(target, inputs.data)

    def _build_database(self, first: NewEvent, journal_mode: str) -> None:
        # The database appears under its name only once it holds run_created
        # and checks whole, so a create killed at any instant, or stopped by a
        # full disk, leaves either no run or a whole one.
        with built_aside(
            self.paths.db, suffix=".creating", journal_mode=journal_mode
        ) as store:
            store.append_many([first])

    def open(self, *, lock: LockPart | None = None) -> OpenRun:
        """Open ``ledger.db``: read-write with the lock held, else read-only."""
        require_run_at(self.paths.out)  # a mistyped OUT is missing, not corrupt
        self._refuse_files_without_ledger()
        store = SQLiteStore.open(self.paths.db, writable=lock is not None)
        return OpenRun(
            store=store,
            files=FolderFiles(self.paths),
            writable=lock is not None,
            shared_log=False,
            folder=self.paths.folder,
        )

    def _refuse_files_without_ledger(self) -> None:
        # REC-51: collector files with no ledger are an older run: import it.
        paths = self.paths
        if paths.db.exists():
            return
        found = [p for p in (paths.out, paths.sidecar) if p.exists()]
        if found:
            raise CorruptLedger(
                f"{found[0]} exists but {paths.db} does not: this run was saved "
                "without a ledger; bring it in with "
                f"`rollout-ledger import {paths.out}`",
                path=paths.db,
            )

    def check_opened(self, opened: OpenRun) -> None:
        """REC-51: a ledger whose materialized inputs are missing cannot resume."""
        if not refuse_irregular(self.paths.materialized):
            raise CorruptLedger(
                f"{self.paths.materialized} is missing; the run cannot be resumed "
                "without its materialized inputs",
                path=self.paths.materialized,
            )

    def sink(self, opened: OpenRun) -> FileSink:
        """Rows into the folder's files, then their events into ``ledger.db``."""
        return FileSink(self.paths.folder, opened.store)

    def lock_part(self) -> FileLock:
        """``flock`` on ``<stem>_ledger/run.lock``."""
        return FileLock(self.paths.lock)
