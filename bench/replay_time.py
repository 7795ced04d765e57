"""P-3 (ours) and P-5: replaying the ~1M-event log into every projection.

P-3 times a full replay (no snapshot) into the ``RunState``, then every
rollout's decision and the coverage report: all the projections a status or
resume reads. P-5 times the replay a resume starts with when the log has a
current snapshot (``bench.datasets`` resumed the log once, which saved it),
against the same replay without the snapshot.
"""

from __future__ import annotations

import time

from bench.context import Context, Measured
from ledger.policy.log import policy_from_json
from ledger.run.ledger import Ledger
from projections import coverage, decide_all, replay
from projections.fold.snapshot import load_snapshot

__all__ = ["p3_ours", "p5_baseline", "p5_ours"]


def p3_ours(ctx: Context) -> Measured:
    """P-3: events per second of a full replay, ``decide_all`` and ``coverage``."""
    assert ctx.data.replay_log is not None
    with Ledger.open(ctx.data.replay_log) as led:
        events = led.head()[0]
        started = time.perf_counter()
        state = replay(led, use_snapshot=False)
        folded = time.perf_counter()
        decisions = decide_all(state)
        report = coverage(state, decisions)
        elapsed = time.perf_counter() - started
    detail = (
        f"{events} events, {report.expected} rollouts; replay {folded - started:.2f} s"
        f", decide_all + coverage {elapsed - (folded - started):.2f} s"
    )
    return Measured(events / elapsed, detail)


def _replay_seconds(ctx: Context, *, use_snapshot: bool) -> tuple[float, int, int]:
    assert ctx.data.replay_log is not None
    with Ledger.open(ctx.data.replay_log) as led:
        started = time.perf_counter()
        state = replay(led, use_snapshot=use_snapshot)
        elapsed = time.perf_counter() - started
        head = led.head()[0]
        saved = load_snapshot(led, policy_from_json(state.policy))
    if state.as_of_seq != head:
        raise RuntimeError(f"replayed to seq {state.as_of_seq}, not the head {head}")
    if use_snapshot and (saved is None or saved.as_of_seq != head):
        raise RuntimeError("the replay log has no snapshot of its head")
    return elapsed, head, state.expected


def p5_ours(ctx: Context) -> Measured:
    """P-5: seconds of ``replay(led)`` with the current snapshot of the head."""
    elapsed, head, rollouts = _replay_seconds(ctx, use_snapshot=True)
    return Measured(
        elapsed, f"snapshot at the head (seq {head}), {rollouts} rollouts loaded"
    )


def p5_baseline(ctx: Context) -> Measured:
    """P-5 baseline: seconds of ``replay(led, use_snapshot=False)``."""
    elapsed, head, rollouts = _replay_seconds(ctx, use_snapshot=False)
    return Measured(elapsed, f"{head} events folded, {rollouts} rollouts")
