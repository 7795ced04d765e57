"""The measurements that wait for ``projections`` (P-3, P-4 ours, P-5).

Each is one function: replace its body with the measurement (the docstring says
what to time) and the harness prints its figures next to the baseline's.
Raising :class:`NotMeasured` makes the report say "not measured yet".
"""

from __future__ import annotations

from bench.context import Context, Measured, NotMeasured

__all__ = ["p3_ours", "p4_ours", "p5_baseline", "p5_ours"]


def p3_ours(ctx: Context) -> Measured:
    """P-3: events/s of ``projections.replay`` over ``ctx.data.replay_log``.

    Open ``Ledger.open(ctx.data.replay_log)`` (a reader), time
    ``projections.replay(led, use_snapshot=False)`` (every projection, no
    snapshot), return ``Measured(events / seconds, ...)`` with ``events`` from
    ``led.head()[0]``. Peak RSS (<= 200 MiB) is read by the harness.
    """
    raise NotMeasured("not measured yet (needs projections.replay)")


def p4_ours(ctx: Context) -> Measured:
    """P-4: seconds of ``projections.resume(..., dry_run=True)`` on the resume run.

    Open ``ctx.data.resume_run`` with its ``RunLock`` and time
    ``projections.resume(led, config, global_config, dry_run=True)`` (the
    incumbent's side is ``bench.resume_time.p4_baseline``); return
    ``Measured(seconds, ...)``. ``dry_run`` keeps every round on the same log.
    The gate compares ``config`` with the run's manifest: build the run with a
    real ``RunManifest`` of that config (``bench/manifest.py`` is a stand-in).
    """
    raise NotMeasured("not measured yet (needs projections.resume)")


def p5_ours(ctx: Context) -> Measured:
    """P-5: seconds of a resume with a current snapshot of ``replay_log``.

    Save the snapshot before the clock starts (``projections.snapshot``), then
    time ``projections.replay(led)`` (it uses a matching snapshot) or a
    dry-run resume; return ``Measured(seconds, ...)``.
    """
    raise NotMeasured(
        "not measured yet (needs projections.replay / projections.resume)"
    )


def p5_baseline(ctx: Context) -> Measured:
    """P-5 baseline: seconds of ``projections.replay(led, use_snapshot=False)``."""
    raise NotMeasured(
        "not measured yet (needs projections.replay / projections.resume)"
    )
