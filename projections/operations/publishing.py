"""The published files, rewritten whole and atomically from the log (events.md).

``publish`` writes what ``projections.views.published`` renders; ``status``
with ``publish`` (CLI-6's ``--publish``) rewrites them and says where the run
stands.
"""

from __future__ import annotations

from collections.abc import Mapping

from ledger import Ledger, Refused, RunLock
from projections.decisions.completion import Coverage
from projections.decisions.rules import Decision, decide_all
from projections.fold.state import RunState
from projections.operations.keep import replay_kept
from projections.views.published import rendered_files, stale_files
from projections.views.status import RunStatus, read_status, status_of

__all__ = ["publish", "status"]


def publish(
    ledger: Ledger,
    state: RunState,
    decisions: Mapping[tuple[int, int], Decision] | None = None,
    *,
    lock: RunLock | None = None,
    cover: Coverage | None = None,
) -> None:
    """Rewrite the published files from ``state`` (a writer's job, never a reader's).

    ``lock`` lets a caller that holds the run lock publish through a reader
    ledger (an import must not run a writer's EV-12 repair, REC-70); ``cover``
    is the state's coverage when the caller has it already.
    """
    held = lock is not None and lock.held and lock.target == ledger.target
    if not ledger.writable and not held:
        raise Refused("publishing needs the run lock; a reader never writes")
    # ID-32: the identity first, so a crash between the two leaves a pair whose
    # digests disagree, which ID-33 ignores.
    # The JSON files are canonical_json, the bytes publish_json writes (EV-31).
    for name, data in rendered_files(state, decisions, cover=cover).items():
        if data is not None:
            ledger.files.publish(name, data)


def status(
    ledger: Ledger,
    *,
    publish: bool = False,
    dry_run: bool = False,
    count_failure_classes_as_zero: bool = False,
    count_missing_rollouts_as_zero: bool = False,
) -> RunStatus:
    """The run's status; with ``publish`` (a writer) its files are rewritten too.

    ``dry_run`` with ``publish`` (a reader serves): the files that would be
    rewritten are named and nothing is written. The two counting options are
    ``reward_metrics``'s (NeMo Gym 0.7.0's).
    """
    counting = {
        "count_failure_classes_as_zero": count_failure_classes_as_zero,
        "count_missing_rollouts_as_zero": count_missing_rollouts_as_zero,
    }
    if not publish:
        return read_status(ledger, **counting)
    state = replay_kept(ledger)
    decisions = decide_all(state)
    stale = stale_files(ledger, state, decisions)
    if not dry_run:
        _publish(ledger, state, decisions)
    return status_of(
        ledger, state, decisions, published=not dry_run, stale=stale, **counting
    )


_publish = publish
