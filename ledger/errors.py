"""The one error tree of rollout-ledger (house style, "Errors").

Every error keeps its facts as attributes so callers and the CLI can render or
map them (CLI-1) without parsing messages. Messages say what happened, where
(file and line, seq, dotted key), and what to do; they never hold a credential:
each is built from redacted values where it is made, and the root passes its
message through the one redaction of credential-shaped values once more
(ID-13), whatever a path, an argument or a quoted value held. A count is
said with ``plural`` ("1 row", "2 rows"), here and in every text a person reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ledger.identity.secrets.patterns import redact_secrets


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``"1 row"``, ``"2 rows"``; ``many`` for an irregular plural ("entries")."""
    if count == 1:
        return f"{count} {noun}"
    return f"{count} {many if many is not None else noun + 's'}"


class LedgerError(Exception):
    """The root of every error rollout-ledger raises on purpose."""

    #: The CLI's exit code for this error (CLI-1): 5, "unknown, corrupt or
    #: unsupported saved work", for any LedgerError without a code of its own.
    exit_code: int = 5

    def __init__(self, *args: Any) -> None:
        super().__init__(
            *(redact_secrets(arg) if isinstance(arg, str) else arg for arg in args)
        )


class Refused(LedgerError):
    """The call is not allowed as made: a read-only ledger, a lock not held, ..."""

    exit_code = 3


class StorageError(LedgerError):
    """Reading or writing the run's files or database failed (disk, permissions)."""

    exit_code = 5

    def __init__(self, message: str, *, path: Path | str | None = None) -> None:
        super().__init__(message)
        self.path = None if path is None else str(path)


class ConfigError(LedgerError):
    """A configuration, option file or argument is unusable as given."""

    exit_code = 3

    def __init__(
        self, message: str, *, key: str | None = None, path: Path | str | None = None
    ) -> None:
        super().__init__(message)
        self.key = key
        self.path = None if path is None else str(path)


class AlreadyReserved(ConfigError):
    """An attempt another writer reserved first (SC-3): the store refused the
    second reservation. ``attempt`` is ``(task, rollout, attempt)``."""

    def __init__(self, message: str, *, attempt: tuple[int, int, int], path: str):
        super().__init__(message, path=path)
        self.attempt = attempt


class IdentityMismatch(ConfigError):
    """Saved work does not belong to the current configuration, inputs or run."""

    def __init__(
        self,
        message: str,
        *,
        keys: Sequence[str] = (),
        path: Path | str | None = None,
        line: int | None = None,
    ) -> None:
        super().__init__(message, path=path)
        self.keys = tuple(keys)
        self.line = line


class LockHeld(LedgerError):
    """Another process (or this one, already) owns the run lock."""

    exit_code = 4

    def __init__(
        self,
        path: Path | str,
        *,
        holder: str | None = None,
        detail: str | None = None,
    ) -> None:
        self.path = str(path)
        self.holder = holder
        who = f" held by {holder}" if holder else ""
        extra = f" ({detail})" if detail else ""
        super().__init__(
            f"the run lock {self.path} is{who}{extra}; wait for that process "
            "to finish, or stop it, then try again"
        )


class LockLost(LedgerError):
    """The run lock this writer held is no longer its own; it stopped appending.

    Raised before anything is written (no row, no event), and by every later
    append of the same writer: its lock file was removed or replaced, or its
    PostgreSQL lock session ended (terminated, or the server restarted).
    Exit 4, as for a lock another process holds: do not simply retry.
    """

    exit_code = 4

    def __init__(self, path: Path | str, *, what: str, advice: str) -> None:
        self.path = str(path)
        #: What happened to the lock, in plain words.
        self.what = what
        super().__init__(
            f"{what}: this process no longer owns the run, so it stopped and "
            f"appended nothing more; {advice}"
        )


class CorruptLedger(LedgerError):
    """The saved ledger or a file it points at is damaged or of an unknown form."""

    exit_code = 5

    def __init__(
        self,
        message: str,
        *,
        seq: int | None = None,
        path: Path | str | None = None,
        line: int | None = None,
    ) -> None:
        super().__init__(message)
        self.seq = seq
        self.path = None if path is None else str(path)
        self.line = line


class UnknownEvent(CorruptLedger):
    """A stored event has a kind this version of rollout-ledger does not know."""

    def __init__(self, *, seq: int, kind: str, path: Path | str | None = None) -> None:
        where = f" in {path}" if path is not None else ""
        super().__init__(
            f"event seq {seq}{where} has kind {kind!r}, which this version of "
            "rollout-ledger does not know; upgrade rollout-ledger to read this run",
            seq=seq,
            path=path,
        )
        self.kind = kind


class ConcurrencyConflict(LedgerError):
    """An append expected a head seq that is no longer the head; nothing was written."""

    exit_code = 4

    def __init__(self, *, expected_seq: int, actual_seq: int) -> None:
        super().__init__(
            f"expected the ledger head at seq {expected_seq}, but it is at seq "
            f"{actual_seq}; nothing was written: replay the log and try again"
        )
        self.expected_seq = expected_seq
        self.actual_seq = actual_seq


class RowError(LedgerError):
    """A collector row breaks the row contract (rows.md) so recovery cannot read it."""

    exit_code = 3

    def __init__(
        self,
        message: str,
        *,
        key: str | None = None,
        path: Path | str | None = None,
        line: int | None = None,
    ) -> None:
        super().__init__(message)
        self.key = key
        self.path = None if path is None else str(path)
        self.line = line


class RecoveryIncomplete(LedgerError, RuntimeError):
    """Saved results are valid, but unfinished work remains (REC-40)."""

    def __init__(
        self, message: str, *, retryable: bool, counts: dict[str, int] | None = None
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.counts = dict(counts or {})

    @property
    def exit_code(self) -> int:  # type: ignore[override]
        """75 when some unfinished work is retryable, else 76 (CLI-1, CLI-7)."""
        return 75 if self.retryable else 76
