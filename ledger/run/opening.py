"""``open_run``: a run opened for one caller, read-only or as its writer.

A reader never modifies anything (EV-12). A writer holds the run lock for as
long as the caller keeps the ledger (EV-40); its open repairs what a killed
writer left (EV-12). Commands and library functions that take ``OUT`` open
runs here, so a writer is opened the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ledger.clock import Clock
from ledger.run.ledger import Ledger
from ledger.run.lock import RunLock

__all__ = ["open_run"]


@contextmanager
def open_run(
    out: Path | str,
    *,
    write: bool = False,
    clock: Clock | None = None,
    check_head: bool = True,
) -> Iterator[Ledger]:
    """The run at ``out``: a reader, or with ``write`` its writer under the lock.

    ``check_head=False`` (readers only) skips the chain checks of the head
    and of each event read (R-5), for a caller that checks the whole chain
    itself (``verify``).
    """
    if not write:
        with Ledger.open(out, check_head=check_head) as led:
            yield led
        return
    # An existing run only: a reader's open refuses anything else with the
    # message that helps, before the lock folder is made.
    Ledger.open(out).close()
    with RunLock(out) as lock, Ledger.open(out, lock=lock, clock=clock) as led:
        yield led
