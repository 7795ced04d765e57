"""What the commands share: options, opening a run, configuration files, output.

Nothing here imports the library at module level (P-6: ``--help`` stays as
quick as importing click); each helper imports what it needs when called.
"""

from __future__ import annotations

import getpass
import os
import stat
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from cli.config_files import (
    CONFIG_HELP,
    GLOBAL_CONFIG_HELP,
    load_config,
    load_global_config,
)

if TYPE_CHECKING:
    from ledger import Clock, Ledger

__all__ = [
    "SCHEMA_VERSION",
    "config_options",
    "count",
    "dropped_items",
    "dry_run_option",
    "echo_json",
    "json_option",
    "load_config",
    "load_global_config",
    "note_driving",
    "operator_actor",
    "option_file",
    "out_argument",
    "output_option",
    "policy_items",
    "policy_setting",
    "progress",
    "quiet_option",
    "reader",
    "renamed_option",
    "run_clock",
    "writer",
]

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


if TYPE_CHECKING:
    # click 8.2 made ParamType generic (value, input); older versions are not,
    # so the type arguments exist for the type checker only.
    _OutType = click.ParamType[Path | str, Any]
else:
    _OutType = click.ParamType


class RunTarget(_OutType):
    """``OUT``: a path, a run URL, or a run name in ``ROLLOUT_LEDGER_STORE``
    (a run on PostgreSQL).

    A path becomes a ``Path``; a run URL (checked, never echoed with a
    password) stays a string, the form ``Ledger.open`` and ``RunLock`` take.
    A bare run name (no ``/``, not ending in ``.jsonl``) names a run in the
    store ``ROLLOUT_LEDGER_STORE`` holds, when that is set and no file of that
    name exists.
    """

    name = "OUT"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> Path | str:
        from ledger import ConfigError, resolve_out

        try:
            return resolve_out(str(value))
        except ConfigError as exc:
            if exc.key != "OUT":
                raise  # a refused URL or store variable: exit 3
            self.fail(str(exc), param, ctx)  # OUT written ambiguously: usage


class OptionFile(click.Path):
    """An existing regular file to read: never a folder, a named pipe or a device.

    A named pipe would make the command wait for a writer forever; it is
    refused before it is opened.
    """

    def __init__(self) -> None:
        super().__init__(exists=True, dir_okay=False, path_type=Path)

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> Any:
        path = super().convert(value, param, ctx)
        try:
            mode = os.stat(path).st_mode
        except OSError as exc:
            self.fail(f"{value!s}: {exc.strerror or exc}", param, ctx)
        if not stat.S_ISREG(mode):
            self.fail(f"{value!s} is not a regular file", param, ctx)
        return path


#: An option file (configuration, rows, policy, approvals, source dataset).
option_file = OptionFile()


def count(minimum: int) -> click.IntRange:
    """An integer option or argument of at least ``minimum``.

    Its upper bound is the library's, where the number enters (``ledger``'s
    bounds name it in the refusal, exit 3): the CLI does not guess it.
    """
    return click.IntRange(min=minimum)


#: ``OUT``: the run's output JSONL, existing or not; its companions derive from
#: it. Or a run on PostgreSQL: ``postgresql://USER@HOST:PORT/DB?run=NAME``.
out_argument = click.argument("out", type=RunTarget())

quiet_option = click.option(
    "--quiet",
    "-q",
    is_flag=True,
    help="No progress bar or spinner, even on a terminal.",
)

#: The shape of every ``--json`` document (docs/json.md); a document carries it
#: as its top-level ``schema_version`` and it grows only when a key changes
#: meaning or goes away (a new key keeps it).
SCHEMA_VERSION = 1

json_option = click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON document instead (its keys: docs/json.md).",
)

dry_run_option = click.option(
    "--dry-run", is_flag=True, help="Print what would be recorded; record nothing."
)


class AliasedOption(click.Option):
    """An option with older spellings that still work but are not in ``--help``.

    One spelling per flag across commands (``-o/--output`` for every output
    file); the older spelling stays accepted, so scripts keep working.
    """

    def __init__(
        self, *args: Any, hidden_aliases: tuple[str, ...] = (), **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.hidden_aliases = hidden_aliases

    def get_help_record(self, ctx: click.Context) -> tuple[str, str] | None:
        shown = self.opts
        self.opts = [name for name in shown if name not in self.hidden_aliases]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = shown


def renamed_option(
    *decls: str, old: tuple[str, ...], **kwargs: Any
) -> Callable[[F], F]:
    """An option named by ``decls`` (its names, then its parameter's name) that
    still takes its ``old`` spellings, unlisted in ``--help``."""
    *names, dest = decls
    return click.option(
        *names, *old, dest, cls=AliasedOption, hidden_aliases=old, **kwargs
    )


def output_option(
    help: str, *, aliases: tuple[str, ...] = (), path_type: Any = None
) -> Callable[[F], F]:
    """``-o/--output FILE``: the one spelling of an output file; ``aliases`` hidden."""
    return renamed_option(
        "-o",
        "--output",
        "output",
        old=aliases,
        type=path_type or click.Path(dir_okay=False, path_type=Path),
        help=help,
    )


def config_options(func: F) -> F:
    """``--config`` and ``--global-config`` (any number, merged in order)."""
    func = click.option(
        "--global-config",
        "global_configs",
        multiple=True,
        type=option_file,
        help=GLOBAL_CONFIG_HELP,
    )(func)
    return click.option(
        "--config",
        required=True,
        type=option_file,
        help=CONFIG_HELP,
    )(func)


def note_driving(
    out: Path | str,
    config: Path | None,
    global_configs: tuple[Path, ...] = (),
    collector: list[str] | None = None,
) -> None:
    """Note how the run at ``out`` is driven, for the hints (a file run only)."""
    if isinstance(out, Path):
        from ledger import RunPaths
        from projections import note_commands

        note_commands(
            RunPaths.of(out),
            config=config,
            global_configs=global_configs,
            collector=collector,
        )


# -- opening a run -----------------------------------------------------------------


def run_clock() -> Clock:
    """The clock of this invocation (tests pass a seeded one as ``obj["clock"]``)."""
    from ledger import Clock

    obj = click.get_current_context().find_root().obj or {}
    clock = obj.get("clock")
    return clock if clock is not None else Clock()


def operator_actor() -> str:
    """``operator:<login>`` (the actor every operator event names), or the
    actor a caller set as ``obj["actor"]``."""
    obj = click.get_current_context().find_root().obj or {}
    if obj.get("actor"):
        return str(obj["actor"])
    try:
        login = getpass.getuser()
    except (KeyError, OSError):
        login = "unknown"
    return f"operator:{login}"


@contextmanager
def reader(out: Path | str, *, check_head: bool = True) -> Iterator[Ledger]:
    """The run opened read-only: nothing is modified, not even a repair."""
    import ledger

    with ledger.open_run(out, check_head=check_head) as led:
        yield led


@contextmanager
def writer(out: Path | str) -> Iterator[Ledger]:
    """The run opened for writing under its lock, held for the command, so its
    appends are its alone."""
    import ledger

    with ledger.open_run(out, write=True, clock=run_clock()) as led:
        yield led


# -- output ------------------------------------------------------------------------


def echo_json(document: Mapping[str, Any]) -> None:
    """One JSON document on stdout (``--json``), with its ``schema_version``."""
    import msgspec

    value = {"schema_version": SCHEMA_VERSION, **document}
    text = msgspec.json.format(msgspec.json.encode(value, order="sorted"), indent=2)
    click.echo(text.decode())


def progress(items: Iterable[T], *, length: int | None, label: str, quiet: bool) -> Any:
    """A progress bar on a terminal's stderr; the items unchanged otherwise."""
    if quiet or not sys.stderr.isatty():
        return nullcontext(items)
    return click.progressbar(items, length=length, label=label, file=sys.stderr)


# -- policy settings on the command line ---------------------------------------


def policy_setting(text: str, option: str) -> tuple[str, Any]:
    """``KEY=VALUE`` of ``policy``: VALUE is JSON, else a string."""
    import msgspec

    key, sep, raw = text.partition("=")
    if not sep or not key:
        raise click.BadParameter(f"{text!r} is not KEY=VALUE", param_hint=option)
    try:
        return key, msgspec.json.decode(raw)  # REC-60: JSON, else a string
    except msgspec.DecodeError:
        return key, raw
    except RecursionError:
        raise click.BadParameter(
            f"the value of {key} nests too deeply", param_hint=option
        ) from None


def policy_items(texts: tuple[str, ...], option: str) -> dict[str, list[Any]]:
    """``--add``/``--remove`` items, gathered by setting."""
    items: dict[str, list[Any]] = {}
    for text in texts:
        key, value = policy_setting(text, option)
        items.setdefault(key, []).append(value)
    return items


def dropped_items(
    changes: dict[str, Any], wanted: dict[str, Any]
) -> dict[str, list[Any]]:
    """The items ``--set`` takes out of a list setting, by setting (issue 28)."""
    dropped = {}
    for key in wanted:
        change = changes.get(key)
        if change is None:
            continue
        old, new = change.old, change.new
        if isinstance(old, list) and isinstance(new, list):
            gone = [item for item in old if item not in new]
            if gone:
                dropped[key] = gone
    return dropped
