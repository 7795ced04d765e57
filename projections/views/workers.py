"""The workers of a run on PostgreSQL, in words (issue 29): who works, on what.

``status``, the report and the viewer show each worker the same way: its
name, host and pid, the rows it recorded, what it holds now and when it was
last heard from, with one sentence saying how it stands. A run kept in files
has no workers (``None``); the words are the same in every place.
"""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ["WorkerSeen", "workers_seen"]


class WorkerSeen(msgspec.Struct, frozen=True, kw_only=True):
    """One worker as a person reads it: the fields of ``ledger.WorkerInfo``
    (``alive``: its session lives; ``holding``: what it claimed and has not
    finished; ``quiet``: seconds since it was last heard from) and ``words``,
    how it stands in a sentence. Its own struct, not a ``WorkerInfo``: that
    module needs psycopg, which a run in files never imports.
    """

    info: dict[str, Any]
    words: str

    def to_dict(self) -> dict[str, Any]:
        return {**self.info, "words": self.words}


_ENDED = {
    "done": "finished",
    "stopped": "stopped",
    "gone": "gone (its session ended; its work was offered again)",
}


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _words(info: Any) -> str:
    if info.state == "working" and info.alive:
        return (
            f"working, holds {_plural(info.holding, 'item')}, last heard from "
            f"{info.quiet:.0f} s ago"
        )
    if info.state == "working":
        return (
            "gone (its session ended; the coordinator offers its work again), "
            f"last heard from at {info.last_heard}"
        )
    return f"{_ENDED.get(info.state, info.state)} at {info.ended}"


def workers_seen(ledger: Any) -> list[WorkerSeen] | None:
    """Each worker of ``ledger``'s run, oldest first; ``None``: a run in files."""
    if ledger.folder is not None:
        return None
    from ledger import WorkBoard  # psycopg: only for a run on PostgreSQL

    return [
        WorkerSeen(info=msgspec.to_builtins(w), words=_words(w))
        for w in WorkBoard.of(ledger).workers()
    ]
