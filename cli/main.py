"""The ``rollout-ledger`` click group and its error mapping (CLI-1).

Commands import the library lazily, inside their bodies, so ``--help`` stays
quick (P-6). A library error reaches the user as one message and its exit
code, never a traceback; warnings of the ``ledger`` and ``projections``
loggers are printed on stderr. Every message printed here (errors, usage
errors, warnings) passes through the library's one redaction of
credential-shaped values first (ID-13): the backstop behind the redaction each
message already had where it was made.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from cli.render.help import HelpContext

__all__ = ["main"]

_LOGGERS = ("ledger", "projections")


def _safe(message: str) -> str:
    """``message`` with every credential-shaped value redacted (ID-13)."""
    import ledger  # already loaded when a library error or warning exists

    return ledger.redact_secrets(message)


class _EchoHandler(logging.Handler):
    """Library warnings on the current stderr, one line each."""

    def emit(self, record: logging.LogRecord) -> None:
        message = _safe(record.getMessage())
        if (
            sys.stderr.isatty()
        ):  # a spinner's line is erased first (cli.render.progress)
            click.echo("\r\x1b[K", err=True, nl=False)
        click.echo(f"rollout-ledger: warning: {message}", err=True)


class LedgerGroup(click.Group):
    """A click group that maps library errors to messages and exit codes (CLI-1).

    Its help and every command's fit the terminal (``cli.render.help``).
    """

    context_class = HelpContext

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        cmd.context_class = HelpContext  # a command's context is its own class's
        super().add_command(cmd, name)

    def format_commands(
        self, ctx: click.Context, formatter: click.HelpFormatter
    ) -> None:
        """Each command with its whole summary, wrapped to the width (click cuts
        a summary at the end of its line, with "...")."""
        rows = [
            (name, command.get_short_help_str(limit=1000))
            for name, command in sorted(self.commands.items())
            if not command.hidden
        ]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        handler = _EchoHandler(logging.WARNING)
        for name in _LOGGERS:
            logging.getLogger(name).addHandler(handler)
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.Abort):
            raise  # --help, --version, ^C: click's own (P-6: no library import)
        except click.ClickException as exc:
            # A usage error may quote an argument (a URL with a password).
            vars(exc)["message"] = _safe(exc.message)  # Final in click's types
            raise
        except Exception as exc:
            import ledger

            if not isinstance(exc, ledger.LedgerError):
                raise  # a bug: exit 1 with its traceback (CLI-1)
            click.echo(f"rollout-ledger: {_safe(str(exc))}", err=True)
            sys.exit(exc.exit_code)
        finally:
            for name in _LOGGERS:
                logging.getLogger(name).removeHandler(handler)


@click.group(
    "rollout-ledger",
    cls=LedgerGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.version_option(package_name="rollout-ledger")
def main() -> None:
    """Resumable, auditable LLM evaluation and RL rollout-collection runs.

    Every attempt, failure, judge admission, approval, budget reset and drift
    acceptance is an event in an append-only log beside the run's files;
    resuming is a replay followed by a gate check. Exit codes: 0 done, 2 usage,
    3 refused (configuration, identity, row), 4 contention (lock held), 5
    unknown or corrupt saved work, 75/76 check: unfinished work (some / none
    retryable).

    Every decision, reason and term the commands print (settled_zero,
    kept_answer, held, exhausted, ...) is explained by `rollout-ledger explain
    TERM` (and in docs/glossary.md).

    \b
    Example:
      rollout-ledger status results/rollouts.jsonl
    """


def _commands() -> Iterator[click.Command]:
    """Every command defined in ``cli/commands/*.py`` and ``cli/demo/command.py``.

    A new command is a function in a command module: nothing here lists it.
    """
    folder = Path(__file__).parent / "commands"  # a glob: --help stays quick (P-6)
    names = [
        *(f"cli.commands.{p.stem}" for p in sorted(folder.glob("*.py"))),
        "cli.demo.command",
    ]
    for name in names:
        if name.endswith(".__init__"):
            continue
        module = importlib.import_module(name)
        for value in vars(module).values():
            callback = getattr(value, "callback", None)
            if isinstance(value, click.Command) and (
                getattr(callback, "__module__", None) == module.__name__
            ):
                yield value


for _command in _commands():
    main.add_command(_command)
