"""What a new run starts with: its ``run_created`` event and its published manifest."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import msgspec

from ledger.errors import ConfigError
from ledger.events import RunCreated
from ledger.files import canonical_json, read_regular
from ledger.paths import RunPaths
from ledger.policy.model import DEFAULT_POLICY
from ledger.store.materialize import MaterializedInputs, index_existing, materialize
from ledger.store.registry import home_for

__all__ = [
    "ManifestLike",
    "PolicyLike",
    "adopted_inputs",
    "check_new_run",
    "manifest_files",
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


def manifest_files(manifest: ManifestLike) -> list[tuple[str, bytes]]:
    """The published files of a new run's manifest, identity first (ID-30, ID-32).

    The identity goes first, so a crash between the two leaves a pair whose
    digests disagree, which ID-33 ignores; an imported run has no identity.
    """
    files = []
    identity = manifest.identity
    if identity is not None:
        files.append(("identity.json", canonical_json(dict(identity))))
    to_body = getattr(manifest, "to_body", None)
    body = to_body() if to_body is not None else manifest.model_dump(mode="json")
    files.append(("manifest.json", canonical_json(body)))
    return files


def adopted_inputs(out: Path | str, inputs: object) -> bytes | None:
    """The materialized inputs a collector left at ``out``, when ``inputs`` is them.

    REC-84: a collector that died before its first row left only
    ``<stem>_materialized_inputs.jsonl``; ``create`` given a file of the same
    bytes adopts that run, its inputs kept byte for byte (every rollout
    pending), instead of refusing it. ``None`` otherwise: ``out`` is a run
    URL (a string), ``inputs`` rows in memory, or no such file or other bytes
    (which ``create`` goes on to refuse).
    """
    if not isinstance(out, Path) or not isinstance(inputs, str | Path):
        return None
    target = RunPaths.of(out).materialized
    try:
        existing = read_regular(target)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read {target}: {exc.strerror}", path=target) from exc
    return existing if read_regular(Path(inputs), given=True) == existing else None


def check_new_run(
    out: Path | str, rows: list[Mapping[str, Any]], *, materialized: bytes | None
) -> MaterializedInputs:
    """What ``Ledger.create`` checks before it writes, writing nothing (CLI-2).

    For ``create --dry-run``: refuses a run that exists, rows that cannot be
    materialized (indices, duplicates) and materialized inputs a collector
    left that hold other rows (REC-84); returns the inputs the run would hold.
    """
    home_for(out).refuse_existing()
    if materialized is not None:
        return index_existing(materialized)
    inputs = materialize(rows)
    target = RunPaths.of(out).materialized if isinstance(out, Path) else None
    if target is not None and target.exists() and target.read_bytes() != inputs.data:
        raise ConfigError(
            f"{target} exists and holds other rows than the inputs given; no run "
            "would be created (pass that file as --inputs to continue that run)",
            path=target,
        )
    return inputs
