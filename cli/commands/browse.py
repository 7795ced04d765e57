"""``rollout-ledger view``: every run under some folders, served on this machine."""

from __future__ import annotations

from pathlib import Path

import click

__all__ = ["view"]


@click.command()
@click.argument("places", nargs=-1, metavar="[PATH ...]")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="The port on 127.0.0.1 (0: any free port).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print the address as one JSON document when serving starts.",
)
def view(places: tuple[str, ...], port: int, as_json: bool) -> None:
    """Serve every run under the given folders, read-only, on this machine.

    PATH is a folder searched for runs (a run is a <stem>_ledger/ folder beside
    its results file), a run's results file, or a PostgreSQL run URL; the
    current folder when none is given. Each view has its own address: the
    runs at /, one run at /runs/RUN_ID with its rollouts filtered, sorted and
    paged, one rollout at /runs/RUN_ID/rollouts/TASK/ROLLOUT, two runs side by
    side at /compare/RUN_A/RUN_B, and each as JSON under /api/. Open pages
    follow a run while a writer works on it. Only 127.0.0.1 is served, and
    nothing is ever written.

    \b
    Example:
      rollout-ledger view results/ --port 8765
    """
    from cli.serve import serve

    found = [p if "://" in p else Path(p) for p in places] or [Path.cwd()]
    serve(found, port, as_json=as_json)
