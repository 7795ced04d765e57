"""P-4's baseline: 0.7.0's resume imitated (as shipped) on the run, and its peak RSS."""

from __future__ import annotations

import time

from bench.context import Context, Measured
from bench.incumbent import plan_resume

__all__ = ["p4_baseline"]


def p4_baseline(ctx: Context) -> Measured:
    """P-4 baseline: seconds for 0.7.0's resume planning, imitated."""
    assert ctx.data.resume_run is not None
    started = time.perf_counter()
    plan = plan_resume(ctx.data.resume_run)
    elapsed = time.perf_counter() - started
    if plan is None:
        raise RuntimeError(f"{ctx.data.resume_run}: the incumbent would start fresh")
    detail = (
        f"{len(plan.to_run)} rows to run, {len(plan.main_rows)} result rows held, "
        f"{len(plan.gated)} keys gated"
    )
    return Measured(elapsed, detail)
