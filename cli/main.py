"""The ``rollout-ledger`` click group and its error mapping (CLI-1).

Commands import the library lazily, inside their bodies, so ``--help`` stays
quick (P-6). A library error reaches the user as one message and its exit
code, never a traceback.
"""

from __future__ import annotations

import sys
from typing import Any

import click

__all__ = ["main"]


class LedgerGroup(click.Group):
    """A click group that maps library errors to messages and exit codes (CLI-1)."""

    def invoke(self, ctx: click.Context) -> Any:
        from ledger.errors import LedgerError

        try:
            return super().invoke(ctx)
        except LedgerError as exc:
            click.echo(f"rollout-ledger: {exc}", err=True)
            sys.exit(exc.exit_code)


@click.group(cls=LedgerGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="rollout-ledger")
def main() -> None:
    """Resumable, auditable LLM evaluation and RL rollout-collection runs.

    Every attempt, failure, judge admission, approval, budget reset and drift
    acceptance is an event in an append-only log beside the run's files;
    resuming is a replay followed by a gate check.

    Example: rollout-ledger head results/rollouts.jsonl
    """


@main.command()
@click.argument("out", type=click.Path(dir_okay=False))
def head(out: str) -> None:
    """Print the last seq and the head hash of a run's log (CLI-13).

    Keep this line somewhere safe: deleting the newest events is only
    detectable against an exported head (EV-2).

    Example: rollout-ledger head results/rollouts.jsonl
    """
    from ledger.run import Ledger

    with Ledger.open(out) as led:
        seq, digest = led.head()
    click.echo(f"{seq} {digest.hex()}")
