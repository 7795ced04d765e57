"""P-4 (ours): planning the resume of the 100k-rollout run.

Timed: opening the run as ``rollout-ledger resume --dry-run`` does (a reader:
the EV-12 checks of the head) and ``projections.operations.release(..., dry_run=True)``:
replay, the current manifest of the configuration the run was created with
(``bench.manifest``, so the gate passes: the materialized inputs are hashed
and their agents read), the gate, every decision, and the plan with the rows
to dispatch read from the materialized inputs. ``dry_run`` keeps every round
on the same log. A writer's open (the write index a collector records with)
is not planning, and is not timed. Measured on two states of the run: after a
kill (the run as built, cut mid-hop: no snapshot, the whole log is replayed)
and after a clean close (a real resume ran last and saved the snapshot of the
head).
"""

from __future__ import annotations

import time
from pathlib import Path

from bench.context import Context, Measured
from bench.manifest import collection_config, servers_config
from ledger.run.ledger import Ledger
from projections import resume

__all__ = ["p4_close", "p4_kill"]


def _plan_seconds(out: Path) -> Measured:
    config, servers = collection_config(), servers_config()
    started = time.perf_counter()
    with Ledger.open(out) as led:
        opened = time.perf_counter()
        result = resume(led, config, servers, dry_run=True)
        elapsed = time.perf_counter() - started
    counts = result.plan.counts
    detail = (
        f"open {opened - started:.2f} s + resume {elapsed - (opened - started):.2f}"
        f" s; {counts.get('dispatch', 0)} to dispatch, "
        f"{counts.get('held_planned', 0)} held, {counts.get('complete', 0)} "
        f"complete, {result.state.expected} rollouts"
    )
    return Measured(elapsed, detail)


def p4_kill(ctx: Context) -> Measured:
    """P-4 after a kill: seconds to plan the resume of the run as built."""
    assert ctx.data.resume_run is not None
    return _plan_seconds(ctx.data.resume_run)


def p4_close(ctx: Context) -> Measured:
    """P-4 after a clean close: seconds to plan, the snapshot of the head saved."""
    assert ctx.data.resume_closed is not None
    return _plan_seconds(ctx.data.resume_closed)
