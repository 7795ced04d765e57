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
import json
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
from ledger import Ledger
from tests.test_cli_support import ACTOR, CliRun, graded

#: Commands the fuzz drives with any arguments; ``demo`` runs a collection and
#: ``view`` serves until it is stopped, by design (tests/test_view.py starts
#: and stops it, and asks it for anything a browser may send).
COMMANDS = sorted(name for name in main.commands if name not in ("demo", "view"))
#: Examples per command: 25 in the dev profile, more in CI's.
EXAMPLES = settings().max_examples * 5 // 8
#: Examples per option file, after its fixed odd contents: 4 in dev, 10 in CI.
FILE_EXAMPLES = max(settings().max_examples // 15, 4)
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
    # `report --serve` serves until it is stopped, by design (tests/test_report.py
    # starts and stops it); every other option must end.
    options = [
        p
        for p in command.params
        if isinstance(p, click.Option) and "--serve" not in p.opts
    ]
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


# -- option files: any content -------------------------------------------------------


#: Contents every option file is tried with: each a way a file goes wrong.
BOMB = "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n"
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
)
ODD_CONTENTS: dict[str, bytes] = {
    "empty": b"",
    "newlines": b"\n\r\n\n",
    "nul bytes": b"\x00" * 64,
    "invalid utf-8": b'{"a": "\xff\xfe\xc3"}\n\xc3\x28\n',
    "utf-8 bom": b'\xef\xbb\xbf{"_ng_task_index": 0, "_ng_rollout_index": 0}\n',
    "huge line": b'{"a": "' + b"x" * 2_000_000 + b'"}\n',
    "huge number": b'{"_ng_task_index": 1' + b"0" * 5000 + b"}\n",
    "deep json": b'{"a": ' + DEEP.encode() + b"}\n",
    "deepish json": b'{"_ng_task_index": 0, "a": ' + DEEPISH.encode() + b"}\n",
    "deep yaml": b"a: " + DEEPISH.encode() + b"\n",
    "deep yaml blocks": b"".join(b"  " * i + b"k:\n" for i in range(2000)),
    "wrong types": b'[1, "two", null, true, {"task": []}]\n',
    "a json string": b'"just a string"\n',
    "yaml alias bomb": (
        "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + BOMB
    ).encode(),
    "yaml recursive alias": b"a: &a [*a]\n",
    "yaml python tag": b'a: !!python/object/apply:os.system ["touch pwned"]\n',
    "yaml python name": b"a: !!python/name:os.system\n",
    "yaml custom tags": b'a: !custom x\nb: !!binary "aGVsbG8="\nc: !!set {x}\n',
    "yaml merge keys": b"base: &b {x: 1}\nmine:\n  <<: *b\n  <<: [*b, *b]\n",
    "yaml documents": b"a: 1\n---\nb: 2\n...\n---\n",
    "yaml oddities": b"? [complex, key]\n: v\n.nan: .inf\n~: null\n0x10: 0o17\n",
    "yaml tabs": b"a:\n\tb: 1\n",
    "yaml duplicate keys": b"a: 1\na: 2\n",
    "yaml interpolations": (
        b"a: ${oc.env:HOME}\nb: ${c}\nc: ${b}\nd: ${oc.decode:'[1'}\n"
    ),
    "yaml unclosed": b"a: [1, 2\nb: {c: 'd\n",
}


@dataclass(frozen=True)
class Slot:
    """One option file of one command: its arguments, ``FILE`` the fuzzed file.

    ``OUT`` is the fixture's run, ``NEW`` a fresh output for ``create``,
    ``LEGACY`` a run saved without a ledger for ``import``.
    """

    name: str
    suffix: str
    words: tuple[str, ...]

    def args(self, run: CliRun, file: Path, fresh: Path, legacy: Path) -> list[str]:
        places = {
            "FILE": file, "OUT": run.out, "NEW": fresh, "LEGACY": legacy,
            "CONFIG": run.config, "SERVERS": run.servers, "INPUTS": run.inputs,
        }  # fmt: skip
        return [str(places.get(word, word)) for word in self.words]


_CREATE = "create NEW --inputs INPUTS --config CONFIG --global-config SERVERS"


def _slot(name: str, suffix: str, words: str) -> Slot:
    """A slot from its words; ``CONFIGS`` is the run's configuration options."""
    words = words.replace("CONFIGS", "--config CONFIG --global-config SERVERS")
    return Slot(name, suffix, tuple(words.split()))


SLOTS = [
    _slot("create --inputs", ".jsonl", _CREATE.replace("INPUTS", "FILE")),
    _slot("create --config", ".yaml", _CREATE.replace("CONFIG", "FILE")),
    _slot("create --global-config", ".yaml", _CREATE.replace("SERVERS", "FILE")),
    _slot("create --policy", ".json", f"{_CREATE} --policy FILE"),
    _slot("create --source", ".jsonl", f"{_CREATE} --source FILE"),
    _slot(
        "diff-config --config",
        ".yaml",
        "diff-config OUT --config FILE --global-config SERVERS",
    ),
    _slot(
        "diff-config --global-config",
        ".yaml",
        "diff-config OUT --config CONFIG --global-config FILE",
    ),
    _slot("diff-config --source", ".jsonl", "diff-config OUT CONFIGS --source FILE"),
    _slot(
        "resume --config", ".yaml", "resume OUT --config FILE --global-config SERVERS"
    ),
    _slot(
        "resume --global-config",
        ".yaml",
        "resume OUT --config CONFIG --global-config FILE",
    ),
    _slot("resume --source", ".jsonl", "resume OUT CONFIGS --source FILE"),
    _slot(
        "resume approvals (--rerun-masked-without-artifact)",
        ".txt",
        "resume OUT CONFIGS --rerun-masked-without-artifact FILE --dry-run",
    ),
    _slot("record ROWS.jsonl", ".jsonl", "record OUT FILE"),
    _slot("import --inputs", ".jsonl", "import LEGACY --inputs FILE --dry-run"),
]


def _run_files(run: CliRun) -> dict[str, bytes]:
    """The run's files as a refused command must leave them (SQLite's own aside)."""
    return {
        str(path.relative_to(run.out.parent)): path.read_bytes()
        for path in sorted(run.out.parent.rglob("*"))
        if path.is_file()
        and path.name not in ("run.lock", "ledger.db-wal", "ledger.db-shm")
    }


def _mutated(original: bytes) -> st.SearchStrategy[bytes]:
    """``original`` cut, with bytes flipped, or with bytes inserted."""
    size = max(len(original), 1)
    cut = st.integers(0, size).map(lambda n: original[:n])
    flip = st.tuples(st.integers(0, size - 1), st.integers(1, 255)).map(
        lambda p: (
            original[: p[0]]
            + bytes([(original[p[0] : p[0] + 1] or b"\0")[0] ^ p[1]])
            + original[p[0] + 1 :]
        )
    )
    insert = st.tuples(st.integers(0, size), st.binary(min_size=1, max_size=8)).map(
        lambda p: original[: p[0]] + p[1] + original[p[0] :]
    )
    return st.one_of(cut, flip, insert)


#: Keys a row, an approval or a policy has, so that wrong types meet them.
_KEYS = ["_ng_task_index", "_ng_rollout_index", "agent_ref", "task", "rollout"]
_KEYS += ["attempt", "max_free_attempts", "reward", "name", "x"]
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=4)
    ),
    max_leaves=12,
)


def _contents(original: bytes) -> st.SearchStrategy[bytes]:
    rows = st.lists(_JSON.map(lambda v: json.dumps(v).encode()), max_size=4)
    return st.one_of(
        _mutated(original),
        st.binary(max_size=512),
        rows.map(lambda lines: b"\n".join(lines) + b"\n"),
        st.text(max_size=200).map(lambda text: text.encode("utf-8", "surrogatepass")),
    )


def _original(run: CliRun, slot: Slot) -> bytes:
    """The well-formed file a slot's fuzzed file stands for, to mutate."""
    if "config" in slot.name and "global" in slot.name:
        return run.servers.read_bytes()
    if "config" in slot.name:
        return run.config.read_bytes()
    if "policy" in slot.name:
        return b'{"max_free_attempts": 2, "fault_share": 0.5}\n'
    if "approvals" in slot.name:
        return b'0 0 0\n{"task": 1, "rollout": 0, "attempt": 0}\n'
    if "record" in slot.name:
        rows = [json.loads(line) for line in run.out.read_bytes().splitlines()]
        return b"".join(json.dumps(row).encode() + b"\n" for row in rows[:2])
    return run.inputs.read_bytes()


@pytest.fixture(scope="module")
def legacy(fixture: Fixture, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run saved without a ledger (its collector files only), for ``import``."""
    folder = tmp_path_factory.mktemp("legacy")
    for name in ("rollouts.jsonl", "rollouts_failures.jsonl"):
        source = fixture.run.out.with_name(name)
        if source.exists():
            (folder / name).write_bytes(source.read_bytes())
    return folder / "rollouts.jsonl"


def _try_file(
    fixture: Fixture, slot: Slot, data: bytes, fresh: Path, legacy: Path
) -> Result:
    run = fixture.run
    path = run.folder / f"fuzzed{slot.suffix}"
    path.write_bytes(data)
    args = slot.args(run, path, fresh, legacy)
    before = _run_files(run)
    head = _head_seq(run)
    result = invoke(fixture, args)
    assert_no_traceback(result, args)
    assert result.exit_code in (0, 2, 3, 5), (slot.name, result.output)
    if result.exit_code != 0:
        kept = _refusals_since(run, head)
        if kept:  # issue 25: a row `record` refuses is kept, and nothing else
            assert args[0] == "record", (slot.name, kept)
            before.pop("rollouts_ledger/ledger.db")
            after = _run_files(run)
            after.pop("rollouts_ledger/ledger.db")
            assert after == before, (slot.name, data[:200])
        else:
            assert _run_files(run) == before, (slot.name, data[:200])  # nothing
        assert not (fresh.parent / "rollouts_ledger" / "ledger.db").exists()
    return result


def _head_seq(run: CliRun) -> int:
    with Ledger.open(run.out) as led:
        return led.head()[0]


def _refusals_since(run: CliRun, seq: int) -> list[str]:
    """The kinds appended after ``seq``: none, or ``row_refused`` only."""
    with Ledger.open(run.out) as led:
        kinds = [event.kind for event in led.events(seq + 1)]
    assert set(kinds) <= {"row_refused"}, kinds
    return kinds


@pytest.mark.slow
@pytest.mark.parametrize("slot", SLOTS, ids=[slot.name for slot in SLOTS])
def test_cli_1_option_files_of_any_content_end_in_a_message(
    slot: Slot,
    fixture: Fixture,
    legacy: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CLI-1, R-5: an option file of any bytes: exit 0, 2, 3 or 5, never a traceback.

    Each way a file goes wrong (``ODD_CONTENTS``: empty, invalid UTF-8, huge
    lines, deep nesting, wrong types, YAML alias bombs and python tags, ...),
    then random bytes, JSON of any shape and mutations of the well-formed file.
    A refused command leaves the run's files byte-identical and creates nothing.
    """
    monkeypatch.delenv("ROLLOUT_LEDGER_STORE", raising=False)
    fresh = iter(tmp_path / f"new{i}" / "rollouts.jsonl" for i in range(10_000))
    tried = 0
    with _in(fixture.run.folder):
        for name, data in ODD_CONTENTS.items():
            result = _try_file(fixture, slot, data, next(fresh), legacy)
            if "python" in name and slot.suffix == ".yaml":  # never constructed
                assert result.exit_code == 3, (name, result.output)
            tried += 1
        assert not (fixture.run.folder / "pwned").exists()

        @settings(
            max_examples=FILE_EXAMPLES,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(_contents(_original(fixture.run, slot)))
        def check(data: bytes) -> None:
            nonlocal tried
            _try_file(fixture, slot, data, next(fresh), legacy)
            tried += 1

        check()
    assert tried > len(ODD_CONTENTS)
