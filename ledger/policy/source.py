"""Where a new run's policy comes from (REC-61).

``--policy FILE`` (a JSON object of ``RecoveryPolicy`` fields), else the owning
launcher's ``recovery_policy.json`` in the run's folder when it lists the
output's stem (``{"owner": [stems...], "policy": {...}}``), else the shared
defaults. A malformed file is an error, never silently replaced by defaults.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
from pydantic import ValidationError

from ledger.errors import ConfigError
from ledger.files import json_problem, read_regular
from ledger.paths import RunPaths
from ledger.policy.model import DEFAULT_POLICY, RecoveryPolicy
from ledger.store.registry import home_for
from ledger.validation import plain_problems

__all__ = ["LAUNCHER_POLICY_FILE", "creation_policy", "read_policy_file"]

LAUNCHER_POLICY_FILE = "recovery_policy.json"
#: Policy files are read as data with a size limit (quality.md, "Security").
MAX_POLICY_BYTES = 1024 * 1024


def _read_json(path: Path) -> Any:
    try:
        size = path.stat().st_size
        if size > MAX_POLICY_BYTES:
            raise ConfigError(
                f"{path} is {size} bytes, over the policy file limit", path=path
            )
        return msgspec.json.decode(read_regular(path, given=True))
    except OSError as exc:
        raise ConfigError(
            f"cannot read the policy file {path}: {exc.strerror}", path=path
        ) from exc
    except (msgspec.DecodeError, RecursionError) as exc:
        raise ConfigError(
            f"the policy file {path} is not JSON: {json_problem(exc)}", path=path
        ) from exc


def _validated(data: Any, path: Path) -> RecoveryPolicy:
    if not isinstance(data, dict):
        raise ConfigError(f"the policy in {path} is not a JSON object", path=path)
    try:
        return RecoveryPolicy.model_validate(data)
    except ValidationError as exc:
        problems = plain_problems(exc, RecoveryPolicy)
        first = ".".join(map(str, exc.errors()[0]["loc"])) or None
        raise ConfigError(
            f"the policy in {path} is not valid: {problems}", key=first, path=path
        ) from exc


def read_policy_file(path: Path | str) -> RecoveryPolicy:
    """A ``--policy FILE``: a JSON object of ``RecoveryPolicy`` fields."""
    target = Path(path)
    return _validated(_read_json(target), target)


def _launcher_policy(paths: RunPaths) -> RecoveryPolicy | None:
    path = paths.folder / LAUNCHER_POLICY_FILE
    if not path.is_file():
        return None
    data = _read_json(path)
    owner = data.get("owner") if isinstance(data, dict) else None
    if not isinstance(owner, list) or not all(isinstance(s, str) for s in owner):
        raise ConfigError(f"{path} has no list of owned stems under 'owner'", path=path)
    if paths.stem not in owner:
        return None  # REC-61: only for a stem the launcher lists
    return _validated(data.get("policy"), path)


def creation_policy(
    out: Path | str, *, policy_file: Path | str | None = None
) -> RecoveryPolicy:
    """The policy a run created at ``out`` starts with (REC-61)."""
    if policy_file is not None:
        return read_policy_file(policy_file)
    if home_for(out).folder is None:
        return DEFAULT_POLICY  # a run kept in a store has no launcher folder (SC-1)
    return _launcher_policy(RunPaths.of(out)) or DEFAULT_POLICY
