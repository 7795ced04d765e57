"""Preparing the datasets the chosen targets need, once per harness run."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from bench import incumbent
from bench.context import Data
from bench.recorder_rate import recorder_stream
from bench.rowpool import REPO_ROOT, RowPool, fixture_pool
from bench.runs import (
    BuiltRun,
    build_run,
    closed_copy,
    event_stream,
    resume_cleanly,
    write_stream,
)
from bench.scenario import make_plan
from bench.shapes import Shapes, Written, older_shapes, shapes_070, write_run
from bench.sizes import GROUP, Sizes
from bench.targets import Target

__all__ = ["prepare", "trimmed"]

Log = Callable[[str], None]
_CHARS, _ITEMS = 64, 16  # kept of each string and each list in the replay log's rows


def trimmed(pool: RowPool) -> RowPool:
    """The fixture templates with strings and lists cut short: real shapes, small rows.

    The replay log needs ~1M events, not ~9 GB of rows; an event's facts
    depend on a row's structure, which trimming keeps.
    """

    def cut(value: Any) -> Any:
        if isinstance(value, str):
            return value[:_CHARS]
        if isinstance(value, dict):
            return {k: cut(v) for k, v in value.items()}
        if isinstance(value, list):
            return [cut(v) for v in value[:_ITEMS]]
        return value

    templates = tuple(cut(t) for t in pool.templates)
    return RowPool(
        templates,
        f"{pool.source}, cut to {_CHARS} characters a string, {_ITEMS} items a list",
    )


def _rollouts_for(events: int, seed: int) -> int:
    # Events per rollout of a pilot plan: one reservation per attempt reserved,
    # one save per attempt recorded and not killed (releases are negligible).
    pilot = make_plan(2000, seed=seed)
    saved = sum(1 for o in pilot.outcomes for x in o if x != "killed")
    per_rollout = (pilot.reserved + saved * pilot.recorded / pilot.attempts) / 2000
    return max(8, round(events / per_rollout))


def _describe(name: str, run: BuiltRun) -> str:
    return (
        f"{name}: {run.rollouts} rollouts, {run.attempts} attempts, "
        f"{run.events} events, {run.disk_bytes / 2**20:.0f} MiB on disk, "
        f"built in {run.seconds:.1f} s"
    )


def prepare(
    targets: Iterable[Target], sizes: Sizes, workdir: Path, *, seed: int, log: Log
) -> tuple[Data, list[str]]:
    """Build what ``targets`` need under ``workdir``; returns it and a description."""
    needs = {name for t in targets for name in t.needs}
    notes: list[str] = []
    data: dict[str, Path] = {}
    if "resume_closed" in needs:
        needs.add("resume_run")
    if "replay_snapshot" in needs:
        needs.add("replay_log")
    pool = (
        fixture_pool(seed=seed)
        if needs & {"stream", "resume_run", "replay_log", "ng07"}
        else None
    )
    if pool is not None:
        notes.append(f"rows sampled from: {pool.source}")
    if "resume_run" in needs:
        notes.append(f"P-4: the incumbent parses with {incumbent.PARSER}")
    if "stream" in needs and pool is not None:
        count = max(sizes.single_appends, sizes.group_batches * GROUP)
        data["stream"] = workdir / "stream.jsonl"
        write_stream(data["stream"], event_stream(count, pool, seed=seed))
        notes.append(
            f"P-1/P-2 stream: {count} reservation and save events of those rows"
        )
    if "recorder_events" in needs:
        data["recorder_events"] = workdir / "recorder_events.jsonl"
        write_stream(
            data["recorder_events"], recorder_stream(sizes.recorder_rollouts, seed=seed)
        )
        notes.append(
            f"P-7: {sizes.recorder_rollouts} synthetic rows of ~1 KB, one attempt each"
        )
    for name, rollouts, rows in _runs(needs, sizes, pool, seed):
        log(f"building the {name} ({rollouts} rollouts) ...")
        started = time.perf_counter()
        run = build_run(
            workdir / name / "rollouts.jsonl", rollouts=rollouts, pool=rows, seed=seed
        )
        log(f"built the {name} in {time.perf_counter() - started:.1f} s")
        data[name] = run.out
        notes.append(_describe(name, run))
    if "resume_closed" in needs:
        started = time.perf_counter()
        data["resume_closed"] = closed_copy(data["resume_run"], workdir / "closed")
        notes.append(
            "resume_closed: resume_run after a clean close (a real resume appended "
            "its release and saved the snapshot of the head), made in "
            f"{time.perf_counter() - started:.1f} s"
        )
    if "ng07" in needs and pool is not None:
        notes += _ng07(data, sizes, workdir, trimmed(pool), seed=seed, log=log)
    if "replay_snapshot" in needs:
        started = time.perf_counter()
        head = resume_cleanly(data["replay_log"])
        notes.append(
            f"replay_log: then resumed once (head {head}, its snapshot saved), in "
            f"{time.perf_counter() - started:.1f} s"
        )
    return Data(**data), notes


def _ng07(
    data: dict[str, Path],
    sizes: Sizes,
    workdir: Path,
    pool: RowPool,
    *,
    seed: int,
    log: Log,
) -> list[str]:
    """Issue 15: one plan written as 0.7.0's rows and as older rows, no ledger."""
    plan = make_plan(sizes.resume_rollouts, seed=seed)
    notes = []
    sides: tuple[tuple[str, Shapes], ...] = (
        ("ng07_run", shapes_070()),
        ("ng07_older", older_shapes(pool)),
    )
    for name, shapes in sides:
        log(f"writing the {name} ({sizes.resume_rollouts} rollouts) ...")
        started = time.perf_counter()
        written: Written = write_run(
            workdir / name / "rollouts.jsonl", plan, shapes, seed=seed
        )
        data[name] = written.out
        source = shapes.source.replace(str(REPO_ROOT.parent), "..")
        notes.append(
            f"{name}: {written.rollouts} rollouts, {written.main_rows} rows in OUT, "
            f"{written.sidecar_rows} in the sidecar, {written.bytes / 2**20:.0f} MiB "
            f"of collector files and no ledger (rows from {source}), written "
            f"in {time.perf_counter() - started:.1f} s"
        )
    return notes


def _runs(
    needs: set[str], sizes: Sizes, pool: RowPool | None, seed: int
) -> list[tuple[str, int, RowPool]]:
    runs = []
    if "resume_run" in needs and pool is not None:
        runs.append(("resume_run", sizes.resume_rollouts, pool))
    if "replay_log" in needs and pool is not None:
        runs.append(
            ("replay_log", _rollouts_for(sizes.replay_events, seed), trimmed(pool))
        )
    return runs
