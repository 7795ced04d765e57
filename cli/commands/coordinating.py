"""``run URL`` without ``--worker``: the coordinator; ``status``'s workers.

The coordinator takes the run lock and runs ``projections.coordinate``; given
``-- COMMAND`` it also starts one worker of its own (``run URL --worker``) on
this node. The contract: docs/postgres-run.md.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cli.common import count, writer
from cli.render.text import plural

if TYPE_CHECKING:
    from projections import CoordinatorReport

__all__ = [
    "STOPS",
    "coordinate_run",
    "coordinator_document",
    "is_url",
    "note_line",
    "store_options",
    "workers_document",
    "workers_lines",
]

#: Seconds the coordinator gives its own worker to end once the run stopped.
_CHILD_GRACE = 30.0

STOPS = {
    "complete": "the run is complete",
    "nothing_retryable": "unfinished work remains, none of it retryable",
    "interrupted": "stopped by a signal; the rows so far are recorded, run it again "
    "to go on",
    "no_workers": "no worker was working on the run",
    "no_work": "nothing was left to claim",
    "session_lost": "this worker's PostgreSQL session ended",
    "stalled": "the collector's batches recorded nothing",
}


def note_line(text: str) -> None:
    """A line for a person, on stderr."""
    click.echo(f"rollout-ledger: {text}", err=True)


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
                on_note=note_line,
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
            f"coordinator stopped: {STOPS[report.stop or 'complete']} "
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


def is_url(out: object) -> bool:
    """``OUT`` names a run kept in a store (a run URL), not a file."""
    return isinstance(out, str)


def store_options(func: Any) -> Any:
    """``run``'s options for a run URL: --worker, --batch, --workdir, --wait."""
    for option in reversed(_OPTIONS):
        func = option(func)
    return func


_OPTIONS = [
    click.option(
        "--worker",
        is_flag=True,
        help="On a run URL: work, not coordinate (claim, run COMMAND, record).",
    ),
    click.option(
        "--batch",
        type=count(1),
        default=32,
        show_default=True,
        metavar="N",
        help="With --worker: attempts claimed at a time.",
    ),
    click.option(
        "--workdir",
        type=click.Path(file_okay=False, path_type=Path),
        help="With --worker: its round files (default: a new folder in $TMPDIR).",
    ),
    click.option(
        "--wait",
        type=click.FloatRange(min=0),
        default=300.0,
        show_default=True,
        metavar="SECONDS",
        help="On a run URL: how long to wait for work, a coordinator or a worker.",
    ),
]


# -- status --------------------------------------------------------------------


def workers_document(led: Any) -> list[dict[str, Any]] | None:
    """Each worker of a run on PostgreSQL, for ``status --json``; ``None``: files."""
    import projections

    seen = projections.workers_seen(led)
    return None if seen is None else [w.to_dict() for w in seen]


def workers_lines(workers: list[dict[str, Any]] | None) -> list[str]:
    """``status``'s lines about the workers, in words."""
    if not workers:
        return [] if workers is None else ["workers: none has worked on this run yet"]
    lines = [f"workers ({len(workers)}):"]
    lines += [
        f"  {w['worker']}: pid {w['pid']} on {w['host']}, "
        f"{plural(w['rows_recorded'], 'row')} recorded, {w['words']}"
        for w in workers
    ]
    return lines
