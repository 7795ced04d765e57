"""Where a run stands: ``status`` (CLI-6) and ``check_run`` (CLI-7), as values.

Both replay once and decide once. ``status`` gathers what the command shows:
the state (whose manifest it summarizes), the coverage, the held rollouts with
their decisions, the repairs a writer's open would make and the rows waiting
to be adopted (REC-86); rewriting the published files is an operation's
(``projections.operations.publishing``). ``check_run`` raises
``RecoveryIncomplete`` unless every rollout is complete or omitted (REC-40),
and returns the coverage when it is.
"""

from __future__ import annotations

import msgspec

from ledger import (
    Ledger,
    RecoveryIncomplete,
    Waiting,
    adopt_advice,
    group_waiting,
    rows_untouched,
)
from projections.decisions.completion import Coverage, check_complete, coverage
from projections.decisions.rules import Decision, decide_all
from projections.figures.metrics import RewardMetrics, metrics_of
from projections.fold.left import AtHead, load_open
from projections.fold.reading import replay
from projections.fold.state import RunState
from projections.views.next_steps import NextSteps
from projections.views.refused import refused_note
from projections.views.results import ChangedRow, changed_rows

__all__ = [
    "HeldRollout",
    "Repair",
    "RunStatus",
    "adopt_note",
    "check_run",
    "read_status",
    "status_of",
]


class HeldRollout(msgspec.Struct, frozen=True):
    """A held rollout and the decision that holds it (REC-25)."""

    task: int
    rollout: int
    decision: Decision


class Repair(msgspec.Struct, frozen=True):
    """A repair a writer's open would make (EV-12): the file, line and what."""

    file: str
    line: int
    what: str


class RunStatus(msgspec.Struct, frozen=True, kw_only=True):
    """What ``status`` shows of a run, as of one replay.

    From the snapshot of what is left (P-8), ``state`` holds the rollouts
    still to decide and ``state.settled`` sums the others; every count and
    figure covers the whole run.
    """

    state: RunState
    coverage: Coverage
    held: tuple[HeldRollout, ...]
    pending_repairs: tuple[Repair, ...]
    #: Rows another collector appended, for ``import`` to adopt (REC-86).
    waiting: tuple[Waiting, ...] = ()
    #: What waits and the command that adopts it; ``None`` when nothing does.
    adopt: str | None = None
    #: Whether the published files were rewritten from the log.
    published: bool
    #: R-7: selected rows whose bytes changed since they were recorded.
    changed: tuple[ChangedRow, ...] = ()
    #: The reward figures of the selected results (issue 16).
    metrics: RewardMetrics | None = None
    #: With ``publish``: the published files that differed from the log (and
    #: were rewritten, unless a dry run).
    stale: tuple[str, ...] = ()


def read_status(
    ledger: Ledger,
    *,
    count_failure_classes_as_zero: bool = False,
    count_missing_rollouts_as_zero: bool = False,
) -> RunStatus:
    """The run's status, read: from the snapshot of what is left when it can.

    The two counting options are ``reward_metrics``'s (NeMo Gym 0.7.0's).
    """
    opened = load_open(ledger)
    state = None if opened is None else opened.state
    if state is None:
        state = replay(ledger)
    options = count_failure_classes_as_zero or count_missing_rollouts_as_zero
    at_head = None if opened is None or options else opened.at_head
    if at_head is not None:  # P-8: as the snapshot at the head saw it
        return _status_at_head(ledger, state, at_head)
    return status_of(
        ledger,
        state,
        decide_all(state),
        count_failure_classes_as_zero=count_failure_classes_as_zero,
        count_missing_rollouts_as_zero=count_missing_rollouts_as_zero,
    )


def status_of(
    ledger: Ledger,
    state: RunState,
    decisions: dict[tuple[int, int], Decision],
    *,
    published: bool = False,
    stale: tuple[str, ...] = (),
    count_failure_classes_as_zero: bool = False,
    count_missing_rollouts_as_zero: bool = False,
) -> RunStatus:
    """The status of ``state`` decided as ``decisions``; ``published`` and
    ``stale`` say what a ``status --publish`` rewrote (or would)."""
    pending = ledger.pending_repairs()
    waiting = group_waiting((p.file, p.line, p.what) for p in pending)
    return RunStatus(
        state=state,
        coverage=coverage(state, decisions),
        held=tuple(
            HeldRollout(task, rollout, decision)
            for (task, rollout), decision in decisions.items()
            if decision.value == "held"
        ),
        pending_repairs=tuple(
            Repair(p.file, p.line, p.what) for p in pending if not p.waiting
        ),
        published=published,
        stale=stale,
        waiting=waiting,
        adopt=adopt_advice(str(ledger.target), waiting) if waiting else None,
        changed=_changed(ledger, state, decisions),
        metrics=metrics_of(
            state,
            decisions,
            count_failure_classes_as_zero=count_failure_classes_as_zero,
            count_missing_rollouts_as_zero=count_missing_rollouts_as_zero,
        ),
    )


def _status_at_head(ledger: Ledger, state: RunState, at_head: AtHead) -> RunStatus:
    """``status`` when the snapshot of what is left is at the head (P-8).

    Its coverage, figures and held rollouts were made when it was saved, as
    of its seq, which is the head: nothing is decided again. Its rows were
    checked when recorded (every rollout with a row to check is settled, so
    none is read); ``verify`` checks them all again.
    """
    pending = ledger.pending_repairs()
    waiting = group_waiting((p.file, p.line, p.what) for p in pending)
    return RunStatus(
        state=state,
        coverage=at_head.coverage,
        held=tuple(HeldRollout(t, r, d) for t, r, d in at_head.held),
        pending_repairs=tuple(
            Repair(p.file, p.line, p.what) for p in pending if not p.waiting
        ),
        published=False,
        waiting=waiting,
        adopt=adopt_advice(str(ledger.target), waiting) if waiting else None,
        changed=_changed(ledger, state, None),
        metrics=at_head.metrics,
    )


def _changed(
    ledger: Ledger, state: RunState, decisions: dict[tuple[int, int], Decision] | None
) -> tuple[ChangedRow, ...]:
    """R-7 for ``status``: the selected rows edited since they were recorded.

    Issue 25: while ``OUT`` and the sidecar are as their writer left them (a
    stat, ``rows_untouched``) no row can have changed and none is read.
    Otherwise every selected row's digest is checked, of the settled
    rollouts too (a state from the snapshot of what is left holds only the
    open ones): the whole run is replayed for it.
    """
    if ledger.folder is not None and rows_untouched(ledger.paths):
        return ()
    if state.settled is not None or decisions is None:
        state = replay(ledger)  # every rollout (a fold snapshot, not what is left)
        decisions = decide_all(state)
    return tuple(changed_rows(ledger, state, decisions))


def _left(ledger: Ledger) -> RunState | None:
    """The state of what is left at the head, when its snapshot gives it (P-8).

    ``status`` then reads the snapshot and the log after it, not the log
    from its start: the settled rollouts' part of the counts, the coverage
    and the reward figures was summed when they settled. Their rows were
    checked when recorded; ``verify`` checks them all again.
    """
    opened = load_open(ledger)
    return None if opened is None else opened.state


def adopt_note(ledger: Ledger) -> str | None:
    """What waits to be adopted and the command that adopts it (REC-86), or ``None``."""
    waiting = ledger.waiting()
    return adopt_advice(str(ledger.target), waiting) if waiting else None


def check_run(ledger: Ledger) -> Coverage:
    """The coverage of a complete run; ``RecoveryIncomplete`` otherwise (REC-40).

    When rows wait to be adopted (REC-86), the refusal says so first: they may
    hold what the unfinished rollouts lack. When the collector's newest lines
    were all refused (issue 25), it says that and what to fix instead of only
    "resume": resuming alone would repeat it.
    """
    state = _left(ledger) or replay(ledger)
    decisions = decide_all(state)
    steps = NextSteps.of(ledger, state)
    try:
        check_complete(state, decisions, steps=steps.for_unfinished)
    except RecoveryIncomplete as exc:
        note = adopt_note(ledger)
        if note is not None:
            message = f"{note}, then check again; as recorded now, {exc}"
        elif (refused := refused_note(ledger)) is not None:
            message = f"{exc}; but {refused}"  # issue 25: resuming alone repeats it
        else:
            raise
        raise RecoveryIncomplete(
            message, retryable=exc.retryable, counts=exc.counts
        ) from None
    return coverage(state, decisions)
