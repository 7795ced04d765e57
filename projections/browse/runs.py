"""The runs under some folders, one card each: what ``view``'s first page lists.

A run in a folder is a ``<stem>_ledger/`` folder holding ``ledger.db`` beside
its ``OUT`` (``<stem>.jsonl``); a run on PostgreSQL is named by its URL. A
card says what was evaluated, how far it is, its reward figures, where it
stands in ``check``'s words and exit code, its last event time and whether a
writer holds it now. Reading a card opens nothing for writing and takes no
lock: whether a writer holds the run is read from the kernel's lock table.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import msgspec

from ledger import Ledger, RecoveryIncomplete
from projections.browse.header import Evaluated, evaluated
from projections.decisions.completion import check_complete
from projections.decisions.rules import decide_all
from projections.figures.metrics import metrics_of
from projections.fold.left import load_open
from projections.fold.reading import replay
from projections.fold.state import RunState

__all__ = ["RunCard", "find_runs", "run_card", "writer_of"]

#: Folders never searched for runs (they hold no run, or too many files).
_SKIP = frozenset({".git", ".venv", "node_modules", "__pycache__", ".mypy_cache"})


class RunCard(msgspec.Struct, frozen=True, kw_only=True):
    """One run as the runs page lists it."""

    out: str
    header: Evaluated
    expected: int
    complete: int
    mean: float | None
    standard_error: float | None
    n: int
    check_exit: int
    check_words: str
    head_seq: int
    writer: str | None

    def to_dict(self) -> dict[str, object]:
        """Plain data for the API (``docs/json.md``)."""
        found: dict[str, object] = msgspec.to_builtins(self)
        return found


def find_runs(places: Iterable[Path | str]) -> list[Path | str]:
    """Every run under ``places`` (folders, ``OUT`` files or run URLs), sorted.

    A folder is searched to any depth for ``*_ledger/ledger.db``; a URL is
    taken as it is.
    """
    found: set[Path] = set()
    urls: list[str] = []
    for place in places:
        if isinstance(place, str) and "://" in place:
            urls.append(place)
            continue
        path = Path(place)
        if path.is_dir():
            found.update(_runs_in(path))
        elif path.suffix == ".jsonl":
            found.add(path.resolve())
    return [*sorted(found), *urls]


def _runs_in(folder: Path) -> Iterator[Path]:
    for root, dirs, files in os.walk(folder):
        here = Path(root)
        if here.name.endswith("_ledger") and "ledger.db" in files:
            stem = here.name.removesuffix("_ledger")
            yield (here.parent / f"{stem}.jsonl").resolve()
            dirs.clear()
            continue
        dirs[:] = sorted(d for d in dirs if d not in _SKIP)


def writer_of(ledger: Ledger) -> str | None:
    """Who holds the run's lock now, in a few words; ``None`` when nobody does.

    A run in a folder: the kernel's table of ``flock`` locks (``/proc/locks``)
    names a process holding its lock file, whose first line says who it is.
    Nothing is locked or written to find out.
    """
    if ledger.folder is None:
        return ledger.lock_holder()
    lock = ledger.paths.ledger_dir / "run.lock"
    try:
        info = lock.stat()
        table = Path("/proc/locks").read_text()
    except OSError:
        return None
    wanted = f":{info.st_ino} "
    dev = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}{wanted}"
    if not any(dev in line + " " for line in table.splitlines()):
        return None
    try:
        line = lock.read_text(encoding="utf-8", errors="replace").splitlines()[0]
    except (OSError, IndexError):
        return "a writer"
    return line.strip() or "a writer"


def run_card(ledger: Ledger, out: Path | str, state: RunState | None = None) -> RunCard:
    """The card of the run ``ledger`` reads (``out`` as the runs page names it).

    ``check``'s verdict is made from ``state`` (one replay): its words are
    ``check``'s, without the note on rows waiting to be adopted. Without
    ``state``, the snapshot of what is left at the head when it gives one
    (P-8, issue 30: the runs page of a million rollouts reads no more than
    ``status``; its settled rollouts were summed when they settled), else a
    replay.
    """
    if state is None:
        opened = load_open(ledger)
        state = opened.state if opened is not None else None
    state = replay(ledger) if state is None else state
    decisions = decide_all(state)
    figures = metrics_of(state, decisions)
    try:
        check_complete(state, decisions)
        exit_code, words = 0, f"all {figures.expected} rollouts are complete or omitted"
    except RecoveryIncomplete as exc:
        exit_code, words = exc.exit_code, str(exc)
    seq, _ = ledger.head()
    return RunCard(
        out=str(out),
        header=evaluated(ledger, state),
        expected=figures.expected,
        complete=figures.complete,
        mean=figures.mean,
        standard_error=figures.standard_error,
        n=figures.n,
        check_exit=exit_code,
        check_words=words,
        head_seq=seq,
        writer=writer_of(ledger),
    )
