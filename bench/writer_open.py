"""A writer's open with and without a stored write index (EV-14), not a P target.

``python -m bench.writer_open [ROLLOUTS]`` builds a run with the harness's
generator (``bench.runs.build_run``), then opens it as a writer three times:
the first open folds every event of the index kinds and stores the index, the
next ones fold only the tail after it. Prints the wall time of each open.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from bench.rowpool import compact_pool
from bench.runs import build_run
from ledger import Ledger, RunLock


def main(argv: list[str]) -> None:
    """Build the run, then time three writer opens."""
    rollouts = int(argv[0]) if argv else 100_000
    with tempfile.TemporaryDirectory(prefix="rollout-ledger-open-") as folder:
        built = build_run(
            Path(folder) / "rollouts.jsonl",
            rollouts=rollouts,
            pool=compact_pool(seed=1, size=256),
            seed=1,
        )
        print(f"run of {rollouts} rollouts, {built.events} events")
        for label in ("first (fold all, store)", "second (stored + tail)", "third"):
            with RunLock(built.out) as lock:
                started = time.perf_counter()
                Ledger.open(built.out, lock=lock).close()
                elapsed = time.perf_counter() - started
            print(f"writer open, {label}: {elapsed:.2f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
