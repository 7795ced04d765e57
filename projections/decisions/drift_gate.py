"""``gate``: may this run resume under the current configuration? (REC-52..REC-57)

Pure: it compares the state's saved manifest and identity with the current
manifest, and returns a verdict: the refusal to raise (or ``None``), the drift,
whether the current identity is adopted or an override recorded, the warnings,
and the identity event ``resume`` appends when it proceeds.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ledger import IdentityMismatch, RunManifest, credential_safe
from ledger.events import DriftAccepted, Event, IdentityAdopted, IdentityOverridden
from ledger.identity.digest import identity_digest
from ledger.identity.drift import Drift, drift
from ledger.identity.forms import added_at_default
from ledger.identity.key_words import split_key
from ledger.identity.normalize import get_path, has_path
from projections.fold.state import RunState

__all__ = ["GateVerdict", "gate", "saved_identity"]

_UNSAFE_HINT = (
    "`--allow-unsafe` would proceed and record identity_overridden with these keys, "
    "making the current identity and digests the run's for good"
)


class GateVerdict(msgspec.Struct, frozen=True):
    """The gate's answer (REC-56): ``.refusal`` is ``None`` when resume may proceed."""

    refusal: IdentityMismatch | None = None
    drift: Drift | None = None
    adopted: bool = False
    overridden: bool = False
    warnings: tuple[str, ...] = ()
    record: Event | None = None  # the identity event resume appends (REC-56)


def saved_identity(state: RunState) -> dict[str, Any] | None:
    """The run's saved identity when it counts (ID-33), credential-safe (ID-13).

    A log written before values were redacted may hold a credential its
    configuration resolved (an ``${oc.env:...}`` URL password); redacted here,
    it is never shown, and rotating it is no drift (ID-15): the comparison
    sees the same ``<redacted>`` on both sides.
    """
    identity = state.identity
    if identity is None:
        return None
    try:
        counts = identity_digest(identity) == state.manifest.get("config_digest")
    except Exception:  # an identity that cannot be digested does not count
        counts = False
    if not counts:
        return None
    safe: dict[str, Any] = credential_safe(identity, resolved=True)
    return safe


def _shown(identity: dict[str, Any] | None, key: str) -> str:
    if identity is None or not has_path(identity, key):
        return "(absent)"
    return msgspec.json.encode(get_path(identity, key)).decode()


def _semantic_refusal(
    keys: tuple[str, ...],
    operational: tuple[str, ...],
    saved: dict[str, Any] | None,
    current: dict[str, Any] | None,
) -> IdentityMismatch:
    lines = [
        f"  {key}: saved {_shown(saved, key)}, now {_shown(current, key)}"
        for key in keys
    ]
    extra = (
        f"\noperational keys that also differ: {', '.join(operational)}"
        if operational
        else ""
    )
    return IdentityMismatch(
        "the current configuration differs from the run's in semantic keys; results "
        "of different configurations must not be mixed:\n"
        + "\n".join(lines)
        + extra
        + f"\n{_UNSAFE_HINT}",
        keys=keys,
    )


def _inputs_refusal(state: RunState, current: RunManifest) -> IdentityMismatch | None:
    # REC-55: the inputs the run was materialized from must be the same bytes.
    saved = state.manifest
    keys = []
    if current.materialized_digest != saved.get("materialized_digest"):
        keys.append("materialized_digest")
    saved_source = saved.get("source_digest", "unverified")
    if saved_source != "unverified" and current.source_digest not in (
        "unverified",
        saved_source,
    ):
        keys.append("source_digest")
    if not keys:
        return None
    return IdentityMismatch(
        "the run's inputs changed since it was created ("
        + ", ".join(
            f"{k}: saved {saved.get(k)}, now {getattr(current, k)}" for k in keys
        )
        + f"); {_UNSAFE_HINT}",
        keys=tuple(keys),
    )


_EARLIER_SELECTION = (
    "the run's identity was taken before environment servers counted as part of a "
    "run; the configuration is the same, so its current identity is adopted"
)


def _selection_only(
    semantic: tuple[str, ...], current: RunManifest, saved_digest: str
) -> bool:
    """Whether only whole servers differ, and the saved identity is the current
    configuration's as taken before environment servers counted (ID-41)."""
    servers = all(len(split_key(key)) == 2 for key in semantic) and all(
        key.startswith("servers.") for key in semantic
    )
    return servers and current.matches_config(saved_digest)


class _Config(msgspec.Struct, frozen=True):
    refusal: IdentityMismatch | None = None
    drift: Drift | None = None
    adopted: bool = False
    warnings: tuple[str, ...] = ()


def _compare_config(state: RunState, current: RunManifest) -> _Config:
    """REC-53, in its order: same digest; a saved identity; matches_config."""
    saved_digest = str(state.manifest.get("config_digest"))
    if current.config_digest == saved_digest:
        return _Config()
    saved = saved_identity(state)
    now = current.identity
    if saved is not None and now is not None:
        found = drift(saved, now) or Drift()
        ignored = added_at_default(saved, now)
        semantic = tuple(k for k in found.semantic if k not in ignored)
        operational = tuple(k for k in found.operational if k not in ignored)
        result = Drift(semantic=semantic, operational=operational)
        if semantic and _selection_only(semantic, current, saved_digest):
            return _Config(drift=result, adopted=True, warnings=(_EARLIER_SELECTION,))
        if semantic:
            return _Config(_semantic_refusal(semantic, operational, saved, now), result)
        warning = f"operational drift accepted: {', '.join(operational) or '(none)'}"
        return _Config(drift=result, warnings=(warning,))
    if current.matches_config(saved_digest):  # REC-57: adopt the current identity
        return _Config(adopted=True)
    return _Config(
        IdentityMismatch(
            f"the run's config_digest {saved_digest} was not taken from this "
            "configuration, and the run keeps no identity to compare key by key "
            "(an imported run, or one whose identity does not count); the first "
            f"resume of an imported NeMo Gym run needs --allow-unsafe. {_UNSAFE_HINT}",
            keys=("config_digest",),
        )
    )


def gate(
    state: RunState, current_manifest: RunManifest, *, allow_unsafe: bool = False
) -> GateVerdict:
    """REC-53..REC-57 for ``state`` against ``current_manifest``; pure."""
    config = _compare_config(state, current_manifest)
    inputs = _inputs_refusal(state, current_manifest)
    warnings = list(config.warnings)
    if state.manifest.get("identity_overridden"):
        warnings.append("previously overridden run identity")
    refusal = config.refusal or inputs
    saved_digest = str(state.manifest.get("config_digest"))
    identity = current_manifest.identity or {}
    if refusal is not None and not allow_unsafe:
        return GateVerdict(
            refusal=refusal, drift=config.drift, warnings=tuple(warnings)
        )
    if refusal is not None:  # REC-54: the explicit escape hatch, recorded for good
        keys = tuple(refusal.keys)
        warnings.append(f"--allow-unsafe proceeded across: {', '.join(keys)}")
        record: Event | None = IdentityOverridden(
            from_digest=saved_digest,
            to_digest=current_manifest.config_digest,
            semantic_keys=keys,
            identity=identity,
            materialized_digest=current_manifest.materialized_digest,
            source_digest=current_manifest.source_digest,
        )
        return GateVerdict(
            drift=config.drift, overridden=True, warnings=tuple(warnings), record=record
        )
    record = None
    if config.adopted:
        record = IdentityAdopted(
            from_digest=saved_digest,
            to_digest=current_manifest.config_digest,
            identity=identity,
        )
    elif config.drift is not None:
        record = DriftAccepted(
            from_digest=saved_digest,
            to_digest=current_manifest.config_digest,
            operational_keys=config.drift.operational,
            identity=identity,
        )
    return GateVerdict(
        drift=config.drift,
        adopted=config.adopted,
        warnings=tuple(warnings),
        record=record,
    )
