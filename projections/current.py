"""The current manifest a resume compares with the saved one (REC-56).

Built from the run's materialized inputs without parsing them whole (P-4): the
file is hashed as it is read, and each line is decoded only for its
``agent_ref`` (what the identity's server selection needs, ID-3).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import msgspec

from ledger import Clock, RunManifest
from ledger.errors import ConfigError
from ledger.paths import RunPaths
from projections.state import RunState

__all__ = ["current_manifest"]


class _AgentOnly(msgspec.Struct):
    agent_ref: Any = None


_AGENT_DECODER = msgspec.json.Decoder(_AgentOnly)


def _agents_and_digest(path: Path) -> tuple[list[dict[str, Any]], str]:
    digest = hashlib.sha256()
    agents: dict[str, dict[str, Any]] = {}
    with path.open("rb") as handle:
        for line in handle:
            digest.update(line)
            try:
                ref = _AGENT_DECODER.decode(line).agent_ref
            except msgspec.DecodeError:
                continue  # the digest check (REC-55) reports a changed file
            if isinstance(ref, dict):
                agents.setdefault(
                    msgspec.json.encode(ref, order="sorted").decode(), ref
                )
    return [{"agent_ref": ref} for ref in agents.values()], digest.hexdigest()


def _source(paths: RunPaths, state: RunState, source: Path | str | None) -> Path | None:
    if source is not None:
        return Path(source)
    saved = state.manifest.get("source_path")
    if not isinstance(saved, str):
        return None
    candidate = Path(saved) if Path(saved).is_absolute() else paths.folder / saved
    return candidate if candidate.is_file() else None  # REC-55: when it exists


def current_manifest(
    paths: RunPaths,
    state: RunState,
    config: Any,
    global_config: Any,
    *,
    source: Path | str | None = None,
) -> RunManifest:
    """The manifest the current configuration and files give this run."""
    try:
        rows, digest = _agents_and_digest(paths.materialized)
    except OSError as exc:
        raise ConfigError(f"cannot read {paths.materialized}: {exc.strerror}") from exc
    manifest = RunManifest.create(
        _source(paths, state, source),
        rows,
        config,
        global_config,
        max_rollout_attempts=state.max_rollout_attempts,
        run_dir=paths.folder,
        clock=Clock(seed=0),  # id and time are replaced by the saved ones below
    )
    return manifest.model_copy(
        update={
            "run_id": state.run_id,
            "created_at": state.manifest.get("created_at", manifest.created_at),
            "materialized_digest": digest,
        }
    )
