"""CLI-1: a fuzz pass over every command's arguments and option files.

Hypothesis drives ``cli.main`` in process with argument lists that mix the
command's own option names with plausible and implausible values: the paths of
a real run and its files, run URLs, huge and negative numbers, odd strings and
unicode, and paths to a folder, a named pipe, deeply nested JSON and a
5,000-character name. Whatever the arguments, the command ends with an exit
code and a message, never a traceback, and never hangs (a named pipe is never
opened for reading). ``demo`` runs a whole collection, so it gets only
``--help`` and options it refuses.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import click
import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli import main
from tests.test_cli_support import ACTOR, CliRun, graded

#: Commands the fuzz drives with any arguments; ``demo`` runs a collection.
COMMANDS = sorted(name for name in main.commands if name != "demo")
#: Examples per command: 25 in the dev profile, more in CI's.
EXAMPLES = settings().max_examples * 5 // 8
#: Seconds one invocation may take before it counts as a hang.
HANG = 20

DEEP = "[" * 100_000 + "]" * 100_000
#: Just under what msgspec decodes: deep enough for Python's own recursion.
DEEPISH = "[" * 900 + "]" * 900


@dataclass(frozen=True)
class Fixture:
    """A run made through the command line, and odd files beside it."""

    run: CliRun
    values: tuple[str, ...]


def _odd_files(folder: Path, run: CliRun) -> list[Path]:
    odd = folder / "odd"
    odd.mkdir()
    (odd / "folder").mkdir()
    os.mkfifo(odd / "pipe.jsonl")
    files = {
        "empty.jsonl": "",
        "deep.jsonl": '{"a": ' + DEEP + "}\n",
        "deep.json": '{"fault_share": ' + DEEP + "}",
        "deepish.jsonl": '{"_ng_task_index": 0, "a": ' + DEEPISH + "}\n",
        "deepish.yaml": "a: " + DEEPISH + "\n",
        "policy.json": '{"max_free_attempts": 99999999999999999999}',
        "approvals.txt": "0 0 99999999999999999999\n-1 0 0\n",
        "text.jsonl": "not json\n\r\n\n",
        "crlf.jsonl": '{"a": 1}\r\n',
    }
    for name, text in files.items():
        (odd / name).write_text(text, encoding="utf-8")
    return [
        odd / "folder",
        odd / "pipe.jsonl",
        *(odd / name for name in files),
        folder / "nosuchdir" / "x.jsonl",
        folder / ("a" * 5000),
        folder / ("b" * 250 + "/") / ("c" * 250 + ".jsonl"),
        run.out.with_name("rollouts_failures.jsonl"),
        run.ledger_dir / "ledger.db",
        run.ledger_dir / "coverage.json",
        run.ledger_dir / "run.lock",
        run.ledger_dir,
        folder / "new" / "rollouts.jsonl",
    ]


@pytest.fixture(scope="module")
def fixture(tmp_path_factory: pytest.TempPathFactory) -> Fixture:
    folder = tmp_path_factory.mktemp("fuzz")
    run = CliRun(folder)
    run.create()
    run.collect(lambda row: graded())
    paths = [run.out, run.config, run.servers, run.inputs, folder / "out.jsonl"]
    values = [str(p) for p in paths + _odd_files(folder, run)]
    values += [
        "postgresql://user:pw@127.0.0.1:9/db?run=r",
        "postgresql+psycopg://user:pw@host/db",
        "postgresql://127.0.0.1:9/db",
        "http://example.invalid/x",
        "max_free_attempts=99999999999999999999",
        "fault_share=-1",
        "regrade_kinds=" + DEEPISH,
        "fault_share=" + DEEP,
        "side_overrides.x=model",
        "99999999999999999999",
        str(2**63),
        str(2**63 - 1),
        "-1",
        "-99999999999999999999",
        "0",
        "1e9",
        "nan",
        "",
        "-",
        "--",
        "=",
        "rollouts",
        "ünïcødé ✓",
        "a" * 5000,
    ]
    return Fixture(run, tuple(values))


_TEXT = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    max_size=12,
)


def _option(param: click.Option, value: st.SearchStrategy[str]) -> st.SearchStrategy:
    names = st.sampled_from([*param.opts, *param.secondary_opts])
    if param.is_flag or param.count:
        return names.map(lambda name: [name])
    return st.tuples(names, value).map(list)


def _arguments(
    command: click.Command, values: tuple[str, ...]
) -> st.SearchStrategy[list[str]]:
    """The command's arguments, then some of its options with values, then extras."""
    value = st.one_of(st.sampled_from(values), st.integers().map(str), _TEXT)
    out = st.one_of(st.just(values[0]), value)  # mostly the fixture's run
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    options = [p for p in command.params if isinstance(p, click.Option)]
    positional = st.tuples(*(out if i == 0 else value for i in range(len(arguments))))
    pairs = (
        st.lists(st.one_of(*(_option(o, value) for o in options)), max_size=5)
        if options
        else st.just([])
    )
    extra = st.lists(value, max_size=2)
    return st.tuples(positional, pairs, extra).map(
        lambda p: [*p[0], *(word for pair in p[1] for word in pair), *p[2]]
    )


def _hang(signum: int, frame: FrameType | None) -> None:
    raise TimeoutError(f"the command took over {HANG} s (a hang?)")


@contextlib.contextmanager
def _in(folder: Path) -> Iterator[None]:
    # Relative paths land in the fuzz folder; a hang becomes a failure.
    previous = signal.signal(signal.SIGALRM, _hang)
    try:
        with contextlib.chdir(folder):
            yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def invoke(fixture: Fixture, args: list[str]) -> Result:
    """``rollout-ledger ARGS`` with exceptions caught, as a user would meet them."""
    signal.alarm(HANG)
    try:
        return CliRunner().invoke(
            main,
            args,
            obj={"clock": fixture.run.clock, "actor": ACTOR},
            catch_exceptions=True,
            input="",
        )
    finally:
        signal.alarm(0)


def assert_no_traceback(result: Result, args: list[str]) -> None:
    shown = [a if len(a) < 80 else a[:40] + "..." for a in args]
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        shown,
        result.exc_info,
    )
    assert "Traceback" not in result.output, (shown, result.output)
    assert result.exit_code in (0, 2, 3, 4, 5, 75, 76), (shown, result.output)


@pytest.mark.slow
@pytest.mark.parametrize("name", COMMANDS)
def test_cli_1_no_command_prints_a_traceback(
    name: str, fixture: Fixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CLI-1: any arguments end in an exit code and a message, never a traceback."""
    monkeypatch.delenv("ROLLOUT_LEDGER_STORE", raising=False)
    command = main.commands[name]

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(_arguments(command, fixture.values))
    def check(args: list[str]) -> None:
        result = invoke(fixture, [name, *args])
        assert_no_traceback(result, [name, *args])

    with _in(fixture.run.folder):
        check()


@pytest.mark.parametrize(
    "args",
    [
        ["demo", "--help"],
        ["demo", "--rollouts", "99999999999999999999"],
        ["demo", "--rollouts", "-1"],
        ["demo", "--no-such-option"],
    ],
)
def test_cli_1_demo_refuses_odd_options_without_a_traceback(
    args: list[str], fixture: Fixture
) -> None:
    """CLI-1: ``demo`` (which runs a collection) with --help or refused options."""
    with _in(fixture.run.folder):
        result = invoke(fixture, args)
    assert_no_traceback(result, args)
    assert result.exit_code in (0, 2)
