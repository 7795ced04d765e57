"""The log an import writes: its first two events, then the spooled outcomes.

``run_created`` is encoded with its index spliced in (the index was encoded
as the inputs were read); the database is built aside in batches of
``BATCH`` events a transaction and renamed into place whole
(``ledger.store.built_aside``), so the import stays atomic however many
transactions it takes. A dry run chains the same bytes in memory instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from pathlib import Path

import msgspec

from ledger.events import Location, decode_body, encode_body
from ledger.files import atomic_replace
from ledger.identity.manifest import RunManifest
from ledger.legacy.inputs import Materialized, chunks
from ledger.legacy.reading import Meter
from ledger.legacy.spool import EventSpool
from ledger.legacy.would_be import WouldBeLog
from ledger.policy.source import creation_policy
from ledger.run.create import run_created_body
from ledger.run.index_keeper import save_ends
from ledger.run.write_index import WriteIndex
from ledger.store.built_aside import built_aside
from ledger.store.materialize import MaterializedInputs
from ledger.store.port import NewEvent

__all__ = ["ACTOR", "BATCH", "run_created_bytes", "would_be", "write_log"]

ACTOR = "import"
#: Events appended a transaction into the database built aside (P-2: batches
#: of a thousand or more run near executemany's speed; P-9: a batch is all an
#: import holds of its outcome events at once).
BATCH = 5000
_EMPTY_INDEX = b'"index":[]}'

Now = Callable[[], str]
Encoded = tuple[str, bytes]


class _Where(msgspec.Struct):
    """An outcome event read for where its row is, nothing else."""

    location: Location
    sidecar_line: int | None = None


_WHERE = msgspec.json.Decoder(_Where)
_LOCATED = frozenset(
    {"result_saved", "failure_saved", "omission_saved", "judge_outcome_saved"}
)


def _advance(ends: WriteIndex, batch: Iterable[Encoded]) -> None:
    """``ends`` past the rows of ``batch``'s outcome events, as the index folds."""
    for kind, body in batch:
        if kind in _LOCATED:
            where = _WHERE.decode(body)
            line = None if kind == "result_saved" else where.sidecar_line
            ends.advance(where.location, line)


def run_created_bytes(
    manifest: RunManifest, materialized: Materialized, out: Path
) -> bytes:
    """``run_created``'s stored bytes, its index spliced in already encoded.

    The index is the body's last field, one entry per input row: encoded as
    the inputs were read, it is never held as a million tuples (P-9). The
    bytes are those ``encode_body`` gives the whole body.
    """
    inputs = MaterializedInputs(b"", manifest.materialized_digest, ())
    # REC-61: the owning launcher's saved classification, else the defaults.
    body = encode_body(run_created_body(manifest, creation_policy(out), inputs))
    if not body.endswith(_EMPTY_INDEX):
        raise RuntimeError("run_created no longer ends with its index")
    head = body[: -len(_EMPTY_INDEX)]
    return b"".join((head, b'"index":[', materialized.index, b"]}"))


def _spooled(spool: EventSpool) -> Iterator[Encoded]:
    for batch in spool.batches(BATCH):
        yield from batch


def would_be(first: Iterable[Encoded], spool: EventSpool, now: Now) -> WouldBeLog:
    """The log a dry run would record, chained as the store would (EV-2)."""
    return WouldBeLog(chain(first, _spooled(spool)), now, ACTOR)


def write_log(
    db: Path,
    first: Iterable[Encoded],
    spool: EventSpool,
    now: Now,
    *,
    copy: tuple[Path, Path] | None = None,
    share: tuple[int, Meter] | None = None,
) -> None:
    """Copy ``--inputs`` (``copy``: from, to), then build ``db`` aside in batches.

    ``share``: the part of the meter's total the appends take, counted out
    batch by batch.
    """
    if copy is not None:
        # Before the database: an import killed in between leaves the same
        # inputs a second import accepts (they must be byte-identical).
        atomic_replace(copy[1], chunks(copy[0]))
    ends = WriteIndex()  # the file ends the log records, kept with it (P-8)
    with built_aside(db, suffix=".importing") as store:
        first = list(first)
        store.append_many([NewEvent(kind, now(), ACTOR, body) for kind, body in first])
        for kind, body in first:
            if kind == "legacy_imported":
                ends.apply(decode_body(body))
        appended = counted = 0
        for batch in spool.batches(BATCH):
            store.append_many(
                [NewEvent(kind, now(), ACTOR, body) for kind, body in batch]
            )
            _advance(ends, batch)
            if share is not None:
                appended += len(batch)
                part = share[0] * appended // spool.count
                share[1].advance(part - counted)
                counted = part
        # The ends a reader folds to find rows past the recorded ones, stored:
        # its first open reads no event of the import (P-8).
        save_ends(store, ends, store.head()[0])
