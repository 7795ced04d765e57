"""SC-7: writers and replay on SQLite and PostgreSQL, side by side.

``python -m bench.scale [--quick] [--out bench/RESULTS.md]`` measures, in
alternating rounds (each side in a fresh spawned child, ``bench.child``):

- one SQLite writer: ``reserve_many`` then ``record_many`` of BATCH rows at a
  time into a file-based run, as one collector process does;
- one PostgreSQL writer: the same, one worker process (no run lock, SC-4)
  recording into a run on PostgreSQL;
- 8 PostgreSQL writers: 8 worker processes recording into one run, each its
  eighth of the rows; the ratio is their rate over 8x the single PostgreSQL
  writer's of the same round (1.0 would be perfect scaling);
- replay of ~1M events (``--quick``: 100k): ``replay(led)`` of one log on
  SQLite and of the same events imported into PostgreSQL.

Rows are the P-7 rows (``bench.runs.recorder_rows``, ~1 KB); the replay log is
built as P-3's is (``bench.runs.build_run``) with smaller rows, which replay
never reads. Events per second; never a timed test. With ``--out`` only the
section between the SC-7 markers of that file is written (appended if absent).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shlex
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import psycopg

from bench.child import Failed, Measure, Pending, measure_in_child
from bench.context import Measured, Sample
from bench.manifest import BenchManifest
from bench.report import fmt, machine
from bench.rowpool import compact_pool
from bench.runs import build_run, recorder_rows
from bench.scenario import make_plan
from ledger.events import AttemptsReleased
from ledger.postgres.schema import SCHEMA
from ledger.run.ledger import Ledger
from ledger.run.lock import RunLock

__all__ = [
    "END",
    "START",
    "ScaleSizes",
    "main",
    "pg_writer_rows",
    "section",
    "write_section",
]

START, END = "<!-- sc7:start -->", "<!-- sc7:end -->"
STORE_ENV = "ROLLOUT_LEDGER_STORE"
DEFAULT_STORE = "postgresql://postgres@127.0.0.1:5432/test"
WRITERS = 8
SEED = 20260101
RATE = "ev/s"
_KEYS = ("_ng_task_index", "_ng_rollout_index")
_OUTPUTS = ("response", "reward", "mask_sample")


@dataclass(frozen=True)
class ScaleSizes:
    """The amount of work of one mode."""

    mode: str
    rounds: int
    writer_rollouts: int  # rows reserved and recorded per writer measurement
    batch: int  # rows per reserve_many / record_many
    replay_events: int  # events of the replayed log


FULL = ScaleSizes("full", 3, 16_000, 64, 1_000_000)
QUICK = ScaleSizes("quick", 3, 4_000, 64, 100_000)
TINY = ScaleSizes("tiny", 1, 160, 16, 2_000)


@dataclass(frozen=True)
class ScaleContext:
    """What one measurement needs: sizes, the store, the replay logs, scratch."""

    sizes: ScaleSizes
    store: str
    scratch: Path
    seed: int
    replay_sqlite: Path | None = None
    replay_pg: str | None = None


# -- writers ---------------------------------------------------------------------


def _rows(ctx: ScaleContext) -> list[dict[str, Any]]:
    pool = compact_pool(seed=ctx.seed)
    return recorder_rows(ctx.sizes.writer_rollouts, pool, seed=ctx.seed)


def _inputs(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    def is_input(key: str) -> bool:
        return key in _KEYS or not (key.startswith("_ng_") or key in _OUTPUTS)

    return [{k: v for k, v in row.items() if is_input(k)} for row in rows]


def _create(out: str | Path, rows: Sequence[dict[str, Any]]) -> None:
    """Create the run and release every row's attempt (REC-3), as a coordinator."""
    inputs = _inputs(rows)
    keys = tuple((r["_ng_task_index"], r["_ng_rollout_index"], 0) for r in rows)
    with (
        RunLock(out) as lock,
        Ledger.create(out, BenchManifest(inputs), inputs, lock=lock) as led,
    ):
        led.append(AttemptsReleased(dispatch=keys))


def _record(led: Ledger, rows: Sequence[dict[str, Any]], batch: int) -> None:
    for start in range(0, len(rows), batch):
        chunk = rows[start : start + batch]
        led.reserve_many(chunk)
        led.record_many(chunk)


def sqlite_writer(ctx: ScaleContext) -> Measured:
    """One writer on SQLite: events per second of reserve + record batches."""
    rows = _rows(ctx)
    out = ctx.scratch / "rollouts.jsonl"
    _create(out, rows)
    with RunLock(out) as lock, Ledger.open(out, lock=lock) as led:
        first = led.head()[0]
        started = time.perf_counter()
        _record(led, rows, ctx.sizes.batch)
        elapsed = time.perf_counter() - started
        events = led.head()[0] - first
    return Measured(events / elapsed, f"{events} events, {len(rows)} rows")


def _writer(
    url: str, rows: list[dict[str, Any]], batch: int, conn: Any, go: Any
) -> None:
    with Ledger.open(url) as led:  # a worker: no run lock (SC-4)
        conn.send("ready")
        go.wait()
        started = time.monotonic()
        _record(led, rows, batch)
        conn.send((started, time.monotonic()))
    conn.close()


def _pg_spans(ctx: ScaleContext, writers: int) -> tuple[int, int, float]:
    """``writers`` processes record every row into one run: events, rows, seconds."""
    rows = _rows(ctx)
    url = f"{ctx.store}?run=bench-sc7-{uuid.uuid4().hex[:12]}"
    spawn = multiprocessing.get_context("spawn")
    go = spawn.Event()
    try:
        _create(url, rows)
        with Ledger.open(url) as led:
            first = led.head()[0]
        pipes, processes = [], []
        for i in range(writers):
            receiver, sender = spawn.Pipe(duplex=False)
            args = (url, rows[i::writers], ctx.sizes.batch, sender, go)
            processes.append(spawn.Process(target=_writer, args=args))
            processes[-1].start()
            sender.close()
            pipes.append(receiver)
        for pipe in pipes:
            assert pipe.recv() == "ready"
        go.set()
        spans = [pipe.recv() for pipe in pipes]
        for process in processes:
            process.join()
        with Ledger.open(url) as led:
            events = led.head()[0] - first
    finally:
        drop_run(url)
    elapsed = max(end for _, end in spans) - min(start for start, _ in spans)
    return events, len(rows), elapsed


def _pg_writers(ctx: ScaleContext, writers: int) -> Measured:
    events, rows, elapsed = _pg_spans(ctx, writers)
    return Measured(
        events / elapsed, f"{events} events, {rows} rows, {writers} processes"
    )


def pg_writer_rows(
    store: str, scratch: Path, writers: int, rollouts: int
) -> dict[str, Any]:
    """Rows per second of ``writers`` independent writers recording ``rollouts``
    rows into one run (``bench.workers``' baseline, issue 29)."""
    sizes = ScaleSizes("workers", 1, rollouts, 64, 0)
    ctx = ScaleContext(sizes, store, scratch, SEED)
    _, rows, elapsed = _pg_spans(ctx, writers)
    return {"rows": rows, "seconds": elapsed, "rate": rows / elapsed}


def pg_writer(ctx: ScaleContext) -> Measured:
    """One worker process recording into a run on PostgreSQL."""
    return _pg_writers(ctx, 1)


def pg_writers(ctx: ScaleContext) -> Measured:
    """WRITERS worker processes recording into one run on PostgreSQL."""
    return _pg_writers(ctx, WRITERS)


def drop_run(url: str) -> None:
    """Remove a run the benchmark made from every table of the store."""
    conninfo, _, run = url.rpartition("?run=")
    with psycopg.connect(conninfo, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.columns "
            "WHERE table_schema = %s AND column_name = 'run' AND table_name <> 'runs'",
            (SCHEMA,),
        ).fetchall()
        for (table,) in [*tables, ("runs",)]:
            conn.execute(f"DELETE FROM {SCHEMA}.{table} WHERE run = %s", (run,))


# -- replay ----------------------------------------------------------------------


def _replay(where: str | Path) -> Measured:
    from projections import replay

    with Ledger.open(where) as led:
        events = led.head()[0]
        started = time.perf_counter()
        state = replay(led, use_snapshot=False)
        elapsed = time.perf_counter() - started
    if state.as_of_seq != events:
        raise RuntimeError(f"replayed to seq {state.as_of_seq}, not {events}")
    return Measured(events / elapsed, f"{events} events in {elapsed:.2f} s")


def sqlite_replay(ctx: ScaleContext) -> Measured:
    """``replay(led)`` of the log on SQLite: events per second."""
    assert ctx.replay_sqlite is not None
    return _replay(ctx.replay_sqlite)


def pg_replay(ctx: ScaleContext) -> Measured:
    """``replay(led)`` of the same events on PostgreSQL: events per second."""
    assert ctx.replay_pg is not None
    return _replay(ctx.replay_pg)


def _rollouts_for(events: int, seed: int) -> int:
    # As bench.datasets sizes P-3's log: events per rollout of a pilot plan.
    pilot = make_plan(2000, seed=seed)
    saved = sum(1 for o in pilot.outcomes for x in o if x != "killed")
    per_rollout = (pilot.reserved + saved * pilot.recorded / pilot.attempts) / 2000
    return max(8, round(events / per_rollout))


def prepare_replay(
    sizes: ScaleSizes, store: str, workdir: Path, seed: int
) -> tuple[Path, str, str]:
    """The replay log on SQLite, the same events on PostgreSQL, and a note."""
    from ledger.postgres.copy import import_into_store

    started = time.perf_counter()
    rollouts = _rollouts_for(sizes.replay_events, seed)
    pool = compact_pool(seed=seed, size=256)
    built = build_run(
        workdir / "replay" / "rollouts.jsonl", rollouts=rollouts, pool=pool, seed=seed
    )
    made = time.perf_counter()
    url = f"{store}?run=bench-sc7-replay-{uuid.uuid4().hex[:12]}"
    with Ledger.open(built.out) as source:
        import_into_store(source, url)
    note = (
        f"replay log: {built.rollouts} rollouts, {built.events} events, rows of "
        f"~256 B ({pool.source}); built on SQLite in {made - started:.0f} s, "
        f"imported into PostgreSQL in {time.perf_counter() - made:.0f} s"
    )
    return built.out, url, note


# -- rounds ----------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """One measured figure: its name, what it is, and the function that measures."""

    name: str
    what: str
    fn: Callable[[ScaleContext], Measured]


WRITER_SIDES = (
    Side(
        "SQLite, 1 writer",
        "file-based run, the writer with the run lock",
        sqlite_writer,
    ),
    Side("PostgreSQL, 1 writer", "one worker process, run on PostgreSQL", pg_writer),
    Side(
        f"PostgreSQL, {WRITERS} writers",
        f"{WRITERS} worker processes, one run, each 1/{WRITERS} of the rows",
        pg_writers,
    ),
)
REPLAY_SIDES = (
    Side("replay, SQLite", "replay(led) of the log, no snapshot", sqlite_replay),
    Side("replay, PostgreSQL", "the same events imported into PostgreSQL", pg_replay),
)


@dataclass
class Figures:
    """Every side's samples (or failure), by name."""

    samples: dict[str, list[Sample]] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)

    def values(self, name: str) -> list[float]:
        """The measured values of a side, in round order."""
        return [s.value for s in self.samples.get(name, [])]


def _measure(side: Side, ctx: ScaleContext, figures: Figures, rnd: int) -> None:
    if side.name in figures.failures:
        return
    scratch = ctx.scratch / f"{side.name.replace(' ', '_')}-{rnd}"
    scratch.mkdir(parents=True, exist_ok=True)
    mine = ScaleContext(
        ctx.sizes, ctx.store, scratch, ctx.seed, ctx.replay_sqlite, ctx.replay_pg
    )
    try:
        got = measure_in_child(cast(Measure, side.fn), cast(Any, mine))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if isinstance(got, Failed | Pending):
        figures.failures[side.name] = str(got)
        _log(f"{side.name} FAILED:\n{got}")
        return
    figures.samples.setdefault(side.name, []).append(got)
    _log(f"{side.name} round {rnd + 1}: {fmt(got.value, RATE)} ({got.detail})")


def run_rounds(ctx: ScaleContext) -> Figures:
    """Every side's rounds; the order rotates (writers) or alternates (replay)."""
    figures = Figures()
    for rnd in range(ctx.sizes.rounds):
        shift = rnd % len(WRITER_SIDES)
        for side in WRITER_SIDES[shift:] + WRITER_SIDES[:shift]:
            _measure(side, ctx, figures, rnd)
        replays = REPLAY_SIDES if rnd % 2 == 0 else REPLAY_SIDES[::-1]
        for side in replays:
            _measure(side, ctx, figures, rnd)
    return figures


# -- the report ------------------------------------------------------------------


def _stat(values: Sequence[float], unit: str = RATE) -> str:
    if not values:
        return "-"
    median = statistics.median(values)
    return f"{fmt(median, unit)} ({fmt(min(values), unit)} - {fmt(max(values), unit)})"


def _ratios(top: Sequence[float], bottom: Sequence[float], scale: float) -> str:
    paired = [a / (scale * b) for a, b in zip(top, bottom, strict=False)]
    if not paired:
        return "-"
    median = statistics.median(paired)
    return f"{median:.3g}x ({min(paired):.3g}-{max(paired):.3g})"


def table(figures: Figures) -> str:
    """The Markdown table: one row per side, with its paired ratio."""
    pg1 = figures.values(WRITER_SIDES[1].name)
    pg8 = figures.values(WRITER_SIDES[2].name)
    sqlite_replay_values = figures.values(REPLAY_SIDES[0].name)
    ratios = {
        WRITER_SIDES[1].name: "PostgreSQL / SQLite: "
        + _ratios(pg1, figures.values(WRITER_SIDES[0].name), 1),
        WRITER_SIDES[2].name: f"{WRITERS} writers / ({WRITERS} x 1 writer): "
        + _ratios(pg8, pg1, WRITERS),
        REPLAY_SIDES[1].name: "PostgreSQL / SQLite: "
        + _ratios(figures.values(REPLAY_SIDES[1].name), sqlite_replay_values, 1),
    }
    lines = [
        "| measurement | what | events/s: median (min - max) "
        "| ratio, paired per round: median (min-max) |",
        "|---|---|---|---|",
    ]
    for side in (*WRITER_SIDES, *REPLAY_SIDES):
        failure = figures.failures.get(side.name)
        value = (
            "FAILED: " + failure.strip().splitlines()[-1]
            if failure
            else _stat(figures.values(side.name))
        )
        lines.append(
            f"| {side.name} | {side.what} | {value} | {ratios.get(side.name, '')} |"
        )
    return "\n".join(lines)


def _server_version(store: str) -> str:
    try:
        with psycopg.connect(store, connect_timeout=5) as conn:
            row = conn.execute("SHOW server_version").fetchone()
    except psycopg.Error as exc:
        return f"(unavailable: {str(exc).strip().splitlines()[0]})"
    return str(row[0]) if row else "?"


def section(
    figures: Figures,
    *,
    sizes: ScaleSizes,
    command: str,
    notes: Sequence[str],
    store: str,
    seconds: float,
) -> str:
    """The SC-7 section of RESULTS.md, markers included."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    rounds = [
        f"- {name}: "
        + ", ".join(f"{fmt(s.value, RATE)}" for s in samples)
        + f" ({samples[-1].detail})"
        for name, samples in figures.samples.items()
    ]
    lines = [
        START,
        "## SC-7: one machine and beyond (SQLite and PostgreSQL)",
        "",
        f"Mode **{sizes.mode}**, measured {stamp}, wall time {seconds:.0f} s. "
        "Command (from the repository root):",
        "",
        "```",
        command,
        "```",
        "",
        f"Writers reserve then record {sizes.batch} rows a transaction each "
        f"({sizes.writer_rollouts} P-7 rows of ~1 KB per measurement, one attempt "
        "each; a killed-shaped row records nothing). Each side runs in a fresh "
        "spawned child, in an order that rotates every round; the PostgreSQL "
        "writers are worker processes (no run lock, SC-4) started before the "
        "clock and released together; their rate is all events over the span "
        "from the first start to the last finish. Ratios pair the figures of "
        "one round. With fewer cores than writers (see `nproc` below), the "
        "8-writer ratio is bounded by the cores as much as by the store's "
        "serialization of appends (SC-3). A figure, never a timed test.",
        "",
        table(figures),
        "",
        "Rounds:",
        "",
        *rounds,
        "",
        "Data and machine:",
        "",
        *(f"- {note}" for note in notes),
        f"- PostgreSQL server {_server_version(store)} at `{store}` (local, "
        "`synchronous_commit = on`)",
        *machine(),
        END,
    ]
    return "\n".join(lines) + "\n"


def write_section(previous: str, text: str) -> str:
    """``previous`` with its SC-7 section replaced by ``text`` (appended if absent)."""
    head, start, rest = previous.partition(START)
    if not start:
        joiner = (
            ""
            if not previous or previous.endswith("\n\n")
            else ("\n" if previous.endswith("\n") else "\n\n")
        )
        return previous + joiner + text
    _, end, tail = rest.partition(END)
    if not end:
        raise ValueError(f"{START} without {END}: fix the file by hand")
    return head + text.rstrip("\n") + tail


# -- the command -------------------------------------------------------------------


def _log(message: str) -> None:
    print(f"[sc7 {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench.scale",
        description="SC-7: one SQLite writer, one and 8 PostgreSQL writers, and "
        "replay from PostgreSQL vs SQLite, side by side (events per second).",
    )
    parser.add_argument("--quick", action="store_true", help="smaller data")
    parser.add_argument("--rounds", type=int, help="rounds (default by mode)")
    parser.add_argument("--out", type=Path, help="write the SC-7 section there")
    parser.add_argument(
        "--store",
        default=os.environ.get(STORE_ENV) or DEFAULT_STORE,
        help=f"the PostgreSQL store URL (default: ${STORE_ENV} or {DEFAULT_STORE})",
    )
    parser.add_argument("--workdir", type=Path, help="scratch folder")
    parser.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print the table, write the section; 1 when a measurement failed."""
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    sizes = TINY if args.tiny else QUICK if args.quick else FULL
    if args.rounds:
        sizes = ScaleSizes(
            sizes.mode,
            args.rounds,
            sizes.writer_rollouts,
            sizes.batch,
            sizes.replay_events,
        )
    started = time.perf_counter()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="rollout-ledger-sc7-"))
    workdir.mkdir(parents=True, exist_ok=True)
    _log(f"mode {sizes.mode}, scratch {workdir}")
    replay_pg = None
    try:
        _log(f"building the replay log (~{sizes.replay_events} events) ...")
        replay_sqlite, replay_pg, note = prepare_replay(
            sizes, args.store, workdir, SEED
        )
        _log(note)
        ctx = ScaleContext(
            sizes, args.store, workdir / "scratch", SEED, replay_sqlite, replay_pg
        )
        figures = run_rounds(ctx)
    finally:
        if replay_pg is not None:
            drop_run(replay_pg)
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print(table(figures))
    if args.out is not None:
        command = shlex.join(["python", "-m", "bench.scale", *argv])
        text = section(
            figures,
            sizes=sizes,
            command=command,
            notes=[note],
            store=args.store,
            seconds=time.perf_counter() - started,
        )
        previous = args.out.read_text() if args.out.is_file() else ""
        args.out.write_text(write_section(previous, text))
        _log(f"wrote the SC-7 section of {args.out}")
    return 1 if figures.failures else 0


if __name__ == "__main__":
    # Run the module's importable copy, so spawned children find every function
    # under ``bench.scale`` rather than ``__main__``.
    from bench.scale import main as _main

    sys.exit(_main())
