"""Starting a run: refuse an existing one, build its database aside, then publish."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import msgspec

from ledger.clock import Clock
from ledger.errors import ConfigError, LedgerError
from ledger.events import RunCreated, encode_body
from ledger.files import fsync_dir
from ledger.paths import RunPaths
from ledger.policy.model import DEFAULT_POLICY
from ledger.run.materialize import MaterializedInputs
from ledger.store.sqlite import NewEvent, SQLiteStore

__all__ = [
    "ManifestLike",
    "PolicyLike",
    "build_database",
    "refuse_existing_run",
    "run_created_body",
]


class ManifestLike(Protocol):
    """What ``Ledger.create`` needs of a manifest (``RunManifest`` provides it)."""

    @property
    def materialized_digest(self) -> str: ...

    @property
    def identity(self) -> Mapping[str, Any] | None: ...

    def model_dump(self, *, mode: str = ...) -> dict[str, Any]: ...

    def write(self, path: Path) -> None: ...


class PolicyLike(Protocol):
    """What ``Ledger.create`` needs of a policy (``RecoveryPolicy`` provides it)."""

    def model_dump(self, *, mode: str = ...) -> dict[str, Any]: ...


def refuse_existing_run(paths: RunPaths) -> None:
    # A lock file alone does not count (CLI-2); the materialized inputs may
    # exist from a create that died before its database (write_materialized
    # accepts them only when byte-identical).
    for path in (paths.db, paths.out, paths.sidecar):
        if path.exists():
            raise ConfigError(
                f"{path} exists: this run was started already; continue it with "
                "`rollout-ledger resume`, or bring an older run in with "
                "`rollout-ledger import`"
            )


def build_database(
    paths: RunPaths, first: RunCreated, clock: Clock, journal_mode: str
) -> None:
    # The database appears under its name only once it holds run_created, so a
    # create killed at any instant leaves either no run or a whole one.
    building = paths.db.with_name(paths.db.name + ".creating")
    for leftover in (building, *_sidecars_of(building)):
        leftover.unlink(missing_ok=True)  # a create that died; we hold the lock
    store = SQLiteStore.create(building, journal_mode=journal_mode)
    try:
        store.append_many(
            [NewEvent("run_created", clock.now(), "create", encode_body(first))]
        )
    finally:
        store.close()  # the last connection checkpoints and removes the WAL
    try:
        os.replace(building, paths.db)
        fsync_dir(paths.ledger_dir)
    except OSError as exc:
        raise LedgerError(f"could not create {paths.db}: {exc.strerror}") from exc


def _sidecars_of(db: Path) -> tuple[Path, ...]:
    return tuple(
        db.with_name(db.name + suffix) for suffix in ("-wal", "-shm", "-journal")
    )


def run_created_body(
    manifest: ManifestLike, policy: PolicyLike | None, inputs: MaterializedInputs
) -> RunCreated:
    fields = manifest.model_dump(mode="json")
    known = set(RunCreated.__struct_fields__)
    body = {key: value for key, value in fields.items() if key in known}
    body["identity"] = None if manifest.identity is None else dict(manifest.identity)
    # REC-61: without a policy of its own, a run records the shared defaults.
    body["policy"] = (policy or DEFAULT_POLICY).model_dump(mode="json")
    body["index"] = inputs.entries
    return msgspec.convert(body, RunCreated)
