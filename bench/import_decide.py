"""Issue 15 (``NG07``): importing a run a collector left, then deciding every rollout.

Both sides run the same public calls on collector files of the same plan and
size (``bench.shapes``): ``projections.import_run`` (the ``import`` command:
the ledger recorded from the files, then its files published), then opening
the run and ``projections.views.status`` (replay, every decision, the coverage: what
``status`` prints). Ours reads NeMo Gym 0.7.0's rows, the baseline the older
rows of P-4's run, so the ratio is what 0.7.0's shapes and the rules that read
them cost on that path. Each round imports a fresh copy of the files (the copy
is not timed); rows the importer rejects are skipped, as ``--skip-rejected``
does, and counted in the detail.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from bench.context import Context, Measured
from ledger import Ledger
from projections import import_run, status

__all__ = ["ng07_baseline", "ng07_ours"]


def _fresh_copy(out: Path, scratch: Path) -> Path:
    stem = out.with_suffix("").name
    target = scratch / "run" / out.name
    target.parent.mkdir(parents=True, exist_ok=True)
    for path in out.parent.glob(f"{stem}*.jsonl"):
        shutil.copyfile(path, target.parent / path.name)
    return target


def _import_and_decide(out: Path, scratch: Path) -> Measured:
    run = _fresh_copy(out, scratch)
    started = time.perf_counter()
    imported = import_run(run, skip_rejected=True)
    decided = time.perf_counter()
    with Ledger.open(run) as led:
        shown = status(led)
    elapsed = time.perf_counter() - started
    report, cover = imported.report, shown.coverage
    decisions = ", ".join(f"{n} {k}" for k, n in sorted(cover.decisions.items()))
    detail = (
        f"import {decided - started:.2f} s + decide {elapsed - (decided - started):.2f}"
        f" s; {report.rows_imported} rows imported, {report.rows_rejected} rejected; "
        f"{cover.expected} rollouts: {decisions}"
    )
    return Measured(elapsed, detail)


def ng07_ours(ctx: Context) -> Measured:
    """Seconds to import and decide the run of 0.7.0-shaped rows."""
    assert ctx.data.ng07_run is not None
    return _import_and_decide(ctx.data.ng07_run, ctx.scratch)


def ng07_baseline(ctx: Context) -> Measured:
    """Seconds to import and decide the same plan written with older rows."""
    assert ctx.data.ng07_older is not None
    return _import_and_decide(ctx.data.ng07_older, ctx.scratch)
