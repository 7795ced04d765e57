"""The run's policy as the log records it (REC-60): ``run_created``, then changes."""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from ledger.bounds import MAX_ATTEMPTS, bounded
from ledger.errors import ConfigError, CorruptLedger
from ledger.events import PolicyChange, PolicyChanged, RunCreated
from ledger.policy.model import DEFAULT_POLICY, RecoveryPolicy
from ledger.rows.failure_kinds import (
    FAILURE_KINDS,
    canonical_kind,
    is_namespaced,
    is_registered,
)
from ledger.validation import plain_problems

__all__ = ["apply_changes", "policy_changes", "policy_from_events", "policy_from_json"]


def policy_from_json(
    data: Mapping[str, Any], *, where: str = "the log"
) -> RecoveryPolicy:
    """A policy from its stored JSON; an unreadable one is ``CorruptLedger``."""
    if not data:
        return DEFAULT_POLICY
    try:
        return RecoveryPolicy.model_validate(_within_bounds(dict(data)))
    except ValidationError as exc:
        raise CorruptLedger(
            f"the policy in {where} cannot be read: "
            f"{plain_problems(exc, RecoveryPolicy)}"
        ) from exc


def _within_bounds(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` read from the log, a number over its bound read as the bound.

    Only a log written before the bound was checked holds one; reading it as
    the bound (a million free attempts is no limit either) keeps the run
    readable, where refusing would stop every later command.
    """
    free = data.get("max_free_attempts")
    if isinstance(free, int) and not isinstance(free, bool) and free > MAX_ATTEMPTS:
        data["max_free_attempts"] = MAX_ATTEMPTS
    return data


def _set_dotted(target: dict[str, Any], dotted: str, value: Any) -> None:
    *path, last = dotted.split(".")
    for part in path:
        child = target.get(part)
        if not isinstance(child, dict):
            child = {}
            target[part] = child
        target = child
    if value is None and path:
        target.pop(last, None)  # removing a mapping entry (side_overrides.KIND)
    else:
        target[last] = value


def apply_changes(
    policy: RecoveryPolicy,
    changes: Mapping[str, PolicyChange],
    *,
    from_log: bool = False,
) -> RecoveryPolicy:
    """``policy`` with each dotted key set to its new value (REC-60).

    ``from_log``: the changes were read from the log, so a number over its
    bound is read as the bound (``_within_bounds``) rather than refused.
    """
    data = copy.deepcopy(policy.to_json_dict())
    for dotted in sorted(changes):
        _set_dotted(data, dotted, changes[dotted].new)
    return RecoveryPolicy.model_validate(_within_bounds(data) if from_log else data)


def policy_from_events(bodies: Iterable[object]) -> RecoveryPolicy:
    """The policy in force after ``run_created`` and every ``policy_changed``."""
    policy = DEFAULT_POLICY
    for body in bodies:
        if isinstance(body, RunCreated):
            policy = policy_from_json(body.policy, where="run_created")
        elif isinstance(body, PolicyChanged):
            try:
                policy = apply_changes(policy, body.changes, from_log=True)
            except ValidationError as exc:
                raise CorruptLedger(
                    "a policy_changed event cannot be applied: "
                    f"{plain_problems(exc, RecoveryPolicy)}"
                ) from exc
    return policy


def policy_changes(
    policy: RecoveryPolicy,
    settings: Mapping[str, Any],
    *,
    classes: Collection[str] = (),
) -> dict[str, PolicyChange]:
    """The changes that setting dotted ``settings`` makes, checked (``ConfigError``).

    ``classes`` are the failure classes the run's rows carry: with the
    registered kinds, the names ``side_overrides`` and ``regrade_kinds`` may
    newly name (REC-80).
    """
    for dotted in settings:
        _known_setting(dotted)
    if "max_free_attempts" in settings:
        bounded(
            settings["max_free_attempts"],
            low=1,
            high=MAX_ATTEMPTS,
            what="the policy change is not valid: max_free_attempts takes a number "
            "of attempts",
            key="max_free_attempts",
        )
    changes = {}
    current = policy.to_json_dict()
    for dotted, new in settings.items():
        old: Any = current
        for part in dotted.split("."):
            old = old.get(part) if isinstance(old, dict) else None
        if old != new:
            changes[dotted] = PolicyChange(old=old, new=new)
    try:
        changed = apply_changes(policy, changes)
    except ValidationError as exc:
        raise ConfigError(
            f"the policy change is not valid: {plain_problems(exc, RecoveryPolicy)}",
            key=",".join(settings),
        ) from exc
    _known_names(policy, changed, classes)
    return changes


#: What each setting takes, for the message that refuses an unknown one.
_SETTINGS = (
    "fault_share",
    "side_overrides.<kind>",
    "regrade_kinds",
    "retry_terminal_timeouts",
    "retry_invalid_judge_responses",
    "max_free_attempts",
)


def _known_setting(dotted: str) -> None:
    if dotted.split(".")[0] not in RecoveryPolicy.model_fields:
        raise ConfigError(
            f"the policy has no setting {dotted!r}; the settings are "
            f"{', '.join(_SETTINGS)}",
            key=dotted,
        )


def _known_names(
    before: RecoveryPolicy, after: RecoveryPolicy, classes: Collection[str]
) -> None:
    # REC-80: a name the change adds is a registered kind or a class of the
    # run's rows (an environment's `<server>:<kind>` may be regraded as before);
    # anything else is a typo, refused with what could have been meant.
    seen = {canonical_kind(c) or c for c in classes}
    added = [
        ("side_overrides", name, False)
        for name in after.side_overrides
        if name not in before.side_overrides
    ] + [
        ("regrade_kinds", name, True)
        for name in after.regrade_kinds
        if name not in before.regrade_kinds
    ]
    for setting, name, namespaced in added:
        if is_registered(name) or name in seen or (namespaced and is_namespaced(name)):
            continue
        run_classes = ", ".join(sorted(seen - FAILURE_KINDS)) or "none"
        raise ConfigError(
            f"the policy change is not valid: {setting} names {name!r}, which is "
            "neither a registered failure kind nor a failure class of this run's "
            f"rows.\n  registered failure kinds: {', '.join(sorted(FAILURE_KINDS))}"
            f"\n  other failure classes in this run: {run_classes}",
            key=setting,
        )
