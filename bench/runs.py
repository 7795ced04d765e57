"""Building the runs and event streams the targets measure (deterministic, seeded)."""

from __future__ import annotations

import os
import random
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from bench.manifest import (
    AGENT_REF,
    RUN_ID,
    collection_config,
    run_manifest,
    servers_config,
)
from bench.mirror import Ends, Saved, outcome_row, reserved_event, saved_event
from bench.rowpool import RowPool
from bench.scenario import Attempt, Plan, make_plan
from bench.sizes import GROUP
from ledger.clock import Clock
from ledger.events import AttemptsReleased, Event, ResumeStarted, encode_body
from ledger.paths import RunPaths
from ledger.run.ledger import Ledger
from ledger.run.lock import RunLock

__all__ = [
    "BuiltRun",
    "build_run",
    "closed_copy",
    "event_stream",
    "recorder_rows",
    "resume_cleanly",
    "write_stream",
]


@dataclass(frozen=True)
class BuiltRun:
    """A run on disk and what went into it."""

    out: Path
    rollouts: int
    attempts: int  # reserved before the crash
    events: int
    disk_bytes: int
    seconds: float


class _Run:
    """One run being built: its ledger, templates and collector files."""

    def __init__(
        self, led: Ledger, plan: Plan, pool: RowPool, picks: list[int], run_id: str
    ):
        self.led, self.plan, self.pool, self.picks = led, plan, pool, picks
        self.run_id = run_id
        paths = led.paths
        self.out_name = paths.relative(paths.out)
        self.sidecar_name = paths.relative(paths.sidecar)
        self.ends = Ends()
        self.handles: dict[str, IO[bytes]] = {}

    def rows(self, attempts: Sequence[Attempt]) -> list[dict[str, Any]]:
        """The rows a collector hands over for ``attempts``."""
        return [
            outcome_row(
                self.pool.templates[self.picks[a.rollout]],
                self.plan.key(a.rollout),
                a.attempt,
                a.outcome,
            )
            for a in attempts
        ]

    def direct(self, rows: list[dict[str, Any]], recorded: int) -> None:
        """Reserve ``rows`` and record the first ``recorded``, as the recorder does."""
        # The recorder's order: reservations, then rows written and fsynced,
        # then their events (EV-12).
        self.led.append_many([reserved_event(row, self.run_id) for row in rows])
        saved = [self._saved(row) for row in rows[:recorded]]
        kept = [s for s in saved if s is not None]
        self._write(kept)
        if kept:
            self.led.append_many([s.event for s in kept])

    def _saved(self, row: dict[str, Any]) -> Saved | None:
        return saved_event(row, self.ends, out=self.out_name, sidecar=self.sidecar_name)

    def _write(self, saved: list[Saved]) -> None:
        touched = set()
        for item in saved:
            if item.file not in self.handles:
                path = self.led.paths.folder / item.file
                self.handles[item.file] = open(path, "ab")  # noqa: SIM115
            self.handles[item.file].write(item.data)
            touched.add(item.file)
        for name in touched:
            self.handles[name].flush()
            os.fsync(self.handles[name].fileno())

    def close(self) -> None:
        """Close the collector files."""
        for handle in self.handles.values():
            handle.close()


def _releases(
    hop: int, attempts: Sequence[Attempt], plan: Plan, config_digest: str
) -> list[Event]:
    keys = tuple((*plan.key(a.rollout), a.attempt) for a in attempts)
    released = AttemptsReleased(dispatch=keys)
    if hop == 0:
        return [released]
    counts = {"dispatch": len(keys)}
    return [ResumeStarted(config_digest=config_digest, counts=counts), released]


def _chunks(items: Sequence[Attempt], size: int) -> Iterator[Sequence[Attempt]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _inputs(plan: Plan, pool: RowPool, picks: list[int]) -> list[dict[str, Any]]:
    rows = []
    for i, pick in enumerate(picks):
        task, rollout = plan.key(i)
        rows.append(
            pool.input_of(pick) | {"_ng_task_index": task, "_ng_rollout_index": rollout}
        )
    return rows


def _disk_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def _play(run: _Run, *, config_digest: str, via_api: bool) -> None:
    done = 0
    for hop, attempts in enumerate(run.plan.hops()):
        run.led.append_many(_releases(hop, attempts, run.plan, config_digest))
        for chunk in _chunks(attempts, GROUP):
            rows = run.rows(chunk)
            recorded = max(0, min(len(rows), run.plan.recorded - done))
            done += len(rows)
            if via_api:
                run.led.reserve_many(rows)
                run.led.record_many(rows[:recorded])
            else:
                run.direct(rows, recorded)


def _one_agent(pool: RowPool) -> RowPool:
    # The configuration defines one agent: a row naming an agent names it.
    templates = tuple(
        t | {"agent_ref": dict(AGENT_REF)} if "agent_ref" in t else t
        for t in pool.templates
    )
    return RowPool(templates, pool.source)


def build_run(
    out: Path, *, rollouts: int, pool: RowPool, seed: int, via_api: bool = False
) -> BuiltRun:
    """Create the run of ``make_plan(rollouts, seed=seed)`` at ``out``.

    The run carries a real ``RunManifest`` of ``bench.manifest``'s
    configuration, so a resume with that configuration passes the gate.
    """
    started = time.perf_counter()
    plan = make_plan(rollouts, seed=seed)
    pool = _one_agent(pool)
    rng = random.Random(seed)
    picks = [rng.randrange(len(pool.templates)) for _ in range(rollouts)]
    inputs = _inputs(plan, pool, picks)
    out.parent.mkdir(parents=True, exist_ok=True)
    with RunLock(out) as lock:
        manifest = run_manifest(inputs, seed=seed)
        clock = Clock(seed=seed)
        with Ledger.create(out, manifest, inputs, lock=lock, clock=clock) as led:
            run = _Run(led, plan, pool, picks, manifest.run_id)
            try:
                _play(run, config_digest=manifest.config_digest, via_api=via_api)
            finally:
                run.close()
            events = led.head()[0]
    seconds = time.perf_counter() - started
    disk = _disk_bytes(out.parent)
    return BuiltRun(out, rollouts, plan.reserved, events, disk, seconds)


def resume_cleanly(out: Path) -> int:
    """A real (non-dry) resume of the run, as a collector's restart does it.

    It appends ``resume_started`` and the release, publishes, and saves the
    snapshot of the head (EV-14): the state a clean close leaves for the next
    resume. Returns the head's seq.
    """
    from projections import resume

    with RunLock(out) as lock, Ledger.open(out, lock=lock) as led:
        resume(led, collection_config(), servers_config())
        return led.head()[0]


def closed_copy(out: Path, folder: Path) -> Path:
    """The run at ``out`` after a clean close, under ``folder``; returns its OUT.

    The collector files are hard links (a resume only reads them; copied
    where linking fails), the ledger folder a copy, on which
    :func:`resume_cleanly` then runs.
    """
    source, target = RunPaths.of(out), RunPaths.of(folder / out.name)
    folder.mkdir(parents=True, exist_ok=True)
    for old, new in zip(
        source.collector_files(), target.collector_files(), strict=True
    ):
        if not old.exists():
            continue
        try:
            os.link(old, new)
        except OSError:
            shutil.copy2(old, new)
    shutil.copytree(source.ledger_dir, target.ledger_dir)
    resume_cleanly(target.out)
    return target.out


def event_stream(count: int, pool: RowPool, *, seed: int) -> list[bytes]:
    """The encoded bodies of a run's first ``count`` reservations and saves."""
    rng = random.Random(seed)
    plan = make_plan(max(1, count // 2 + GROUP), seed=seed)
    paths = RunPaths.of("rollouts.jsonl")
    out_name, sidecar_name = paths.out.name, paths.sidecar.name
    ends = Ends()
    bodies: list[bytes] = []
    for attempts in plan.hops():
        for chunk in _chunks(attempts, GROUP):
            picks = [pool.templates[rng.randrange(len(pool.templates))] for _ in chunk]
            rows = [
                outcome_row(t, plan.key(a.rollout), a.attempt, a.outcome)
                for t, a in zip(picks, chunk, strict=True)
            ]
            bodies += [encode_body(reserved_event(row, RUN_ID)) for row in rows]
            saved = [
                saved_event(r, ends, out=out_name, sidecar=sidecar_name) for r in rows
            ]
            bodies += [encode_body(s.event) for s in saved if s is not None]
            if len(bodies) >= count:
                return bodies[:count]
    return bodies


def write_stream(path: Path, bodies: Sequence[bytes]) -> None:
    """Save encoded bodies one a line (a body's JSON never holds a raw newline)."""
    path.write_bytes(b"\n".join(bodies) + b"\n")


def recorder_rows(count: int, pool: RowPool, *, seed: int) -> list[dict[str, Any]]:
    """P-7's rows: first attempts of ``count`` rollouts, outcomes as in a run."""
    plan = make_plan(count, seed=seed)
    rows = []
    for i, outcomes in enumerate(plan.outcomes):
        template = pool.templates[i % len(pool.templates)]
        rows.append(outcome_row(template, plan.key(i), 0, outcomes[0]))
    return rows
