"""Issue 16 (``RPT``): the HTML report of a large run, its time and its size.

Ours is what ``rollout-ledger report OUT -o FILE`` does on P-4's run (the run
sized like the fixtures, killed mid-wave, so unfinished rollouts are listed):
replay, every decision, ``verify``, the reward figures, the report's context
and its page, written to a file. The baseline is what ``status`` does on the
same run (replay, every decision, the coverage), so the ratio is what the
report adds to the cheapest full reading of the run. The page's size is in
the detail, and a page of 20 MB or more fails the measurement.
"""

from __future__ import annotations

import time

from bench.context import Context, Measured
from cli.render.html import render_report
from ledger import Ledger
from projections import (
    decide_all,
    replay,
    report_context,
    reward_metrics,
    status,
    verify_run,
)

__all__ = ["MAX_BYTES", "rpt_baseline", "rpt_ours"]

MAX_BYTES = 20 * 2**20


def rpt_ours(ctx: Context) -> Measured:
    """Seconds to write the report of P-4's run (verify included)."""
    assert ctx.data.resume_run is not None
    out = ctx.data.resume_run
    page = ctx.scratch / "report.html"
    started = time.perf_counter()
    # As the command opens it: verify's full chain check stands for the
    # check of each event as read.
    with Ledger.open(out, check_head=False) as led:
        state = replay(led)
        decisions = decide_all(state)
        verification = verify_run(led)
        verified = time.perf_counter()
        metrics = reward_metrics(led, state, decisions=decisions).to_dict()
        context = report_context(
            state,
            led.events(1),
            decisions,
            out=str(out),
            verification=verification,
            metrics=metrics,
            ledger=led,
        )
        page.write_text(render_report(context), encoding="utf-8")
    elapsed = time.perf_counter() - started
    size = page.stat().st_size
    if size >= MAX_BYTES:
        raise RuntimeError(f"the report is {size} bytes, not under {MAX_BYTES}")
    grid = context["grid"]
    shown = (
        f"{grid['tasks']} tasks in bands, {len(grid['listed'])} of "
        f"{grid['unfinished']} unfinished rollouts listed"
        if grid["mode"] == "bands"
        else "one cell per rollout"
    )
    detail = (
        f"{state.expected} rollouts, {state.as_of_seq} events; page "
        f"{size / 2**20:.2f} MiB ({shown}); of the time, replay + decide + verify "
        f"{verified - started:.2f} s"
    )
    return Measured(elapsed, detail)


def rpt_baseline(ctx: Context) -> Measured:
    """Seconds for ``status`` of the same run (replay, decisions, coverage)."""
    assert ctx.data.resume_run is not None
    started = time.perf_counter()
    with Ledger.open(ctx.data.resume_run) as led:
        shown = status(led)
    return Measured(
        time.perf_counter() - started, f"{shown.coverage.expected} rollouts"
    )
