"""``import_run``: import a run saved without a ledger, then publish (REC-70, REC-74).

``ledger.import_legacy_run`` writes the log; this module replays it, writes the
published files under the run lock and returns the coverage. With
``dry_run`` the would-be events are folded in memory and nothing is written.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from ledger import Ledger, RunLock, import_legacy_run
from ledger.legacy.importer import ImportReport
from projections.coverage import Coverage, coverage
from projections.publish import publish
from projections.replay import replay
from projections.state import RunState

__all__ = ["ImportResult", "import_run"]


class ImportResult(msgspec.Struct, frozen=True):
    """What the import recorded (or would record), the state and its coverage."""

    report: ImportReport
    state: RunState
    coverage: Coverage


def import_run(out: Path | str, **options: Any) -> ImportResult:
    """Import the run at ``out`` and publish its files (REC-70..REC-74).

    ``options`` are those of ``ledger.import_legacy_run``: ``inputs``,
    ``skip_rejected``, ``dry_run``, ``lock`` and ``clock``. Without ``lock``
    the run lock is held for the import and the publishing together; a dry run
    takes no lock and writes nothing.
    """
    if options.get("dry_run"):
        report = import_legacy_run(out, **options)
        state = replay(report.events)
        return ImportResult(report, state, coverage(state))
    lock = options.pop("lock", None)
    if lock is not None:
        return _import_and_publish(out, lock, options)
    with RunLock(out) as held:
        return _import_and_publish(out, held, options)


def _import_and_publish(
    out: Path | str, lock: RunLock, options: dict[str, Any]
) -> ImportResult:
    report = import_legacy_run(out, lock=lock, **options)
    # A reader, though we hold the lock: a writer's open would run the EV-12
    # repair and cut a torn last line the import skipped, and an import never
    # modifies a collector file (REC-70). The next writer's open does that.
    with Ledger.open(out) as reader:
        state = replay(reader)
        publish(reader, state, lock=lock)
    return ImportResult(report, state, coverage(state))
