"""``OUT`` that names no run: refused as missing, with the nearest run there is.

A mistyped ``OUT`` (``results/rollout.jsonl`` for ``results/rollouts.jsonl``)
is not corrupt saved work: nothing is there at all. The refusal says so and,
when a run with a similar name exists in the same folder (or, when the folder
itself is missing, in a folder beside it), names it.
"""

from __future__ import annotations

import difflib
import itertools
import os
from pathlib import Path

from ledger.errors import ConfigError
from ledger.paths import RunPaths

__all__ = ["require_run_at"]

#: Folder entries looked at for a nearby run: a huge folder is not listed whole.
_LOOKED_AT = 500
_LEDGER_SUFFIX = "_ledger"


def _runs_in(folder: Path) -> list[Path]:
    """The runs in ``folder``: ``<stem>.jsonl`` for each ``<stem>_ledger`` folder."""
    try:
        entries = list(itertools.islice(folder.iterdir(), _LOOKED_AT))
    except OSError:
        return []
    return [
        entry.with_name(entry.name.removesuffix(_LEDGER_SUFFIX) + ".jsonl")
        for entry in entries
        if entry.name.endswith(_LEDGER_SUFFIX)
        and len(entry.name) > len(_LEDGER_SUFFIX)
        and (entry / "ledger.db").is_file()
    ]


def _nearest(paths: RunPaths) -> Path | None:
    folder = paths.folder
    if folder.is_dir():
        runs = _runs_in(folder)
    else:  # the folder is mistyped too: look beside it
        try:
            siblings = list(itertools.islice(folder.parent.iterdir(), _LOOKED_AT))
        except OSError:
            siblings = []
        runs = [run for entry in siblings if entry.is_dir() for run in _runs_in(entry)]
    by_text = {str(run): run for run in runs}
    close = difflib.get_close_matches(str(paths.out), list(by_text), n=1, cutoff=0.6)
    return by_text[close[0]] if close else None


def require_run_at(out: Path | str) -> None:
    """``ConfigError`` (key ``OUT``) when nothing of a run is at ``out``.

    A refusal, not corruption: nothing was saved there to be corrupt.
    """
    paths = RunPaths.of(out)
    if any(p.exists() for p in (paths.out, paths.sidecar, paths.ledger_dir)):
        return  # something is there: what it lacks is said where it is opened
    nearest = _nearest(paths)
    if nearest is not None and not Path(out).is_absolute():
        nearest = Path(os.path.relpath(nearest))  # as OUT was written
    hint = (
        f"; did you mean {nearest}?"
        if nearest is not None
        else "; create a run with `rollout-ledger create` or `rollout-ledger import`"
    )
    raise ConfigError(
        f"no run at {out}: the file and its ledger folder "
        f"{paths.ledger_dir.name}/ do not exist{hint}",
        key="OUT",
        path=paths.out,
    )
