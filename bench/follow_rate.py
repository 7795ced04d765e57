"""Issue 19 (``RUN``): recording a collector's rows by following its file.

Ours is what ``rollout-ledger run`` does while its collector runs: P-7's rows
(~1 KB, first attempts, outcomes as in a run), released as a round's plan, are
appended to the round's ``output.jsonl`` by a separate process writing 20 rows
a write, 2 ms apart (at most 10,000 rows a second), while the round recorder
the command uses (``projections.operations.round_files``) reads the complete new lines
and records them through ``record``'s path (each attempt reserved and
recorded in one transaction per read). A read follows at once when the last
one found rows, else after 0.2 s (the command waits up to 0.2 s on its
collector between reads), so the figure is what following can take. Rate:
events appended (reservations and saves) per second, from the collector's
start to the last row recorded. The baseline is P-7's own side: the same rows
through ``AsyncRecorder`` with 256 concurrent tasks.
"""

from __future__ import annotations

import io
import subprocess
import sys
import time

import msgspec

from bench.context import Context, Measured
from bench.recorder_rate import create_p7_run, p7_ours, p7_rows
from cli.render.progress import RoundProgressLine
from ledger import Ledger, RunLock, derived_rollout_id
from ledger.events import AttemptsReleased
from projections.operations.recorded import Recorded
from projections.operations.round_files import RoundFiles, RoundRecorder
from projections.operations.run_loop import POLL_SECONDS, RoundProgress

__all__ = ["run_baseline", "run_ours", "run_progress"]

_APPENDER = r"""
import sys, time
lines = open(sys.argv[1], "rb").read().splitlines(keepends=True)
with open(sys.argv[2], "ab") as out:
    for start in range(0, len(lines), 20):
        out.write(b"".join(lines[start:start + 20]))
        out.flush()
        time.sleep(0.002)
"""


def _key(row: dict[str, object]) -> tuple[int, int]:
    task, rollout = row["_ng_task_index"], row["_ng_rollout_index"]
    if not isinstance(task, int) or not isinstance(rollout, int):
        raise TypeError(f"a P-7 row without integer indices: {row!r:.200}")
    return task, rollout


def _follow(ctx: Context, *, progress: bool) -> Measured:
    """Events per second recorded while a collector appends its rows.

    ``progress``: as ``run`` does on a terminal (issue 28), failures counted
    by side and a ``RoundProgress`` drawn after every read, to a terminal
    line redrawn twice a second (written to memory here).
    """
    rows = p7_rows(ctx)
    out = create_p7_run(ctx.scratch, rows)
    for row in rows:
        row["_ng_attempt_index"] = 0
        # As a plan file gives it (issue 25), and the collector copies it back.
        row.setdefault("_ng_rollout_id", derived_rollout_id(*_key(row)))
    encoded = [msgspec.json.encode(row) + b"\n" for row in rows]
    source = ctx.scratch / "collector_rows.jsonl"
    source.write_bytes(b"".join(encoded))
    keys = tuple((r["_ng_task_index"], r["_ng_rollout_index"], 0) for r in rows)
    line = RoundProgressLine(stream=_Terminal())
    with RunLock(out) as lock, Ledger.open(out, lock=lock) as led:
        led.append(AttemptsReleased(dispatch=keys))
        files = RoundFiles.of(led, 1)
        with open(files.plan, "wb") as plan:
            plan.writelines(encoded)
        recorder = RoundRecorder(led, files, sides=progress)
        first = led.head()[0]
        started = time.perf_counter()
        command = [sys.executable, "-c", _APPENDER, str(source), files.output]
        recorded = Recorded()
        with subprocess.Popen(command) as appender:
            polls = 0
            while appender.poll() is None:
                polls += 1
                found = recorder.record()
                recorded.add(found)
                if progress:
                    line(_where(recorded, len(rows), started))
                if not found.rows:  # caught up: wait as `run` does
                    time.sleep(POLL_SECONDS)
        recorded.add(recorder.record(final=True))
        elapsed = time.perf_counter() - started
        events = led.head()[0] - first
    assert not recorded.refused, recorded.refused[:3]
    assert recorded.rows == len(rows), (recorded.rows, len(rows))
    detail = f"{events} events from {len(rows)} rows, {polls} reads while it appended"
    if progress:
        detail += f", {line.lines} progress lines drawn"
    return Measured(events / elapsed, detail)


class _Terminal(io.StringIO):
    """A terminal that keeps what is drawn in memory."""

    def isatty(self) -> bool:
        return True


def _where(recorded: Recorded, planned: int, started: float) -> RoundProgress:
    seconds = time.perf_counter() - started
    return RoundProgress(
        1, planned, recorded.rows, len(recorded.refused), recorded.failures, seconds
    )


def run_ours(ctx: Context) -> Measured:
    """Events per second recorded while a collector appends its rows."""
    return _follow(ctx, progress=False)


def run_progress(ctx: Context) -> Measured:
    """The same, with ``run``'s progress on (issue 28)."""
    return _follow(ctx, progress=True)


def run_baseline(ctx: Context) -> Measured:
    """P-7's side: the same rows through ``AsyncRecorder``, 256 tasks."""
    return p7_ours(ctx)
