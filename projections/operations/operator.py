"""Operator actions (CLI-10) as library calls: approve, budget, extend, policy.

Each builds its event from the replayed state, appends it at the head that
state saw (a concurrent append is a ``ConcurrencyConflict``), replays, and
republishes. The result holds the decisions before and after, so a caller can
show what changed in the plan. The caller holds the run lock (a writer ledger);
``approve_held`` with ``dry_run`` only reads, and chooses the attempts the
``approve`` command names; the other actions' ``dry_run`` folds the event they
would append in memory and returns the decisions it would make, appending
nothing (a reader ledger serves).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import msgspec

from ledger import (
    FAILURE_KINDS,
    ConfigError,
    CorruptLedger,
    Ledger,
    Refused,
    attempt_key,
)
from ledger.events import (
    Event,
    PolicyChanged,
    RerunApproved,
)
from ledger.policy.log import policy_from_events, policy_from_json
from projections.decisions.completion import HELD_REASONS
from projections.decisions.rules import Decision, decide_all
from projections.fold.apply import fold_into, pending_events
from projections.fold.reading import replay
from projections.fold.snapshot import copy_state
from projections.fold.state import RunState
from projections.operations.keep import replay_kept
from projections.operations.publishing import publish

__all__ = [
    "Approval",
    "ApprovalChoice",
    "OperatorResult",
    "append_operator_events",
    "approve",
    "approve_held",
    "failure_classes",
    "held_attempts",
]

Decisions = dict[tuple[int, int], Decision]


class OperatorResult(msgspec.Struct):
    """What an operator action recorded, and the decisions around it.

    With ``dry_run``, ``recorded`` holds what the action would record, and
    ``after`` and ``state`` what it would make; nothing was appended.
    """

    recorded: list[Event]
    before: Decisions
    after: Decisions
    state: RunState  # after the action
    previous: RunState  # before it
    dry_run: bool = False


def append_operator_events(
    ledger: Ledger,
    state: RunState,
    bodies: Sequence[Event],
    *,
    actor: str,
    dry_run: bool = False,
) -> OperatorResult:
    """Append ``bodies`` at the head ``state`` saw, replay and republish.

    ``dry_run``: fold them in memory instead, after the whole log (a policy
    change applies to every outcome on replay, REC-60), and append nothing.
    """
    before = decide_all(state)
    if not bodies:
        return OperatorResult([], before, before, state, state, dry_run)
    if dry_run:
        would_be = _folded(ledger, state, bodies)
        return OperatorResult(
            list(bodies), before, decide_all(would_be), would_be, state, True
        )
    ledger.append_many(bodies, expected_seq=state.as_of_seq, actor=actor)
    after_state = replay_kept(ledger)
    after = decide_all(after_state)
    publish(ledger, after_state, after)
    return OperatorResult(list(bodies), before, after, after_state, state)


def _folded(ledger: Ledger, state: RunState, bodies: Sequence[Event]) -> RunState:
    """``state`` after ``bodies``, folded in memory as a replay would fold them.

    A policy change classifies every outcome again (REC-60): the log is
    replayed under the policy it makes; any other event folds into a copy.
    """
    pending = pending_events(ledger.head(), bodies)
    if not any(isinstance(body, PolicyChanged) for body in bodies):
        return fold_into(copy_state(state), pending, policy_from_json(state.policy))
    logged = (e.body for e in ledger.events(kinds=("run_created", "policy_changed")))
    policy = policy_from_events([*logged, *bodies])
    return fold_into(replay(ledger, policy_override=policy), pending, policy)


def held_attempts(
    state: RunState, *, reason_held: str | None = None, kind: str | None = None
) -> list[tuple[int, int, Decision]]:
    """Every held rollout, narrowed by its reason and failure kind (REC-26 filters)."""
    return _held(decide_all(state), reason_held, kind)


def _held(
    decisions: Decisions, reason_held: str | None = None, kind: str | None = None
) -> list[tuple[int, int, Decision]]:
    return [
        (task, rollout, decision)
        for (task, rollout), decision in decisions.items()
        if decision.value == "held"
        and (reason_held is None or decision.reason == reason_held)
        and (kind is None or decision.kind == kind)
    ]


_LISTED_HELD = 5


def _what_is_held(ledger: Ledger, decisions: Decisions) -> str:
    held = _held(decisions)
    if not held:
        return "no rollout of this run is held now"
    shown = ", ".join(
        f"task {task} rollout {rollout} attempt {d.attempt} ({d.reason})"
        for task, rollout, d in held[:_LISTED_HELD]
    )
    more = f" and {len(held) - _LISTED_HELD} more" if len(held) > _LISTED_HELD else ""
    return (
        f"held now: {shown}{more}; list them with `rollout-ledger approve "
        f"{ledger.target} --all-held --reason WHY --dry-run`"
    )


def _require_held(
    ledger: Ledger,
    state: RunState,
    decisions: Decisions,
    named: tuple[int, int, int],
) -> None:
    """REC-25: an approval names the held attempt of a held rollout, or is refused.

    An approval of anything else would reopen nothing yet be recorded, and
    could reopen a later attempt nobody looked at; refused, nothing recorded.
    """
    task, rollout, attempt = named
    _require_rollout(state, task, rollout, attempt)
    decision = decisions.get((task, rollout))
    if decision is None:  # every materialized rollout has a decision
        raise CorruptLedger(f"task {task}, rollout {rollout} has no decision")
    which = f"task {task}, rollout {rollout}, attempt {attempt}"
    if decision.value != "held":
        raise Refused(
            f"{which} is not held, so there is nothing to approve: the rollout is "
            f"{decision.value} ({decision.reason}, attempt {decision.attempt}); "
            f"nothing was recorded; {_what_is_held(ledger, decisions)}"
        )
    if decision.attempt != attempt:
        raise Refused(
            f"{which} is not the held attempt: task {task} rollout {rollout} holds "
            f"attempt {decision.attempt} ({decision.reason}); nothing was recorded; "
            f"approve that one with `rollout-ledger approve {ledger.target} --task "
            f"{task} --rollout {rollout} --attempt {decision.attempt} --reason WHY`"
        )


def approve(
    ledger: Ledger,
    attempts: Iterable[tuple[int, int, int]],
    *,
    reason: str,
    actor: str,
    state: RunState | None = None,
) -> OperatorResult:
    """REC-25: one ``rerun_approved`` per named attempt, each held (else ``Refused``).

    Every attempt is checked before anything is recorded: an attempt that is
    not the held attempt of a held rollout refuses the call, naming what is held.
    """
    state = replay_kept(ledger) if state is None else state
    decisions = decide_all(state)
    named = [attempt_key(one) for one in attempts]  # each within its bounds
    for one in named:
        _require_held(ledger, state, decisions, one)
    return _append_approvals(ledger, state, named, reason=reason, actor=actor)


def _append_approvals(
    ledger: Ledger,
    state: RunState,
    named: Iterable[tuple[int, int, int]],
    *,
    reason: str,
    actor: str,
    dry_run: bool = False,
) -> OperatorResult:
    bodies: list[Event] = [
        RerunApproved(task=task, rollout=rollout, attempt=attempt, reason=reason)
        for task, rollout, attempt in named
    ]
    return append_operator_events(ledger, state, bodies, actor=actor, dry_run=dry_run)


def _require_rollout(state: RunState, task: int, rollout: int, attempt: int) -> None:
    if rollout not in state.rollouts.get(task, {}):
        raise ConfigError(
            f"task {task}, rollout {rollout} is not among this run's rollouts "
            f"(approving attempt {attempt}); nothing was recorded",
            key="task",
        )


class ApprovalChoice(msgspec.Struct, frozen=True):
    """An attempt an approval names; ``held``: its decision, when chosen as held."""

    task: int
    rollout: int
    attempt: int
    held: Decision | None = None


class Approval(msgspec.Struct, frozen=True, kw_only=True):
    """The attempts an approval names, and what recording them did."""

    chosen: tuple[ApprovalChoice, ...]
    #: ``None`` when no attempt was chosen; a dry run's is its preview
    #: (``result.dry_run``), nothing recorded.
    result: OperatorResult | None


def approve_held(
    ledger: Ledger,
    *,
    attempt: tuple[int, int, int] | None = None,
    reason_held: str | None = None,
    kind: str | None = None,
    reason: str,
    actor: str,
    dry_run: bool = False,
) -> Approval:
    """REC-25: approve the named ``attempt``, else every held rollout's attempt.

    ``reason_held`` and ``kind`` narrow the held rollouts (REC-26); with
    ``dry_run`` the chosen attempts and the plan they would make are returned
    and nothing is recorded.
    """
    if attempt is not None and (reason_held or kind):
        raise ConfigError("reason_held and kind narrow held rollouts, not an attempt")
    attempt = None if attempt is None else attempt_key(attempt)
    state = replay_kept(ledger)
    _known_filters(state, reason_held, kind)
    decisions = decide_all(state)
    if attempt is None:
        chosen = tuple(
            ApprovalChoice(task, rollout, decision.attempt, decision)
            for task, rollout, decision in _held(decisions, reason_held, kind)
        )
    else:
        _require_held(ledger, state, decisions, attempt)  # a dry run tells it too
        chosen = (ApprovalChoice(*attempt),)
    if not chosen:
        return Approval(chosen=chosen, result=None)
    named = [(c.task, c.rollout, c.attempt) for c in chosen]
    # Each chosen attempt is held: checked above, or chosen among the held.
    result = _append_approvals(
        ledger, state, named, reason=reason, actor=actor, dry_run=dry_run
    )
    return Approval(chosen=chosen, result=result)


def _known_filters(state: RunState, reason_held: str | None, kind: str | None) -> None:
    """REC-26's filters name a held reason and a kind that exist, or are refused.

    A typo would match nothing and approve nothing, silently; refused instead,
    with the names that would match.
    """
    if reason_held is not None and reason_held not in HELD_REASONS:
        raise ConfigError(
            f"{reason_held!r} is not a reason a rollout is held for; the reasons "
            f"are {', '.join(HELD_REASONS)}",
            key="reason_held",
        )
    if kind is None or kind in FAILURE_KINDS:
        return
    classes = failure_classes(state)
    if kind not in classes:
        others = ", ".join(sorted(classes - FAILURE_KINDS)) or "none"
        raise ConfigError(
            f"{kind!r} is neither a registered failure kind nor a failure class of "
            f"this run's rows.\n  registered failure kinds: "
            f"{', '.join(sorted(FAILURE_KINDS))}\n  other failure classes in this "
            f"run: {others}",
            key="kind",
        )


def failure_classes(state: RunState) -> frozenset[str]:
    """The failure kinds and classes the run's recorded outcomes carry (REC-80)."""
    kinds = {
        attempt.kind
        for _, rollout in state.ordered_rollouts()
        for attempt in rollout.newest_first()
    }
    return frozenset(kind for kind in kinds if kind is not None)
