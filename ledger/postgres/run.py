"""Opening and creating a run on PostgreSQL (SC-1, SC-2, SC-4).

``Ledger.create`` and ``Ledger.open`` come here when given a run URL. The
run's materialized inputs are stored with ``run_created`` in the transaction
that creates it; outcome rows are stored with their events, located in their
files under the run's head lock (``PostgresStore.append_built``), so any
number of workers record into one run without a shared filesystem.

Roles (SC-4): with the held ``RunLock`` (the session advisory lock) a ledger
is the coordinator and may append anything; without it, a worker: it may
reserve, record, admit and save judgments, each checked by the database
against what the coordinator released, and otherwise only reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import msgspec

from ledger.clock import Clock
from ledger.errors import ConfigError
from ledger.events import StoredEvent, encode_body
from ledger.files import canonical_json
from ledger.postgres.store import NewRow, PostgresStore
from ledger.postgres.url import RunUrl
from ledger.run.create import ManifestLike, PolicyLike, run_created_body
from ledger.run.lock import RunLock
from ledger.run.materialize import materialize
from ledger.run.recorder import Prepared, Recorder
from ledger.store.run_files import RunNames, StoreFiles
from ledger.store.sqlite import NewEvent

if TYPE_CHECKING:
    from ledger.run.ledger import Ledger

__all__ = ["create_pg_run", "open_pg_run"]


def create_pg_run(
    cls: type[Ledger],
    out: str,
    manifest: ManifestLike,
    rows: Iterable[Mapping[str, Any]],
    lock: RunLock,
    policy: PolicyLike | None,
    clock: Clock | None,
) -> Ledger:
    """Create the run on PostgreSQL: ``run_created`` and its inputs, at once."""
    from ledger.run.ledger import _require_lock

    url = RunUrl.parse(out)
    _require_lock(lock, str(url))
    inputs = materialize(rows)
    if inputs.digest != manifest.materialized_digest:
        raise ConfigError(
            "the manifest's materialized_digest does not match the rows given to "
            "create; build the manifest from the same rows",
            key="materialized_digest",
        )
    clock = clock or Clock()
    first = run_created_body(manifest, policy, inputs)
    names = RunNames(url.run)

    def fill(store: PostgresStore) -> None:
        data = inputs.data
        store.put_file_bytes(
            names.materialized,
            (
                (entry[2], data[entry[2] : entry[2] + entry[3]])
                for entry in inputs.entries
            ),
        )
        store.set_file_ends({names.materialized: [len(data), len(inputs.entries)]})

    event = NewEvent("run_created", clock.now(), "create", encode_body(first))
    PostgresStore.create(url, events=[event], stem=url.run, fill=fill).close()
    led = open_pg_run(cls, str(url), lock, clock, True)
    try:
        _publish_manifest(led, manifest)
    except BaseException:
        led.close()
        raise
    return led


def _publish_manifest(led: Ledger, manifest: ManifestLike) -> None:
    # The manifest and the identity it was taken from (ID-30, ID-32), kept
    # where the run keeps its published files; identity first, as on files.
    identity = manifest.identity
    if identity is not None:
        led.files.publish("identity.json", canonical_json(dict(identity)))
    to_body = getattr(manifest, "to_body", None)
    body = to_body() if to_body is not None else manifest.model_dump(mode="json")
    led.files.publish("manifest.json", canonical_json(body))


def open_pg_run(
    cls: type[Ledger],
    out: str,
    lock: RunLock | None,
    clock: Clock,
    check_head: bool,
) -> Ledger:
    """Open a run on PostgreSQL as coordinator (with the lock) or worker."""
    from ledger.run.ledger import _require_lock

    url = RunUrl.parse(out)
    if lock is not None:
        _require_lock(lock, str(url))
    store = PostgresStore.open(url, writable=True)
    try:
        files = StoreFiles(store, RunNames(store.stem()))
    except BaseException:
        store.close()
        raise
    led = cls(store, None, lock=lock, clock=clock, files=files, where=str(url))
    led._check_head_on_open = check_head or lock is not None
    try:
        led._check_saved_work()
        _start_recorder(led, store, coordinator=lock is not None)
    except BaseException:
        led.close()
        raise
    return led


def _start_recorder(led: Ledger, store: PostgresStore, *, coordinator: bool) -> None:
    index = led.write_index()

    def store_rows(ops: Sequence[Prepared], actor: str) -> list[StoredEvent]:
        return append_located(led, store, ops, actor)

    led._recorder = Recorder(
        None,
        led.files.names,
        index,
        led._append_as,
        led.clock.new_id,
        store_rows=store_rows,
        catch_up=led._sync_index,
    )
    led._coordinator = coordinator


def append_located(
    led: Ledger, store: PostgresStore, ops: Sequence[Prepared], actor: str
) -> list[StoredEvent]:
    """Append ``ops`` with their rows, each located at its file's end (SC-2)."""
    from ledger.run.ledger import _checked, _kind

    led._refuse_for_worker([op.body for op in ops])
    at = led.clock.now()
    bodies: list[Any] = []

    def build(
        ends: dict[str, list[int]],
    ) -> tuple[list[NewEvent], list[NewRow | None]]:
        bodies.clear()
        rows: list[NewRow | None] = []
        for op in ops:
            body: Any = op.body
            if op.file is None:
                rows.append(None)
            else:
                end = ends.setdefault(op.file, [0, 0])
                body = _located(body, end[0], end[1])
                rows.append(NewRow(op.file, end[0], op.data))
                end[0] += len(op.data)
                end[1] += 1
            bodies.append(body)
        events = [NewEvent(_kind(b), at, actor, _checked(b)) for b in bodies]
        return events, rows

    with led._write_lock:
        stored = store.append_built(build)
        led._sync_index()
    for op, body in zip(ops, bodies, strict=True):
        op.body = body
    return [
        StoredEvent(
            seq=row.seq,
            kind=row.kind,
            at=at,
            actor=actor,
            body=body,
            prev_hash=row.prev_hash,
            hash=row.hash,
        )
        for row, body in zip(stored, bodies, strict=True)
    ]


def _located(body: Any, offset: int, line: int) -> Any:
    location = msgspec.structs.replace(body.location, offset=offset)
    changes: dict[str, Any] = {"location": location}
    if getattr(body, "sidecar_line", None) is not None:
        changes["sidecar_line"] = line
    return msgspec.structs.replace(body, **changes)
