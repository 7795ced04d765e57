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
import shlex
import socket
import sys
import tempfile
import uuid
from contextlib import closing
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cli.commands.coordinating import STOPS, note_line
from cli.common import load_config, load_global_config
from cli.render.text import plural

if TYPE_CHECKING:
    from projections import Recorded, WorkerReport

__all__ = ["recorded_document", "run_on_store", "work_run"]


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
            note_line(f"worker {name} works in {folder}")
        last = projections.work_batches(
            led,
            launcher,
            name=name,
            workdir=folder,
            batch=batch,
            wait=wait,
            on_batch=show,
            on_progress=progress,
            on_note=note_line,
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


def recorded_document(recorded: Recorded) -> dict[str, Any]:
    """What recording did, as ``run``'s and a worker's ``--json`` lines say it."""
    return {
        "rows": recorded.rows,
        "skipped": recorded.skipped,
        "events": recorded.events,
        "refused": [
            {
                "file": r.file,
                "line": r.line,
                "message": r.message,
                "length": r.length,
                "sha256": r.sha256,
            }
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
        "recorded": recorded_document(report.recorded),
        "adopted": None
        if report.adopted is None
        else recorded_document(report.adopted),
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
        note_line(
            f"{refusal.file} line {refusal.line}: {refusal.message}; not recorded"
        )
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
            f"worker stopped: {STOPS[report.stop]}, "
            f"{plural(report.total_rows, 'row')} recorded (exit {report.exit_code})"
        )
        if report.why is not None:
            click.echo(f"why: {report.why}")


#: ``resume``'s options among ``run``'s parameters (the coordinator's resume).
_RESUMING = (
    "source",
    "extend_attempts",
    "approvals",
    "retry_terminal_timeouts",
    "allow_unsafe",
    "longest_first",
    "reason",
)


def run_on_store(out: Path | str, argv: list[str], params: dict[str, Any]) -> None:
    """``run`` on a run URL: the coordinator, or with ``--worker`` a worker.

    ``params`` are ``run``'s parameters as click parsed them.
    """
    config: Path = params["config"]
    global_configs: tuple[Path, ...] = params["global_configs"]
    if not isinstance(out, str):
        raise click.UsageError(
            "--worker works on a run kept in PostgreSQL (a postgresql://...?run=NAME "
            "URL); a run in files is run by one `rollout-ledger run OUT`"
        )
    if params["dry_run"]:
        raise click.UsageError(
            "--dry-run previews a run in files; on a run URL, preview the plan with "
            f"`rollout-ledger resume {shlex.quote(out)} --config {config} --dry-run`"
        )
    if params["worker"]:
        if not argv:
            raise click.UsageError("give the collector's command after --")
        settings = ("batch", "workdir", "wait", "round_timeout", "progress_every")
        sys.exit(
            work_run(
                out,
                argv,
                quiet=params["quiet"],
                as_json=params["as_json"],
                **{name: params[name] for name in settings},
            )
        )
    from cli.commands.coordinating import coordinate_run

    sys.exit(
        coordinate_run(
            out,
            load_config(config),
            load_global_config(global_configs),
            argv,
            {name: params[name] for name in _RESUMING},
            config=config.resolve(),
            global_configs=tuple(p.resolve() for p in global_configs),
            batch=params["batch"],
            wait=params["wait"],
            as_json=params["as_json"],
        )
    )
