"""The files of one run, derived from its output path ``OUT`` (architecture.md)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ledger.errors import ConfigError

__all__ = ["RunPaths", "check_out_path"]

#: The longest file name and path most filesystems take, in bytes.
NAME_MAX = 255
PATH_MAX = 4095
#: What the longest companion file adds to ``OUT``'s stem.
_LONGEST_SUFFIX = len("_materialized_inputs.jsonl")


def _shown(text: str) -> str:
    return text if len(text) <= 80 else f"{text[:40]}...{text[-20:]}"


def check_out_path(out: Path | str, what: str = "OUT") -> Path:
    """``OUT`` as an absolute path, or ``ConfigError`` (key ``OUT``) when too long.

    Every companion file derives its name from ``OUT``'s stem, so the stem must
    leave room for the longest of them within a file name's limit.
    """
    path = Path(out).absolute()
    names = [os.fsencode(part) for part in path.parts]
    longest = max((len(name) for name in names), default=0)
    stem = len(os.fsencode(path.stem)) + _LONGEST_SUFFIX
    total = len(os.fsencode(str(path))) + _LONGEST_SUFFIX
    if max(longest, stem) > NAME_MAX or total > PATH_MAX:
        raise ConfigError(
            f"{what} {_shown(str(out))} is too long: file names are at most "
            f"{NAME_MAX} bytes and paths {PATH_MAX}, and the run's companion files "
            f"add {_LONGEST_SUFFIX} bytes to its name; choose a shorter one",
            key=what,
        )
    return path


@dataclass(frozen=True)
class RunPaths:
    """The files of the run named by ``out`` (the ledger's in ``<stem>_ledger/``)."""

    out: Path

    @classmethod
    def of(cls, out: Path | str) -> RunPaths:
        """The paths of the run whose output is ``out`` (absolute, not resolved)."""
        return cls(Path(out).absolute())

    @property
    def folder(self) -> Path:
        """The run folder: the one ``OUT`` lives in."""
        return self.out.parent

    @property
    def stem(self) -> str:
        """``OUT``'s stem, from which NeMo Gym derives its companion files."""
        return self.out.stem

    @property
    def sidecar(self) -> Path:
        """Failure rows and omission stand-ins."""
        return self.folder / f"{self.stem}_failures.jsonl"

    @property
    def materialized(self) -> Path:
        """The fully expanded input rows, one per (task, rollout)."""
        return self.folder / f"{self.stem}_materialized_inputs.jsonl"

    @property
    def ledger_dir(self) -> Path:
        """The folder that holds everything the ledger owns."""
        return self.folder / f"{self.stem}_ledger"

    @property
    def db(self) -> Path:
        """The SQLite event log: the source of truth."""
        return self.ledger_dir / "ledger.db"

    @property
    def lock(self) -> Path:
        """The run lock file (EV-40); never unlinked."""
        return self.ledger_dir / "run.lock"

    @property
    def manifest(self) -> Path:
        """The published manifest (ID-30)."""
        return self.ledger_dir / "manifest.json"

    @property
    def identity(self) -> Path:
        """The published credential-safe identity (ID-32)."""
        return self.ledger_dir / "identity.json"

    @property
    def coverage(self) -> Path:
        """The published coverage report (REC-41)."""
        return self.ledger_dir / "coverage.json"

    @property
    def drift_log(self) -> Path:
        """One line per resume that proceeded across operational drift (REC-53)."""
        return self.ledger_dir / "resume_drift.log"

    @property
    def budget_log(self) -> Path:
        """One line per failure-budget reset (REC-17)."""
        return self.ledger_dir / "failure_budget.log"

    def relative(self, path: Path) -> str:
        """``path`` relative to the run folder, as stored in event locations."""
        return path.relative_to(self.folder).as_posix()

    def collector_files(self) -> tuple[Path, Path, Path]:
        """The files the collector side owns: results, sidecar, materialized inputs."""
        return (self.out, self.sidecar, self.materialized)
