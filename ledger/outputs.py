"""Files a command writes where the user says: never one of the run's own.

``results -o``, ``export -o``, ``export --files DIR`` and ``resume --plan-out``
write where they are told. Each output is checked here before anything is
written: after resolving symlinks and ``..``, it must not be a file of the run
(``OUT``, the sidecar, the materialized inputs), anything inside the ledger
folder ``<stem>_ledger/``, or the same file as another output of the command;
and the folder it goes into must exist. A refusal is a ``ConfigError`` (exit 3)
naming the option, the path and why.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from ledger.errors import ConfigError
from ledger.paths import RunPaths

__all__ = ["check_outputs"]

Output = Path | str | None


def _resolved(option: str, path: Path) -> Path:
    try:
        return path.resolve(strict=False)
    except (OSError, RuntimeError) as exc:  # a symlink loop, a path too long
        raise ConfigError(
            f"{option} {path} cannot be resolved ({exc}); name another path",
            key=option,
            path=path,
        ) from exc


def _same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` are one file (a hard link too), when both exist."""
    try:
        return a == b or os.path.samefile(a, b)
    except (OSError, ValueError):
        return False


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


class _Run:
    """The run's own files and ledger folder, resolved once."""

    def __init__(self, out: Path) -> None:
        paths = RunPaths.of(out)
        self.folder = _resolved("OUT", paths.folder)
        self.files = {
            "results file (OUT)": _resolved("OUT", paths.out),
            "failures sidecar": _resolved("OUT", paths.sidecar),
            "materialized inputs": _resolved("OUT", paths.materialized),
        }
        self.ledger_dir = _resolved("OUT", paths.ledger_dir)

    def refuse_file(self, option: str, given: Path, path: Path) -> None:
        for what, own in self.files.items():
            if _same_file(path, own):
                raise ConfigError(
                    f"{option} {given} is the run's {what} {own}: writing it would "
                    "destroy the run's saved work; name another file",
                    key=option,
                    path=given,
                )
        self.refuse_ledger_folder(option, given, path)

    def refuse_ledger_folder(self, option: str, given: Path, path: Path) -> None:
        if _inside(path, self.ledger_dir):
            raise ConfigError(
                f"{option} {given} is inside the run's ledger folder "
                f"{self.ledger_dir}, which only the ledger writes; name a path "
                "outside it",
                key=option,
                path=given,
            )


def _file_target(option: str, given: Path) -> Path:
    path = _resolved(option, given)
    try:
        problem = _unusable(given, path)
    except OSError as exc:  # a name too long, a folder not searchable
        problem = f"cannot be used ({exc.strerror}); name another file"
    if problem is not None:
        raise ConfigError(f"{option} {given}: {problem}", key=option, path=given)
    return path


def _unusable(given: Path, path: Path) -> str | None:
    """Why a file cannot be written at ``path`` (``given`` resolved), or ``None``."""
    if path.is_dir():
        return "is a folder; name a file"
    if path.parent.exists() and not path.parent.is_dir():
        return f"{given.parent} is not a folder; name a file in one"
    if not path.parent.is_dir():
        return (
            f"the folder {given.parent} does not exist; create it first "
            f"(mkdir -p {given.parent})"
        )
    return None


def check_outputs(
    out: Path | str | None,
    files: Mapping[str, Output],
    *,
    folders: Mapping[str, Output] | None = None,
) -> None:
    """Refuse (``ConfigError``) outputs that would overwrite the run or each other.

    ``out`` is the run's ``OUT`` (a run URL or ``None``: a run without files
    here, so only the outputs are compared); ``files`` and ``folders`` map each
    option (``-o``, ``--plan-out``, ``--files``) to the path given, or ``None``.
    Nothing is written or created.
    """
    run = _Run(out) if isinstance(out, Path) else None
    seen: dict[Path, str] = {}
    for option, given in files.items():
        if given is None:
            continue
        path = _file_target(option, Path(given))
        if run is not None:
            run.refuse_file(option, Path(given), path)
        for other_path, other in seen.items():
            if _same_file(path, other_path):
                raise ConfigError(
                    f"{other} and {option} both name {given}; give each its own file",
                    key=option,
                    path=given,
                )
        seen[path] = option
    for option, given in (folders or {}).items():
        if given is not None and run is not None:
            path = _resolved(option, Path(given))
            run.refuse_ledger_folder(option, Path(given), path)
            if path == run.folder:
                raise ConfigError(
                    f"{option} {given} is the run's own folder; the copy would "
                    "overwrite the run: name another folder",
                    key=option,
                    path=given,
                )
