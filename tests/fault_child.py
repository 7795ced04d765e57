"""The fault harness's child: ``rollout-ledger ARGS``, reporting each returned append.

``python tests/fault_child.py ARGS...`` runs the command line as the installed
``rollout-ledger`` does. Each time an append to a SQLite log returns to its
caller, one line ``<database path> <seq> <hash hex>`` is written to the file
``ROLLOUT_LEDGER_FAULT_REPORT`` names, before anything else happens: a
SIGKILL after that line is a kill after the append returned, and the
harness requires the event to survive (R-1, EV-11). The report only
observes; it changes nothing the command does.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.internals import SQLiteStore

REPORT_ENV = "ROLLOUT_LEDGER_FAULT_REPORT"


def _reporting() -> None:
    report = os.open(os.environ[REPORT_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    append_many = SQLiteStore.append_many

    def reported(self: Any, *args: Any, **kwargs: Any) -> Any:
        rows = append_many(self, *args, **kwargs)
        if rows:
            last = rows[-1]
            line = f"{self.path} {last.seq} {last.hash.hex()}\n"
            os.write(report, line.encode())
        return rows

    SQLiteStore.append_many = reported  # type: ignore[method-assign]


if __name__ == "__main__":
    _reporting()
    from cli import main

    sys.argv[0] = "rollout-ledger"
    main()
