"""``resume`` (REC-50..REC-57): replay, then the gate, then and only then append.

Under the caller's lock (a writer ``Ledger``, whose open already did the EV-12
repair): replay, build the current manifest, call the gate and raise its
refusal; then compute the operator events the options ask for, fold them in
memory to plan, and append them with ``resume_started`` and
``attempts_released`` in one transaction; republish. ``dry_run`` writes nothing.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

import msgspec

from ledger import Ledger, LedgerError
from ledger.events import (
    AnyEvent,
    AttemptsExtended,
    AttemptsReleased,
    Event,
    IdentityOverridden,
    PolicyChanged,
    RerunApproved,
    ResumeStarted,
    StoredEvent,
    kind_of,
)
from ledger.policy.approvals import read_approvals
from ledger.policy.log import apply_changes, policy_changes, policy_from_json
from projections.current_manifest import current_manifest
from projections.decide import Decision, decide_all
from projections.gate import GateVerdict, gate
from projections.plan import Plan, plan_keys
from projections.publish import publish
from projections.replan import build_plan
from projections.replay import apply, replay
from projections.snapshot import save_snapshot
from projections.state import RunState

__all__ = ["Resume", "resume"]

log = logging.getLogger("projections")
Approvals = Path | str | Iterable[tuple[int, int, int]] | None


class Resume(msgspec.Struct):
    """What a resume found and released (REC-56)."""

    plan: Plan
    verdict: GateVerdict
    state: RunState
    decisions: dict[tuple[int, int], Decision]


def _approval_events(
    state: RunState, approvals: Approvals, reason: str | None, warnings: list[str]
) -> list[Event]:
    if approvals is None:
        return []
    if isinstance(approvals, str | Path):
        entries, problems = read_approvals(approvals)
        name = Path(approvals).name
        keyed = [((a.task, a.rollout, a.attempt), f"{name}:{a.line}") for a in entries]
        warnings += [
            f"{name} line {p.line} approves nothing: {p.reason}" for p in problems
        ]
    else:
        keyed = [
            ((int(t), int(r), int(a)), reason or "approved") for t, r, a in approvals
        ]
    events: list[Event] = []
    for (task, rollout, attempt), why in keyed:
        if rollout not in state.rollouts.get(task, {}):
            warnings.append(
                f"approval of task {task}, rollout {rollout} names no rollout"
            )
            continue
        text = why if reason is None else f"{why}: {reason}"
        events.append(
            RerunApproved(task=task, rollout=rollout, attempt=attempt, reason=text)
        )
    return events


def _operator_events(
    state: RunState,
    *,
    extend_attempts: int,
    retry_terminal_timeouts: bool | None,
    approvals: Approvals,
    reason: str | None,
    warnings: list[str],
) -> list[Event]:
    events: list[Event] = []
    if extend_attempts > state.extension:  # REC-11: only a larger total is recorded
        events.append(AttemptsExtended(total=extend_attempts, reason=reason))
    if retry_terminal_timeouts is not None:
        policy = policy_from_json(state.policy)
        changes = policy_changes(
            policy, {"retry_terminal_timeouts": retry_terminal_timeouts}
        )
        if changes:
            events.append(PolicyChanged(changes=changes, reason=reason))
    return events + _approval_events(state, approvals, reason, warnings)


def _cap_warning(state: RunState) -> list[str]:
    # REC-10: the saved cap stands; the environment only gets a warning.
    value = os.environ.get("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS", "").strip()
    if value and value != str(state.max_rollout_attempts):
        return [
            f"NEMO_GYM_MAX_ROLLOUT_ATTEMPTS is {value!r}, but this run was created "
            f"with {state.max_rollout_attempts} attempts; the saved cap stands "
            "(raise it with --extend-attempts)"
        ]
    return []


def _fold_pending(ledger: Ledger, state: RunState, bodies: list[Event]) -> RunState:
    """The state after ``bodies``, folded in memory before anything is appended."""
    policy = policy_from_json(state.policy)
    for body in bodies:
        if kind_of(body) == "policy_changed":
            policy = apply_changes(policy, cast(PolicyChanged, body).changes)
    if policy.to_json_dict() != state.policy:
        state = replay(ledger, policy_override=policy)  # REC-60: reclassify all
    seq, head = ledger.head()
    for offset, body in enumerate(bodies, start=1):
        apply(
            state,
            StoredEvent(
                seq=seq + offset,
                kind=kind_of(body),
                at="",
                actor="",
                body=cast(AnyEvent, body),
                prev_hash=head,
                hash=head,
            ),
            policy,
        )
    return state


def resume(
    ledger: Ledger,
    config: Any,
    global_config: Any,
    *,
    source: Path | str | None = None,
    extend_attempts: int = 0,
    approvals: Approvals = None,
    retry_terminal_timeouts: bool | None = None,
    allow_unsafe: bool = False,
    longest_first: bool = False,
    reason: str | None = None,
    dry_run: bool = False,
) -> Resume:
    """REC-56: replay, gate, then record what the gate decided and release the plan."""
    if not dry_run and not ledger.writable:
        raise LedgerError("resume writes to the run: open it with the held RunLock")
    state = replay(ledger)
    current = current_manifest(ledger, state, config, global_config, source=source)
    verdict = gate(state, current, allow_unsafe=allow_unsafe)
    if verdict.refusal is not None:
        raise verdict.refusal
    warnings = list(verdict.warnings) + _cap_warning(state)
    pending = _operator_events(
        state,
        extend_attempts=extend_attempts,
        retry_terminal_timeouts=retry_terminal_timeouts,
        approvals=approvals,
        reason=reason,
        warnings=warnings,
    )
    if verdict.record is not None:
        record = verdict.record
        if isinstance(record, IdentityOverridden) and reason is not None:
            record = msgspec.structs.replace(record, reason=reason)
        pending.append(record)
    state = _fold_pending(ledger, state, pending)
    decisions = decide_all(state)
    keys = plan_keys(state, decisions, longest_first=longest_first)
    plan = build_plan(ledger, state, decisions, keys)
    verdict = msgspec.structs.replace(verdict, warnings=tuple(warnings))
    for warning in warnings:
        log.warning("%s", warning)
    if not dry_run:
        options = {
            "extend_attempts": extend_attempts,
            "allow_unsafe": allow_unsafe,
            "retry_terminal_timeouts": retry_terminal_timeouts,
            "longest_first": longest_first,
        }
        pending.append(
            ResumeStarted(
                config_digest=current.config_digest, counts=plan.counts, options=options
            )
        )
        pending.append(AttemptsReleased(dispatch=keys.dispatch, rejudge=keys.rejudge))
        state = _commit(ledger, pending)
    return Resume(plan=plan, verdict=verdict, state=state, decisions=decisions)


def _commit(ledger: Ledger, bodies: list[Event]) -> RunState:
    # One transaction: a resume's events land together or not at all (REC-56).
    ledger.append_many(bodies, actor="resume", expected_seq=ledger.head()[0])
    state = replay(ledger)
    publish(ledger, state)
    save_snapshot(ledger, state, policy_from_json(state.policy))
    return state
