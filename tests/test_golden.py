"""Golden logs (``tests/golden/``): old logs keep decoding and keep their meaning.

Each golden folder holds a run's stored events (``events.jsonl``: envelope,
hashes in hex, the body's stored bytes verbatim), its collector files and the
coverage (REC-41) it projected when it was written. For each:

- the hash chain holds over the stored bytes (EV-2), and every body decodes;
- replaying the decoded events gives exactly the expected coverage;
- a ledger rebuilt from those bytes, with the collector files beside it,
  stores the same hashes, opens, replays to the same coverage, and every
  recorded row location still points at bytes with the recorded sha256.

Golden logs are never rewritten (``tests/golden/build_golden.py`` refuses): a
change that breaks one breaks every run written before it (EV-3).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import msgspec
import pytest

from ledger import Ledger
from ledger.events import (
    FailureSaved,
    JudgeOutcomeSaved,
    OmissionSaved,
    ResultSaved,
    StoredEvent,
    decode_body,
)
from projections import coverage, decide_all, replay
from tests.internals import EventRow, NewEvent, RunPaths, SQLiteStore, first_chain_break

GOLDEN = Path(__file__).parent / "golden"
NAMES = sorted(p.name for p in GOLDEN.iterdir() if (p / "events.jsonl").is_file())


class GoldenLine(msgspec.Struct, frozen=True):
    """One line of ``events.jsonl``; ``body`` keeps the stored bytes verbatim."""

    seq: int
    kind: str
    at: str
    actor: str
    prev_hash: str
    hash: str
    body: msgspec.Raw


_LINE = msgspec.json.Decoder(GoldenLine)


def golden_rows(name: str) -> list[EventRow]:
    """The stored rows of a golden log, exactly as they were stored."""
    lines = (GOLDEN / name / "events.jsonl").read_bytes().splitlines()
    return [
        EventRow(
            line.seq,
            line.kind,
            line.at,
            line.actor,
            bytes(line.body),
            bytes.fromhex(line.prev_hash),
            bytes.fromhex(line.hash),
        )
        for line in map(_LINE.decode, lines)
    ]


def stored_events(rows: list[EventRow]) -> list[StoredEvent]:
    return [
        StoredEvent(
            seq=row.seq,
            kind=row.kind,
            at=row.at,
            actor=row.actor,
            body=decode_body(row.body),
            prev_hash=row.prev_hash,
            hash=row.hash,
        )
        for row in rows
    ]


def expected_coverage(name: str) -> dict[str, object]:
    result: dict[str, object] = json.loads(
        (GOLDEN / name / "coverage.json").read_text()
    )
    return result


def test_the_golden_logs_are_there() -> None:
    assert NAMES == [
        "branches", "budget_and_policy", "infrastructure", "rejudge_and_approvals",
    ]  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_ev_2_the_golden_chain_holds_over_the_stored_bytes(name: str) -> None:
    rows = golden_rows(name)
    assert [row.seq for row in rows] == list(range(1, len(rows) + 1))
    assert first_chain_break(rows) is None


@pytest.mark.parametrize("name", NAMES)
def test_ev_3_a_golden_log_decodes_and_replays_to_its_coverage(name: str) -> None:
    events = stored_events(golden_rows(name))
    assert [e.body.__struct_config__.tag for e in events] == [e.kind for e in events]
    assert coverage(replay(events)).to_dict() == expected_coverage(name)


def rebuild_golden(name: str, folder: Path) -> Path:
    """A run folder rebuilt from the golden: the files, and a fresh ``ledger.db``."""
    for file in (GOLDEN / name).glob("rollouts*.jsonl"):
        shutil.copyfile(file, folder / file.name)
    paths = RunPaths.of(folder / "rollouts.jsonl")
    paths.ledger_dir.mkdir()
    rows = golden_rows(name)
    store = SQLiteStore.create(paths.db)
    try:
        stored = store.append_many(
            [NewEvent(r.kind, r.at, r.actor, r.body) for r in rows]
        )
    finally:
        store.close()
    assert [bytes(s.hash) for s in stored] == [r.hash for r in rows]
    return paths.out


def _located(event: StoredEvent) -> bool:
    body = event.body
    return isinstance(
        body, ResultSaved | FailureSaved | OmissionSaved | JudgeOutcomeSaved
    )


@pytest.mark.parametrize("name", NAMES)
def test_a_ledger_rebuilt_from_a_golden_log_opens_and_agrees(
    name: str, tmp_path: Path
) -> None:
    out = rebuild_golden(name, tmp_path)
    with Ledger.open(out) as led:  # a reader: it checks the saved work first
        assert led.verify_chain() is None
        assert led.pending_repairs() == []
        assert coverage(replay(led)).to_dict() == expected_coverage(name)
        checked = 0
        for event in filter(_located, led.events()):
            where = event.body.location  # type: ignore[union-attr]
            data = (tmp_path / where.file).read_bytes()
            row = data[where.offset : where.offset + where.length]
            assert hashlib.sha256(row).hexdigest() == where.row_sha256, event.seq
            checked += 1
        assert checked  # the log names rows to check


# Golden outputs: what `status`, `check` and `history` print on each golden run,
# frozen in tests/golden/text/<name>.<command>.txt. A change of wording shows
# up as a diff here. After a deliberate change, regenerate them with
#
#     UPDATE_GOLDEN=1 .venv/bin/pytest -q tests/test_golden.py -k golden_output
#
# and review the diff before committing it.
TEXT = GOLDEN / "text"
COMMANDS = {
    "status": ("status",),
    "check": ("check",),
    "history": ("history",),
    "history-t0-r0": ("history", "--task", "0", "--rollout", "0"),
    "history-unfinished": ("history",),  # + the first unfinished rollout
}


def _first_unfinished(out: Path) -> tuple[str, ...]:
    """``--task T --rollout R`` of the first rollout not complete (REC-40)."""
    with Ledger.open(out) as led:
        decisions = decide_all(replay(led))
    task, rollout = next(
        key for key, d in sorted(decisions.items()) if d.value != "complete"
    )
    return ("--task", str(task), "--rollout", str(rollout))


def _printed(out: Path, args: tuple[str, ...]) -> str:
    from click.testing import CliRunner

    from cli import main

    result = CliRunner().invoke(
        main, [args[0], str(out), *args[1:]], catch_exceptions=False
    )
    text = f"$ rollout-ledger {' '.join((args[0], 'OUT', *args[1:]))}\n"
    text += result.stdout + result.stderr + f"[exit {result.exit_code}]\n"
    return text.replace(str(out.parent), "<run>")


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("name", NAMES)
def test_cli_6_7_8_golden_output(name: str, command: str, tmp_path: Path) -> None:
    """CLI-6, CLI-7, CLI-8: status, check and history print what they printed."""
    out = rebuild_golden(name, tmp_path)
    args = COMMANDS[command]
    if command == "history-unfinished":
        args += _first_unfinished(out)
    printed = _printed(out, args)
    golden = TEXT / f"{name}.{command}.txt"
    if os.environ.get("UPDATE_GOLDEN"):
        TEXT.mkdir(exist_ok=True)
        golden.write_text(printed, encoding="utf-8")
    assert golden.is_file(), "write it with UPDATE_GOLDEN=1 (see above)"
    assert printed == golden.read_text(encoding="utf-8")
