"""The cost curve's measurements: each one whole, in a fresh process, with peak RSS.

Whole commands (``rollout-ledger ...`` and NeMo Gym 0.7.0's resume) run as
subprocesses timed from outside, imports included (``bench/commands.py``,
``bench/ng070.py``). Planning alone and the imitation run in a fresh spawned
child (``bench/child.py``): the time of the planning itself, the child's own
``VmHWM`` as its peak.
"""

from __future__ import annotations

import functools
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.child import Failed, Pending, measure_in_child
from bench.commands import run_cli
from bench.context import Context, Data, Measured
from bench.curve_data import CurveRun, config_args, linked_copy
from bench.curve_reads import (
    report_first,
    report_kept,
    report_noverify,
    verify_closed,
    view_list,
    view_pages,
)
from bench.ng070 import Incumbent
from bench.sizes import Sizes

__all__ = [
    "SIDES",
    "CurvePoint",
    "CurveSide",
    "Where",
    "dump_ledger",
    "imitate",
    "in_child",
]


@dataclass(frozen=True)
class CurvePoint:
    """One measurement: seconds, peak RSS, and 0.7.0's planning alone if real."""

    seconds: float
    peak_mib: float
    detail: str = ""
    plan_s: float | None = None


@dataclass(frozen=True)
class Where:
    """What a measurement of one size and round needs."""

    run: CurveRun
    tools: Path
    scratch: Path
    incumbent: Incumbent | None
    sizes: Sizes
    round: int


Measure = Callable[[Where], CurvePoint]


@dataclass(frozen=True)
class CurveSide:
    """One row of the curve: what it measures, in plain words."""

    id: str
    label: str
    measure: Measure
    real: bool = False  # needs NeMo Gym 0.7.0's venv


def _resume(out: Path, where: Where) -> CurvePoint:
    done = run_cli(["resume", str(out), *config_args(where.tools), "--dry-run"])
    plan = next((x for x in done.stdout.splitlines() if x.startswith("plan:")), "")
    return CurvePoint(done.wall_s, done.peak_mib, plan.removeprefix("plan: "))


def resume_killed(where: Where) -> CurvePoint:
    """``resume --dry-run`` after a kill: the last resume's snapshot, and a tail."""
    return _resume(where.run.killed, where)


def resume_nosnap(where: Where) -> CurvePoint:
    """``resume --dry-run`` with no snapshot at all: the whole log replayed."""
    return _resume(where.run.nosnap, where)


def resume_closed(where: Where) -> CurvePoint:
    """``resume --dry-run`` after a clean close: the snapshot of the head."""
    return _resume(where.run.closed, where)


def resume_real(where: Where) -> CurvePoint:
    """``resume`` (it records the release and publishes) after a clean close.

    On ``closed/`` itself: a resume leaves it as it found it, closed cleanly
    with the snapshot at the head (two more events), so the other sides
    measure the same state whether they come before or after it.
    """
    done = run_cli(["resume", str(where.run.closed), *config_args(where.tools)])
    plan = next((x for x in done.stdout.splitlines() if x.startswith("plan:")), "")
    return CurvePoint(done.wall_s, done.peak_mib, plan.removeprefix("plan: "))


def resume_real_killed(where: Where) -> CurvePoint:
    """``resume`` (it records the release) after a kill: P-8's case.

    On ``killed/`` itself, its ledger folder put back as it was afterwards (a
    copy of the run would give its inputs another inode, and a resume then
    reads them whole), so every other side measures the same state.
    """
    ledger_dir = where.run.killed.parent / f"{where.run.killed.stem}_ledger"
    kept = where.scratch / "killed_ledger"
    shutil.rmtree(kept, ignore_errors=True)
    shutil.copytree(ledger_dir, kept)
    try:
        done = run_cli(["resume", str(where.run.killed), *config_args(where.tools)])
    finally:
        shutil.rmtree(ledger_dir)
        shutil.move(kept, ledger_dir)
    plan = next((x for x in done.stdout.splitlines() if x.startswith("plan:")), "")
    return CurvePoint(done.wall_s, done.peak_mib, plan.removeprefix("plan: "))


def status_closed(where: Where) -> CurvePoint:
    """``status OUT`` with the snapshot of the head."""
    done = run_cli(["status", str(where.run.closed)])
    return CurvePoint(done.wall_s, done.peak_mib)


def import_fresh(where: Where) -> CurvePoint:
    """``import OUT`` of a linked copy of the run 0.7.0 wrote (copy not timed)."""
    folder = where.scratch / f"import-{where.round}"
    out = linked_copy(where.run.gen, folder)
    try:
        done = run_cli(["import", str(out), "-q"])
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return CurvePoint(done.wall_s, done.peak_mib)


def _plan_alone(out: Path, tools: Path, ctx: Context) -> Measured:
    # In the spawned child: the two files read as the CLI reads them (not
    # timed), then the open and the dry-run resume, timed.
    from cli.config_files import load_config, load_global_config
    from ledger.run.ledger import Ledger
    from projections import resume

    config = load_config(tools / "collection.yaml")
    servers = load_global_config([tools / "servers.yaml"])
    started = time.perf_counter()
    with Ledger.open(out) as led:
        result = resume(led, config, servers, dry_run=True)
    elapsed = time.perf_counter() - started
    counts = result.plan.counts
    return Measured(elapsed, f"{counts.get('dispatch', 0)} to dispatch")


def in_child(fn: Callable[[Context], Measured], where: Where) -> CurvePoint:
    """``fn`` measured in a fresh spawned child: its time, ``VmHWM`` and detail."""
    ctx = Context(where.sizes, Data(), where.scratch, where.round, 0)
    got = measure_in_child(fn, ctx)
    if isinstance(got, Failed | Pending):
        raise RuntimeError(str(got))
    return CurvePoint(got.value, got.rss_mib, got.detail)


def plan_killed(where: Where) -> CurvePoint:
    """Planning alone after a kill: ``Ledger.open`` + ``resume(dry_run=True)``."""
    fn = functools.partial(_plan_alone, where.run.killed, where.tools)
    return in_child(fn, where)


def plan_closed(where: Where) -> CurvePoint:
    """Planning alone with the snapshot of the head."""
    fn = functools.partial(_plan_alone, where.run.closed, where.tools)
    return in_child(fn, where)


def imitate(out: Path, retain: bool, ctx: Context) -> Measured:
    """The imitation of 0.7.0's resume planning on ``out`` (in a spawned child)."""
    from bench.incumbent import plan_resume

    started = time.perf_counter()
    plan = plan_resume(out, retain=retain)
    elapsed = time.perf_counter() - started
    if plan is None:
        raise RuntimeError(f"{out}: 0.7.0 would start fresh")
    kept = f", {len(plan.main_rows)} result rows kept" if retain else ""
    return Measured(elapsed, f"{len(plan.to_run)} to dispatch{kept}")


def _real(where: Where, *, lean: bool) -> CurvePoint:
    assert where.incumbent is not None
    dump = where.scratch / "real_keys.tsv" if lean else None
    done = where.incumbent.run(where.run.gen, lean=lean, dump=dump)
    return CurvePoint(done.wall_s, done.peak_mib, done.detail(), done.plan_s)


def real_shipped(where: Where) -> CurvePoint:
    """Real NeMo Gym 0.7.0's resume, as shipped, whole command."""
    return _real(where, lean=False)


def real_lean(where: Where) -> CurvePoint:
    """Real NeMo Gym 0.7.0's resume, lean, whole command (dumps its keys)."""
    return _real(where, lean=True)


SIDES: tuple[CurveSide, ...] = (
    CurveSide("resume-kill", "ours: resume --dry-run after a kill", resume_killed),
    CurveSide(
        "resume-close", "ours: resume --dry-run after a clean close", resume_closed
    ),
    CurveSide(
        "resume-nosnap",
        "ours: resume --dry-run with no snapshot (worst case)",
        resume_nosnap,
    ),
    CurveSide(
        "resume-real",
        "ours: resume (recording its release) after a clean close",
        resume_real,
    ),
    CurveSide(
        "resume-real-kill",
        "ours: resume (recording its release) after a kill",
        resume_real_killed,
    ),
    CurveSide("plan-kill", "ours: planning alone after a kill", plan_killed),
    CurveSide("plan-close", "ours: planning alone after a clean close", plan_closed),
    CurveSide("status", "ours: status after a clean close", status_closed),
    CurveSide("import", "ours: import of the run 0.7.0 wrote", import_fresh),
    CurveSide(
        "real-shipped", "real NeMo Gym 0.7.0, as shipped", real_shipped, real=True
    ),
    CurveSide(
        "real-lean",
        "real NeMo Gym 0.7.0, lean (retain_results_in_memory=false)",
        real_lean,
        real=True,
    ),
    # Issue 30: the reads of a large run.
    CurveSide("verify", "ours: verify (every check, every byte)", verify_closed),
    CurveSide("report-first", "ours: report, the first after a verify", report_first),
    CurveSide(
        "report-kept", "ours: report of a log unmoved since the last", report_kept
    ),
    CurveSide(
        "report-noverify", "ours: report --no-verify, nothing kept", report_noverify
    ),
    CurveSide("view-list", "ours: the viewer's runs page, cold", view_list),
    CurveSide(
        "view-pages",
        "ours: the viewer's filtered page and one rollout, the run read",
        view_pages,
    ),
)


def _ledger_keys(out: Path, tools: Path, keys: Path, ctx: Context) -> Measured:
    # compare_dispatch.py's ledger side: keys, then .rejudge and .held lines.
    import json

    from cli.config_files import load_config, load_global_config
    from ledger.run.ledger import Ledger
    from projections import resume

    config = load_config(tools / "collection.yaml")
    servers = load_global_config([tools / "servers.yaml"])
    with Ledger.open(out) as led:
        plan = resume(led, config, servers, dry_run=True).plan
    lines = [
        f"{r['_ng_task_index']}\t{r['_ng_rollout_index']}\t"
        f"{r.get('_ng_attempt_index', 0)}\n"
        for r in plan.dispatch
    ]
    keys.write_text("".join(lines))
    rejudge = [{"task": x.task, "rollout": x.rollout} for x in plan.rejudge]
    held = [
        {"task": x.task, "rollout": x.rollout, "reason": x.reason} for x in plan.held
    ]
    for suffix, items in ((".rejudge", rejudge), (".held", held)):
        text = "".join(json.dumps(item) + "\n" for item in items)
        keys.with_name(keys.name + suffix).write_text(text)
    return Measured(0.0, f"{len(lines)} {len(rejudge)} {len(held)}")


def _imitation_keys(out: Path, keys: Path, ctx: Context) -> Measured:
    from bench.incumbent import dispatch_keys, plan_resume

    plan = plan_resume(out, retain=False)
    assert plan is not None
    keys.write_text("".join(f"{t}\t{r}\t{a}\n" for t, r, a in dispatch_keys(plan)))
    return Measured(0.0)


def dump_ledger(where: Where, keys: Path) -> None:
    """The ledger's keys after a clean close, for ``compare_dispatch.py``."""
    in_child(
        functools.partial(_ledger_keys, where.run.closed, where.tools, keys), where
    )


def dump_imitation(where: Where, keys: Path) -> None:
    """The imitation's keys to dispatch (lean: the same keys as shipped)."""
    in_child(functools.partial(_imitation_keys, where.run.gen, keys), where)
