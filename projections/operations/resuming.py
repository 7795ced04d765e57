"""``resume`` (REC-50..REC-57): replay, then the gate, then and only then append.

Under the caller's lock (a writer ``Ledger``, whose open already did the EV-12
repair): replay, build the current manifest, call the gate and raise its
refusal; then compute the operator events the options ask for, fold them in
memory to plan, and append them with ``resume_started`` and
``attempts_released`` in one transaction; republish. ``dry_run`` writes nothing.

A resume replays once and decides once: the policy a ``--retry-terminal-
timeouts`` change leaves in force is read before the replay, so the one replay
classifies under it (REC-60); the events appended are folded into the replayed
state, and ``publish`` is handed the plan's decisions.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec

from ledger import (
    MAX_ATTEMPTS,
    Aside,
    IdentityMismatch,
    Ledger,
    LedgerError,
    Refused,
    Waiting,
    adopt_advice,
    aside_pays,
    attempt_key,
    bounded,
    open_run,
    plural,
)
from ledger.collector_files.inputs_seen import InputsSeen, still_seen
from ledger.events import (
    AttemptsExtended,
    AttemptsReleased,
    Event,
    IdentityOverridden,
    PolicyChanged,
    RerunApproved,
    ResumeStarted,
)
from ledger.policy.approvals import read_approvals
from ledger.policy.log import apply_changes, policy_changes, policy_from_json
from ledger.policy.model import RecoveryPolicy
from projections.decisions.completion import coverage
from projections.decisions.current_manifest import (
    current_manifest_seen,
    inputs_seen_at,
)
from projections.decisions.drift_gate import GateVerdict, gate
from projections.decisions.every_rollout import RunDecisions
from projections.decisions.plan import Plan, plan_keys
from projections.decisions.rules import Decision, decide_all
from projections.fold.apply import fold_into, pending_events
from projections.fold.left import load_open, tail_is_open
from projections.fold.reading import head_policy, replay
from projections.fold.snapshot import copy_state
from projections.fold.state import RunState
from projections.operations.keep import replay_kept, save_open, save_snapshot
from projections.operations.publishing import publish
from projections.operations.release import build_plan

__all__ = ["Resume", "resume", "waiting_at"]

log = logging.getLogger("projections")
Approvals = Path | str | Iterable[tuple[int, int, int]] | None


class Resume(msgspec.Struct):
    """What a resume found and released (REC-56).

    From the snapshot of what is left (P-8), ``state`` holds the rollouts
    still to decide and ``state.settled`` sums the others; ``plan.counts``
    counts them all, and ``decisions`` answers for every rollout of the run
    (api.md): the open ones as the plan decided them, a settled one by a
    replay made the first time one is asked about (``RunDecisions``; its
    ``open`` is what the plan was made from).
    """

    plan: Plan
    verdict: GateVerdict
    state: RunState
    decisions: RunDecisions


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
        keyed = [(attempt_key(key), reason or "approved") for key in approvals]
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
    policy_change: PolicyChanged | None,
    approvals: Approvals,
    reason: str | None,
    warnings: list[str],
) -> list[Event]:
    events: list[Event] = []
    if extend_attempts > state.extension:  # REC-11: only a larger total is recorded
        events.append(AttemptsExtended(total=extend_attempts, reason=reason))
    if policy_change is not None:
        events.append(policy_change)
    return events + _approval_events(state, approvals, reason, warnings)


def _policy_change(
    ledger: Ledger, retry_terminal_timeouts: bool | None, reason: str | None
) -> tuple[PolicyChanged | None, RecoveryPolicy | None]:
    """The ``policy_changed`` the option asks for, and the policy it leaves in force.

    Read before the replay, so that the one replay classifies every outcome
    under the policy in force once the resume's events are appended (REC-60).
    """
    if retry_terminal_timeouts is None:
        return None, None
    policy = head_policy(ledger)
    changes = policy_changes(
        policy, {"retry_terminal_timeouts": retry_terminal_timeouts}
    )
    if not changes:
        return None, None
    change = PolicyChanged(changes=changes, reason=reason)
    return change, apply_changes(policy, changes)


def _cap_warning(state: RunState) -> list[str]:
    # REC-10: the saved cap stands; the environment only gets a warning.
    value = os.environ.get("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS", "").strip()
    if value and value != str(state.max_rollout_attempts):
        return [
            f"NEMO_GYM_MAX_ROLLOUT_ATTEMPTS is {value!r}, but this run was created "
            f"with {plural(state.max_rollout_attempts, 'attempt')}; the saved cap "
            "stands "
            "(raise it with --extend-attempts)"
        ]
    return []


def _fold_pending(
    ledger: Ledger, state: RunState, policy: RecoveryPolicy, bodies: list[Event]
) -> RunState:
    """``state`` after ``bodies``, folded in memory before anything is appended.

    Their seqs follow the head; their time and hashes are not known yet.
    """
    return fold_into(state, pending_events(ledger.head(), bodies), policy)


def waiting_at(out: str) -> tuple[Waiting, ...] | None:
    """The rows waiting at the run ``out``, read here (a second process);
    ``None`` when they cannot be told here (the caller reads them itself)."""
    try:
        with open_run(out) as ledger:
            return ledger.waiting()
    except LedgerError:
        return None


def _waiting_aside(ledger: Ledger) -> Aside[tuple[Waiting, ...]] | None:
    """A dry run's waiting rows read beside its replay (issue 30): with no
    stored file ends, telling them folds the whole log once more."""
    if ledger.folder is None or not aside_pays(ledger.head()[0]):
        return None
    return Aside(waiting_at, str(ledger.paths.out))


def _refuse_waiting(
    ledger: Ledger, aside: Aside[tuple[Waiting, ...]] | None = None
) -> None:
    """REC-86: a plan that ignored rows waiting to be adopted would dispatch again."""
    waiting = ledger.waiting() if aside is None else aside.result(ledger.waiting)
    if waiting:
        raise IdentityMismatch(
            f"{adopt_advice(str(ledger.target), waiting)}, then resume; the plan "
            "would otherwise run again what those rows already hold",
            path=waiting[0].file,
            line=waiting[0].first_line,
        )


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
    keep_rows: bool = True,
) -> Resume:
    """REC-56: replay, gate, then record what the gate decided and release the plan.

    ``keep_rows`` false (a dry run that prints counts): the rows to dispatch
    are read and checked as the plan reads them, but ``plan.dispatch`` is left
    empty, so memory does not grow with the plan.
    """
    if not dry_run and not ledger.writable:
        raise Refused("resume writes to the run: open it with the held RunLock")
    # A writer's open refused them already (REC-86). A dry run of a large log
    # tells them in a second process beside its replay, and refuses after it.
    aside = _waiting_aside(ledger) if dry_run else None
    if dry_run and aside is None:
        _refuse_waiting(ledger)
    try:
        extend_attempts = bounded(
            extend_attempts,
            low=0,
            high=MAX_ATTEMPTS,
            what="resume --extend-attempts takes a total",
            key="extend_attempts",
        )
        change, changed = _policy_change(ledger, retry_terminal_timeouts, reason)
        state, seen = _replayed(ledger, changed, approvals, extend_attempts)
    except BaseException:
        if aside is not None:
            aside.close()
        raise
    if aside is not None:
        _refuse_waiting(ledger, aside)
    policy = changed or policy_from_json(state.policy)
    current, seen = current_manifest_seen(
        ledger, state, config, global_config, source=source, seen=seen
    )
    verdict = gate(state, current, allow_unsafe=allow_unsafe)
    if verdict.refusal is not None:
        raise verdict.refusal
    warnings = list(verdict.warnings) + _cap_warning(state)
    pending = _operator_events(
        state,
        extend_attempts=extend_attempts,
        policy_change=change,
        approvals=approvals,
        reason=reason,
        warnings=warnings,
    )
    if verdict.record is not None:
        record = verdict.record
        if isinstance(record, IdentityOverridden) and reason is not None:
            record = msgspec.structs.replace(record, reason=reason)
        pending.append(record)
    # The plan is made on the state after the pending events, folded in memory
    # (their time is not known yet). A resume that appends them folds them
    # again, as stored, into the replayed state: the in-memory fold is a copy's.
    planned = state if dry_run or not pending else copy_state(state)
    planned = _fold_pending(ledger, planned, policy, pending)
    decisions = decide_all(planned)
    keys = plan_keys(planned, decisions, longest_first=longest_first)
    plan = build_plan(ledger, planned, decisions, keys, keep_rows=keep_rows)
    verdict = msgspec.structs.replace(verdict, warnings=tuple(warnings))
    for warning in warnings:
        log.warning("%s", warning)
    if dry_run:
        every = RunDecisions(decisions, planned, ledger)
        return Resume(plan=plan, verdict=verdict, state=planned, decisions=every)
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
    state = _commit(ledger, state, policy, pending, decisions, seen)
    every = RunDecisions(decisions, state, ledger)
    return Resume(plan=plan, verdict=verdict, state=state, decisions=every)


def _replayed(
    ledger: Ledger,
    changed: RecoveryPolicy | None,
    approvals: Approvals,
    extend_attempts: int,
) -> tuple[RunState, InputsSeen | None]:
    """The state to plan on, and what the inputs were when last read whole.

    P-8: from the snapshot of what is left when it brings the state to the
    head, and nothing the resume records reopens a settled rollout (a larger
    cap, a policy change, approvals); otherwise a full replay.
    """

    def usable(left: RunState) -> bool:
        return (
            changed is None and approvals is None and extend_attempts <= left.extension
        )

    opened = load_open(ledger, usable=usable)
    seen = None if opened is None else opened.inputs
    if opened is not None and opened.state is not None:
        return opened.state, seen
    # Issue 30: inputs the resume must read whole are read beside the replay.
    aside = _inputs_aside(ledger, seen)
    try:
        state = replay(ledger, policy_override=changed)
    except BaseException:
        if aside is not None:
            aside.close()
        raise
    return state, (seen if aside is None else aside.result(lambda: seen))


def _inputs_aside(
    ledger: Ledger, seen: InputsSeen | None
) -> Aside[InputsSeen | None] | None:
    """The inputs' file read whole in a second process, when a large log's
    resume will have to read it (nothing trusted of it) after its replay."""
    if ledger.folder is None or not aside_pays(ledger.head()[0]):
        return None
    path = ledger.folder / ledger.files.names.materialized
    if still_seen(seen, path) is not None:
        return None
    return Aside(inputs_seen_at, str(path))


def _commit(
    ledger: Ledger,
    state: RunState,
    policy: RecoveryPolicy,
    bodies: list[Event],
    decisions: dict[tuple[int, int], Decision],
    seen: InputsSeen | None,
) -> RunState:
    """Append ``bodies``, fold them into the replayed ``state``, publish, snapshot."""
    # One transaction: a resume's events land together or not at all (REC-56).
    stored = ledger.append_many(bodies, actor="resume", expected_seq=ledger.head()[0])
    # Folded as a replay reads them: decoded from the log's bytes (an identity's
    # keys sorted as stored), with whatever a worker appended since the replay.
    tail = list(ledger.events(state.as_of_seq + 1))
    if state.settled is not None and not tail_is_open(state, tail):
        state = replay_kept(ledger)  # SC-4: a worker's event reopened a settled one
        decisions = decide_all(state)
    else:
        fold_into(state, tail, policy)
        if [e.seq for e in tail] != [e.seq for e in stored]:
            decisions = decide_all(state)  # SC-4: publish the log's, not the plan's
    covered = coverage(state, decisions)  # published, and kept with the snapshot
    publish(ledger, state, decisions, cover=covered)
    if state.settled is None:  # a whole state: its snapshot too (EV-14, P-5)
        save_snapshot(ledger, state, policy_from_json(state.policy))
    save_open(ledger, state, decisions, seen, covered=covered)
    return state
