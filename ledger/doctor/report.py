"""``doctor`` (CLI-14): the environment checks for one run, and what they advise.

For a run beside ``OUT``: whether ``flock`` holds across processes, whether
SQLite's WAL is safe on this filesystem, free space, and who holds the run
lock (EV-42; the checks are ``ledger.doctor.checks``'s), with the journal mode
to create runs with here. For a run in a store, which has no filesystem of its
own: that the store answers, how an append is made durable, and who holds
the run's lock.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from ledger.doctor.checks import (
    NETWORK_FILESYSTEMS,
    Check,
    filesystem_type,
    flock_check,
    free_space_check,
    lock_holder_check,
    wal_check,
)
from ledger.errors import ConfigError, plural
from ledger.paths import RunPaths
from ledger.run.ledger import Ledger
from ledger.store.read_only import unwritable
from ledger.store.registry import home_for, resolve_out

__all__ = ["DoctorReport", "doctor"]


@dataclass(frozen=True)
class DoctorReport:
    """Each check in order, the run's journal mode and the advice that follows."""

    checks: tuple[Check, ...]
    #: ``wal``, ``delete``, ``postgresql``; ``None`` when the run has no ledger yet.
    journal_mode: str | None
    advice: str
    #: Whether ``flock`` holds across processes here (two collectors could
    #: otherwise own one run).
    flock_enforced: bool


def doctor(out: Path | str) -> DoctorReport:
    """The checks for the run at ``out`` (a path, or a run URL as a string)."""
    target = resolve_out(out) if isinstance(out, str) else out
    if home_for(target).folder is None:  # a run kept in a store: no filesystem
        return _store_report(str(target))
    return _folder_report(Path(target))


def _journal_advice(mode: str | None, wal_ok: bool) -> str:
    if mode is None:
        return (
            "create runs here with --journal-mode wal"
            if wal_ok
            else "create runs here with --journal-mode delete (WAL is unsafe here)"
        )
    if mode == "wal" and not wal_ok:
        return (
            "this run uses WAL where it is unsafe: keep one writer node and no "
            "readers elsewhere, or create new runs with --journal-mode delete"
        )
    # Printed after the mode ("journal mode: wal; it suits ..."): not named twice.
    return "it suits this filesystem"


def _folder_report(out: Path) -> DoctorReport:
    paths = RunPaths.of(out)
    if not paths.folder.is_dir():
        raise ConfigError(f"the run folder {paths.folder} does not exist")
    mode = head = None
    if paths.db.exists():
        with Ledger.open(out) as led:
            mode, head = led.journal_mode, led.head()[0]
    probe_dir = paths.ledger_dir if paths.ledger_dir.is_dir() else paths.folder
    read_only = unwritable(probe_dir) or _cannot_write(probe_dir)
    if read_only is not None:
        # No probe file can be made, and no collector can own the run here:
        # a writer is refused before its lock, so flock cannot be shared.
        return _read_only_report(out, probe_dir, head, mode, read_only)
    checks = (
        flock_check(probe_dir),
        wal_check(out, probe_dir),
        free_space_check(probe_dir),
        lock_holder_check(paths.lock),
    )
    advice = _journal_advice(mode, checks[1].ok)
    return DoctorReport(checks, mode, advice, flock_enforced=checks[0].ok)


def _cannot_write(folder: Path) -> str | None:
    """Why no file can be made in ``folder`` (its probes need one), or ``None``.

    ``unwritable`` reads the mount and the permissions; a file system can
    refuse more than they tell (sysfs, procfs, quotas): this tries.
    """
    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".doctor-"):
            return None
    except OSError as exc:
        return f"{folder} cannot be written ({exc.strerror or exc})"


def _filesystem(folder: Path) -> Check:
    """WAL safety where no scratch database can be made: the filesystem's type."""
    fstype, point = filesystem_type(folder)
    where = f"{fstype} at {point or '?'}"
    if fstype in NETWORK_FILESYSTEMS:
        return Check("WAL safety", False, f"{where}: a network filesystem")
    return Check(
        "WAL safety", True, f"{where}: local (no second process tried: read-only)"
    )


def _read_only_report(
    out: Path, probe_dir: Path, head: int | None, mode: str | None, reason: str
) -> DoctorReport:
    paths = RunPaths.of(out)
    checks = (
        Check(
            "writable",
            False,
            f"{reason}: every reader works; commands that record refuse (copy the "
            "run's folder to a place you can write to continue it)",
        ),
        Check(
            "flock across processes",
            True,
            "not tried: no collector can write here, so none can share the run",
        ),
        _filesystem(probe_dir),
        free_space_check(probe_dir),
        lock_holder_check(paths.lock),
    )
    advice = "read-only here: reading a run needs no write access"
    return DoctorReport(checks, mode, advice, flock_enforced=True)


def _store_report(url: str) -> DoctorReport:
    # EV-42's checks are about a filesystem; a run in a store has none.
    with Ledger.open(url) as led:
        seq = led.head()[0]
        holder = led.lock_holder()
    lock = f"held by {holder}" if holder else "free"
    checks = (
        Check("store", True, f"{url} answers; the run holds {plural(seq, 'event')}"),
        Check(
            "durability",
            True,
            "an append returns once the server's commit is flushed "
            "(synchronous_commit = on)",
        ),
        Check("run lock", True, f"{lock} (a session advisory lock)"),  # SC-4
    )
    advice = "flock and WAL checks do not apply here"
    return DoctorReport(checks, "postgresql", advice, flock_enforced=True)
