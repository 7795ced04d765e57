"""``config_diff``: the gate's configuration comparison, as values (CLI-11, REC-53).

Writes nothing; a reader ledger will do. Values come from credential-safe
identities, so a credential reads ``<redacted>`` (ID-13).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from ledger import Ledger
from ledger.identity.normalize import get_path, has_path
from projections.decisions.current_manifest import current_manifest
from projections.decisions.drift_gate import GateVerdict, gate, saved_identity
from projections.fold.reading import replay

__all__ = ["ConfigDiff", "KeyDiff", "config_diff"]


class KeyDiff(msgspec.Struct, frozen=True):
    """One differing dotted key, its class and both values as JSON text."""

    key: str
    key_class: str  # "semantic" or "operational"
    saved: str
    current: str


class ConfigDiff(msgspec.Struct, frozen=True):
    """The saved and current digests, the differing keys, and the gate's verdict."""

    saved_digest: str
    current_digest: str
    keys: tuple[KeyDiff, ...]
    verdict: GateVerdict
    comparable: bool  # a saved identity counts, so keys could be compared


def _shown(identity: dict[str, Any] | None, key: str) -> str:
    if identity is None or not has_path(identity, key):
        return "(absent)"
    return msgspec.json.encode(get_path(identity, key)).decode()


def config_diff(
    ledger: Ledger, config: Any, global_config: Any, *, source: Path | str | None = None
) -> ConfigDiff:
    """What a resume under ``config`` would find (REC-53), without writing."""
    state = replay(ledger)
    current = current_manifest(ledger, state, config, global_config, source=source)
    verdict = gate(state, current)
    drift = verdict.drift
    saved = saved_identity(state)
    keys: list[KeyDiff] = []
    if drift is not None:
        for key_class, names in (
            ("semantic", drift.semantic),
            ("operational", drift.operational),
        ):
            keys += [
                KeyDiff(
                    name,
                    key_class,
                    _shown(saved, name),
                    _shown(current.identity, name),
                )
                for name in names
            ]
    return ConfigDiff(
        saved_digest=str(state.manifest.get("config_digest")),
        current_digest=current.config_digest,
        keys=tuple(keys),
        verdict=verdict,
        comparable=drift is not None,
    )
