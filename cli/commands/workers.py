"""``rollout-ledger run URL``: a run on PostgreSQL, one coordinator, many workers.

``run URL --config ...`` (no ``--worker``) coordinates: it takes the run lock,
resumes, releases work to the workers, offers again the work of a worker that
died, and stops as ``check`` answers. Given ``-- COMMAND`` it also starts one
worker of its own on this node, so ``run URL ... -- COMMAND`` alone runs the
whole collection as ``run OUT`` does. ``run URL --config ... --worker --
COMMAND`` works: claims a batch, runs COMMAND on it, records its rows, again.
The contract: docs/postgres-run.md.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import uuid
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cli.common import writer
from cli.render.text import plural

if TYPE_CHECKING:
    from projections import CoordinatorReport, Recorded, WorkerReport

__all__ = ["coordinate_run", "work_run", "workers_document", "workers_lines"]

#: Seconds the coordinator gives its own worker to end once the run stopped.
_CHILD_GRACE = 30.0

_STOPS = {
    "complete": "the run is complete",
    "nothing_retryable": "unfinished work remains, none of it retryable",
    "interrupted": "stopped by a signal; the rows so far are recorded, run it again "
    "to go on",
    "no_workers": "no worker was working on the run",
    "no_work": "nothing was left to claim",
    "session_lost": "this worker's PostgreSQL session ended",
    "stalled": "the collector's batches recorded nothing",
}


def _note(text: str) -> None:
    click.echo(f"rollout-ledger: {text}", err=True)


def _default_workdir(url: str, name: str) -> Path:
    run = url.rsplit("run=", 1)[-1].split("&", 1)[0] or "run"
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in run)
    return Path(tempfile.gettempdir()) / f"rollout-ledger-{safe}" / name


def work_run(
    url: str,
    argv: list[str],
    *,
    batch: int,
    workdir: Path | None,
    wait: float,
    round_timeout: float | None,
    progress_every: float,
    quiet: bool,
    as_json: bool,
) -> int:
    """One worker's life: its exit code (0, 3, 75 or 76)."""
    import ledger
    import projections
    from cli.launch.collector import ProcessLauncher, collector_stdout
    from cli.render.progress import RoundProgressLine

    name = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    folder = workdir if workdir is not None else _default_workdir(url, name)
    folder.mkdir(parents=True, exist_ok=True)
    launcher = ProcessLauncher(
        argv, round_timeout=round_timeout, stdout=collector_stdout(as_json)
    )
    progress = RoundProgressLine(every=progress_every, quiet=quiet)
    show = _echo_batch_json if as_json else _echo_batch_text
    with (
        launcher.signals(),
        _workdir_lock(folder),
        ledger.Ledger.open(url) as led,
        closing(progress),
    ):
        if not as_json:
            _note(f"worker {name} works in {folder}")
        last = projections.work_batches(
            led,
            launcher,
            name=name,
            workdir=folder,
            batch=batch,
            wait=wait,
            on_batch=show,
            on_progress=progress,
            on_note=_note,
        )
    show(last)
    return last.exit_code or 0


class _workdir_lock:
    """An exclusive ``flock`` on ``<workdir>/.worker.lock``: one worker a folder."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / ".worker.lock"
        self.handle: Any = None

    def __enter__(self) -> _workdir_lock:
        import fcntl

        self.handle = open(self.path, "a")  # held until __exit__
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            self.handle.close()
            raise click.UsageError(
                f"another worker works in {self.path.parent}; give each worker a "
                "--workdir of its own"
            ) from exc
        return self

    def __exit__(self, *exc: object) -> None:
        self.handle.close()


def _recorded(recorded: Recorded) -> dict[str, Any]:
    return {
        "rows": recorded.rows,
        "skipped": recorded.skipped,
        "events": recorded.events,
        "refused": [
            {"file": r.file, "line": r.line, "message": r.message}
            for r in recorded.refused
        ],
    }


def _batch_document(report: WorkerReport) -> dict[str, Any]:
    import msgspec

    return {
        "schema_version": 1,
        "role": "worker",
        "worker": report.worker,
        "batch": report.batch,
        "claimed": report.claimed,
        "files": None if report.files is None else msgspec.to_builtins(report.files),
        "collector": None
        if report.collector is None
        else msgspec.to_builtins(report.collector),
        "recorded": _recorded(report.recorded),
        "adopted": None if report.adopted is None else _recorded(report.adopted),
        "total_rows": report.total_rows,
        "check": None if report.check is None else msgspec.to_builtins(report.check),
        "stop": report.stop,
        "why": report.why,
        "exit_code": report.exit_code,
    }


def _echo_batch_json(report: WorkerReport) -> None:
    import msgspec

    click.echo(msgspec.json.encode(_batch_document(report), order="sorted").decode())


def _echo_batch_text(report: WorkerReport) -> None:
    if report.adopted is not None and report.adopted.rows + report.adopted.skipped:
        click.echo(
            f"recorded {plural(report.adopted.rows, 'row')} earlier batches in this "
            f"work folder wrote ({report.adopted.skipped} recorded already)"
        )
        report.adopted = None
    for refusal in report.recorded.refused:
        _note(f"{refusal.file} line {refusal.line}: {refusal.message}; not recorded")
    if report.claimed is not None and report.stop is None:
        claimed = report.claimed
        click.echo(
            f"batch {report.batch}: claimed {plural(claimed['dispatch'], 'attempt')} "
            f"and {plural(claimed['rejudge'], 're-judgment')}; recorded "
            f"{plural(report.recorded.rows, 'row')}"
        )
    if report.stop is not None:
        if report.check is not None:
            click.echo(report.check.message)
        click.echo(
            f"worker stopped: {_STOPS[report.stop]}, "
            f"{plural(report.total_rows, 'row')} recorded (exit {report.exit_code})"
        )
        if report.why is not None:
            click.echo(f"why: {report.why}")


def _own_worker(
    url: str,
    config: Path,
    global_configs: tuple[Path, ...],
    argv: list[str],
    *,
    batch: int,
    wait: float,
    as_json: bool,
) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "cli", "run", url, "--config", str(config)]
    for path in global_configs:
        command += ["--global-config", str(path)]
    command += ["--worker", "--batch", str(batch), "--wait", f"{wait:g}", "--quiet"]
    if as_json:
        command.append("--json")
    return subprocess.Popen(
        [*command, "--", *argv], stdout=2 if as_json else None, start_new_session=False
    )


def coordinate_run(
    url: str,
    collection: Any,
    servers: Any,
    argv: list[str],
    options: dict[str, Any],
    *,
    config: Path,
    global_configs: tuple[Path, ...],
    batch: int,
    wait: float,
    as_json: bool,
) -> int:
    """The coordinator's life (and, with ``argv``, one worker's): its exit code."""
    import projections
    from cli.launch.collector import ProcessLauncher

    launcher = ProcessLauncher([])  # its signal handling only: no collector
    child: subprocess.Popen[bytes] | None = None
    with launcher.signals(), writer(url) as led:
        if argv:
            child = _own_worker(
                url,
                config,
                global_configs,
                argv,
                batch=batch,
                wait=wait,
                as_json=as_json,
            )
        try:
            report = projections.coordinate(
                led,
                collection,
                servers,
                interrupted=lambda: launcher.interrupted,
                wait=wait,
                on_note=_note,
                **options,
            )
        finally:
            if child is not None:
                _end_child(child)
    if as_json:  # one line, as run's rounds and a worker's batches are
        import msgspec

        document = {"schema_version": 1, **coordinator_document(report)}
        click.echo(msgspec.json.encode(document, order="sorted").decode())
    else:
        if report.check is not None:
            click.echo(report.check.message)
        click.echo(
            f"coordinator stopped: {_STOPS[report.stop or 'complete']} "
            f"(exit {report.exit_code})"
        )
        if report.why is not None:
            click.echo(f"why: {report.why}")
    return report.exit_code or 0


def _end_child(child: subprocess.Popen[bytes]) -> None:
    try:
        child.wait(_CHILD_GRACE)
    except subprocess.TimeoutExpired:
        child.terminate()
        try:
            child.wait(_CHILD_GRACE)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def coordinator_document(report: CoordinatorReport) -> dict[str, Any]:
    """The coordinator's ``--json`` document (docs/json.md)."""
    import msgspec

    return {
        "role": "coordinator",
        "released": report.released,
        "reaped": [msgspec.to_builtins(r) for r in report.reaped],
        "workers_seen": report.workers_seen,
        "check": None if report.check is None else msgspec.to_builtins(report.check),
        "stop": report.stop,
        "why": report.why,
        "exit_code": report.exit_code,
    }


# -- status --------------------------------------------------------------------


def workers_document(led: Any) -> list[dict[str, Any]] | None:
    """Each worker of a run on PostgreSQL, for ``status --json``; ``None``: files."""
    import msgspec

    import ledger

    if led.folder is not None:
        return None
    board = ledger.WorkBoard.of(led)
    return [msgspec.to_builtins(w) for w in board.workers()]


def workers_lines(workers: list[dict[str, Any]] | None) -> list[str]:
    """``status``'s lines about the workers, in words."""
    if not workers:
        return [] if workers is None else ["workers: none has worked on this run yet"]
    lines = [f"workers ({len(workers)}):"]
    for w in workers:
        if w["state"] == "working" and w["alive"]:
            how = (
                f"working, holds {plural(w['holding'], 'item')}, last heard from "
                f"{w['quiet']:g} s ago"
            )
        elif w["state"] == "working":
            how = (
                "gone (its session ended; the coordinator offers its work again), "
                f"last heard from at {w['last_heard']}"
            )
        else:
            how = f"{_ENDED.get(w['state'], w['state'])} at {w['ended']}"
        lines.append(
            f"  {w['worker']}: pid {w['pid']} on {w['host']}, "
            f"{plural(w['rows_recorded'], 'row')} recorded, {how}"
        )
    return lines


_ENDED = {
    "done": "finished",
    "stopped": "stopped",
    "gone": "gone (its session ended; its work was offered again)",
}
