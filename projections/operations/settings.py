"""Operator actions on the run's settings (CLI-10): extend, budget, policy.

Each builds its event from the replayed state and appends it through
``append_operator_events`` (its head check, replay and republishing, and its
``dry_run`` that folds the event in memory and appends nothing).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ledger import MAX_ATTEMPTS, ConfigError, CorruptLedger, Ledger, bounded
from ledger.events import (
    AttemptsExtended,
    Event,
    FailureBudgetReset,
    PolicyChange,
    PolicyChanged,
)
from ledger.policy.log import policy_changes, policy_from_json
from projections.operations.keep import replay_kept
from projections.operations.operator import (
    OperatorResult,
    append_operator_events,
    failure_classes,
)
from projections.views.checks import verify

__all__ = ["extend_attempts", "reset_budget", "set_policy"]


def extend_attempts(
    ledger: Ledger, total: int, *, reason: str, actor: str, dry_run: bool = False
) -> OperatorResult:
    """REC-11: record ``total`` only when it exceeds the extension in force."""
    total = bounded(
        total,
        low=1,
        high=MAX_ATTEMPTS,
        what="extend-attempts takes a total",
        key="total",
    )
    state = replay_kept(ledger)
    bodies: list[Event] = []
    if total > state.extension:
        bodies.append(AttemptsExtended(total=total, reason=reason))
    return append_operator_events(ledger, state, bodies, actor=actor, dry_run=dry_run)


def reset_budget(
    ledger: Ledger, *, reason: str, actor: str, dry_run: bool = False
) -> OperatorResult:
    """REC-16: only on a ledger that verifies (chain and files); then reset."""
    problems = [f for f in verify(ledger) if f.check != "published"]
    if problems:
        raise CorruptLedger(
            "the run does not verify, so its budget is not reset:\n"
            + "\n".join(f"  {finding}" for finding in problems)
        )
    state = replay_kept(ledger)
    sidecar = ledger.files.names.sidecar
    lines = ledger.write_index().end_of(sidecar).lines  # verified: the file's lines
    body = FailureBudgetReset(
        excluded_lines=lines, before_seq=state.as_of_seq, reason=reason
    )
    return append_operator_events(ledger, state, [body], actor=actor, dry_run=dry_run)


def set_policy(
    ledger: Ledger,
    settings: Mapping[str, Any],
    *,
    reason: str,
    actor: str,
    dry_run: bool = False,
    add: Mapping[str, Sequence[Any]] | None = None,
    remove: Mapping[str, Sequence[Any]] | None = None,
) -> tuple[dict[str, PolicyChange], OperatorResult]:
    """REC-60: record the settings that change the policy in force, if any.

    REC-80: a kind the change names is registered or a failure class of one
    of the run's rows. ``add`` and ``remove`` change a list setting
    (``regrade_kinds``) by its items, the others kept (issue 28: ``--set``
    replaces the whole list, defaults included).
    """
    state = replay_kept(ledger)
    policy = policy_from_json(state.policy)
    wanted = dict(settings) | list_changes(
        policy.to_json_dict(), settings, add or {}, remove or {}
    )
    changes = policy_changes(policy, wanted, classes=failure_classes(state))
    bodies: list[Event] = (
        [PolicyChanged(changes=changes, reason=reason)] if changes else []
    )
    return changes, append_operator_events(
        ledger, state, bodies, actor=actor, dry_run=dry_run
    )


def list_changes(
    current: Mapping[str, Any],
    settings: Mapping[str, Any],
    add: Mapping[str, Sequence[Any]],
    remove: Mapping[str, Sequence[Any]],
) -> dict[str, list[Any]]:
    """The list settings ``add`` and ``remove`` make, from ``current`` policy values.

    An item already there is not added twice; removing an item the list does
    not hold, or naming a setting that is not a list, is refused
    (``ConfigError``, naming the setting and what it holds).
    """
    made: dict[str, list[Any]] = {}
    for key in sorted(set(add) | set(remove)):
        if key in settings:
            raise ConfigError(
                f"{key} is both set and added to or removed from; give one", key=key
            )
        held = current.get(key)
        if not isinstance(held, list | tuple):
            lists = ", ".join(k for k, v in current.items() if isinstance(v, list))
            raise ConfigError(
                f"{key} is not a list setting, so nothing is added to or removed "
                f"from it (the list settings: {lists}); set it with --set {key}=VALUE",
                key=key,
            )
        items = list(held)
        for item in remove.get(key, ()):
            if item not in items:
                raise ConfigError(
                    f"{key} does not hold {item!s}, so it cannot be removed "
                    f"(it holds {', '.join(map(str, items)) or 'nothing'})",
                    key=key,
                )
            items.remove(item)
        items += [item for item in add.get(key, ()) if item not in items]
        made[key] = items
    return made
