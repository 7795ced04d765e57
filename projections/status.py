"""Where a run stands: ``status`` (CLI-6) and ``check_run`` (CLI-7), as values.

Both replay once and decide once. ``status`` gathers what the command shows:
the state (whose manifest it summarizes), the coverage, the held rollouts with
their decisions, and the repairs a writer's open would make; with ``publish``
it also rewrites the published files, which needs a writer. ``check_run``
raises ``RecoveryIncomplete`` unless every rollout is complete or omitted
(REC-40), and returns the coverage when it is.
"""

from __future__ import annotations

import msgspec

from ledger import Ledger
from projections.coverage import Coverage, check_complete, coverage
from projections.decide import Decision, decide_all
from projections.publish import publish as publish_files
from projections.replay import replay
from projections.state import RunState

__all__ = ["HeldRollout", "Repair", "RunStatus", "check_run", "status"]


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
    """What ``status`` shows of a run, as of one replay."""

    state: RunState
    coverage: Coverage
    held: tuple[HeldRollout, ...]
    pending_repairs: tuple[Repair, ...]
    #: Whether the published files were rewritten from the log.
    published: bool


def status(ledger: Ledger, *, publish: bool = False) -> RunStatus:
    """The run's status; with ``publish`` (a writer) its files are rewritten too."""
    state = replay(ledger)
    decisions = decide_all(state)
    if publish:
        publish_files(ledger, state, decisions)
    return RunStatus(
        state=state,
        coverage=coverage(state, decisions),
        held=tuple(
            HeldRollout(task, rollout, decision)
            for (task, rollout), decision in decisions.items()
            if decision.value == "held"
        ),
        pending_repairs=tuple(
            Repair(p.file, p.line, p.what) for p in ledger.pending_repairs()
        ),
        published=publish,
    )


def check_run(ledger: Ledger) -> Coverage:
    """The coverage of a complete run; ``RecoveryIncomplete`` otherwise (REC-40)."""
    state = replay(ledger)
    decisions = decide_all(state)
    check_complete(state, decisions)
    return coverage(state, decisions)
