"""The run lock (EV-40..EV-42): one owner per run, released on its holder's death.

``RunLock(out)`` takes the lock of the run's home (a ``flock`` on
``<stem>_ledger/run.lock`` beside ``OUT``, a session advisory lock for a run on
PostgreSQL, ...), and with ``checkpoint_dir`` the ``flock`` of
``<checkpoint_dir>/.collector.lock`` too, so two outputs never share one
checkpoint folder. Acquire it before anything of the run is prepared,
restored or written.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

from ledger.errors import LockHeld, Refused
from ledger.paths import RunPaths
from ledger.store.file_lock import FileLock
from ledger.store.port import LockPart
from ledger.store.registry import home_for

__all__ = ["RunLock"]


class RunLock:
    """The exclusive lock of the run named by ``out`` (EV-40).

    A second owner gets :class:`LockHeld` naming the holder's pid, host and
    start time. Locks do not nest (EV-41).
    """

    def __init__(
        self, out: Path | str, checkpoint_dir: Path | str | None = None
    ) -> None:
        home = home_for(out)
        #: The run this lock is for: ``OUT``'s absolute path, or the run URL.
        self.target = home.target
        self._folder = home.folder
        self._parts: list[LockPart] = [home.lock_part()]
        if checkpoint_dir is not None:
            self._parts.append(FileLock(Path(checkpoint_dir) / ".collector.lock"))

    @property
    def paths(self) -> RunPaths:
        """The run's files beside ``OUT`` (a run stored elsewhere has none)."""
        if self._folder is None:
            raise Refused(f"{self.target} is not a run in a folder: it has no files")
        return RunPaths.of(self.target)

    @property
    def held(self) -> bool:
        """Whether this object holds every lock it names."""
        return all(part.held for part in self._parts)

    def acquire(self) -> RunLock:
        """Take every lock, or none: raises :class:`LockHeld` when one is owned."""
        if self.held:
            raise LockHeld(
                self._parts[0].name,
                holder="this RunLock object",
                detail="locks do not nest",
            )
        taken: list[LockPart] = []
        try:
            for part in self._parts:
                part.acquire()
                taken.append(part)
        except BaseException:
            for part in reversed(taken):
                part.release()
            raise
        return self

    @property
    def home_part(self) -> LockPart:
        """The part of the run's own home (its store may fence appends on it)."""
        return self._parts[0]

    def check(self) -> None:
        """Raise ``LockLost`` when a part this object took is known lost.

        A writer calls it before each append: a lock file removed or replaced
        under its holder, or a lock session that ended, stops it before it
        writes anything (the holder must notice that it lost its lock).
        """
        if not self.held:
            raise Refused(
                f"the RunLock for {self.target} was released; appends need it "
                "held: acquire it and open the run again"
            )
        for part in self._parts:
            part.check()

    def release(self) -> None:
        """Release every lock this object holds (the lock files stay, EV-41)."""
        for part in reversed(self._parts):
            part.release()

    def require_for(self, target: str) -> None:
        """Refuse unless this lock is held and is the lock of ``target``."""
        if not self.held:
            raise Refused(
                f"the RunLock for {self.target} is not held; acquire it first"
            )
        if self.target != target:
            raise Refused(f"the RunLock held is for {self.target}, not for {target}")

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
