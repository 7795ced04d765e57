"""EV-12 and R-5: blank lines after the last row, and bytes inserted before it.

A ``"\\n"`` or ``"\\r\\n"`` another tool appends after the last recorded row is
not a row: a writer's open cuts it back and saves its bytes (``tail_repaired``),
as it does a torn last line, and readers call it a blank line. Bytes inserted
before the recorded end make the writer's open and ``verify`` name the same
line: the first recorded row the file no longer holds, numbered at ``"\\n"``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger import CorruptLedger, IdentityMismatch, Ledger, RunLock
from ledger.events import AttemptsReleased, TailRepaired
from projections import status, verify
from tests.conftest import MinimalManifest, input_rows

Run = tuple[Ledger, list[dict[str, Any]]]


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Run]:
    """A writer over 3 x 2 rollouts: four results in OUT, a failure in the sidecar."""
    out = tmp_path / "rollouts.jsonl"
    rows = input_rows(3, 2)
    with RunLock(out) as lock:
        led = Ledger.create(out, MinimalManifest(rows), rows, lock=lock)
        keys = [(r["_ng_task_index"], r["_ng_rollout_index"], 0) for r in rows]
        led.append(AttemptsReleased(dispatch=tuple(keys), rejudge=()))
        for row in rows[:4]:
            led.reserve(row)
            led.record({**row, "reward": 1.0})
        led.reserve(rows[4])
        led.record({**rows[4], "_ng_failure_class": "x"})
        yield led, rows
        led.close()


def reopen(led: Ledger) -> Ledger:
    led.close()
    assert led.lock is not None
    return Ledger.open(led.paths.out, lock=led.lock)


def append_raw(path: Path, data: bytes) -> None:
    with path.open("ab") as handle:
        handle.write(data)


def pending(out: Path) -> list[tuple[str, int, str]]:
    with Ledger.open(out) as reader:
        shown = [(r.file, r.line, r.what) for r in status(reader).pending_repairs]
        found = [(f.file, f.line) for f in verify(reader) if f.check == "repair"]
    assert found == [(file, line) for file, line, _ in shown]
    return shown


@pytest.mark.parametrize(
    ("file", "tail", "lines"),
    [
        ("rollouts.jsonl", b"\n", 1),
        ("rollouts.jsonl", b"\r\n", 1),
        ("rollouts.jsonl", b"\r\n \t\r\n", 2),
        ("rollouts_failures.jsonl", b"\r\n", 1),
    ],
)
def test_r_5_ev_12_a_blank_line_after_the_last_row_is_cut_back_and_saved(
    run: Run, file: str, tail: bytes, lines: int
) -> None:
    led, _ = run
    path = led.paths.folder / file
    good = path.read_bytes()
    append_raw(path, tail)
    first = good.count(b"\n") + 1
    # Readers describe it, and change nothing.
    expected = [
        (file, first + n, "blank line after the last row") for n in range(lines)
    ]
    assert pending(led.paths.out) == expected
    with Ledger.open(led.paths.out) as reader:
        found = [f.message for f in verify(reader) if f.check == "repair"]
    assert len(found) == lines
    assert all("a writer's open cuts it back and saves its bytes" in f for f in found)
    assert path.read_bytes() == good + tail
    # A writer's open cuts it back, saves it, and records tail_repaired.
    led = reopen(led)
    assert path.read_bytes() == good
    repaired = list(led.events())[-1]
    assert repaired.actor == "repair"
    assert isinstance(repaired.body, TailRepaired)
    assert repaired.body.offset == len(good)
    assert repaired.body.length == len(tail)
    assert repaired.body.saved_as == f"rollouts_ledger/blank-{file}-{len(good)}.bin"
    assert (led.paths.folder / repaired.body.saved_as).read_bytes() == tail
    assert pending(led.paths.out) == []
    led = reopen(led)  # nothing left to repair
    assert list(led.events())[-1].seq == repaired.seq


def test_r_5_ev_12_a_blank_line_then_a_torn_line_are_cut_together(run: Run) -> None:
    led, _ = run
    good = led.paths.out.read_bytes()
    append_raw(led.paths.out, b'\r\n{"_ng_task_index": 1, "rew')
    line = good.count(b"\n") + 1
    assert pending(led.paths.out) == [
        ("rollouts.jsonl", line, "blank line after the last row"),
        ("rollouts.jsonl", line + 1, "torn last line"),
    ]
    led = reopen(led)
    assert led.paths.out.read_bytes() == good
    body = list(led.events())[-1].body
    assert isinstance(body, TailRepaired)
    assert body.saved_as.endswith(f"/torn-rollouts.jsonl-{len(good)}.bin")


def test_r_5_ev_12_a_blank_line_before_an_unrecorded_row_refuses_naming_it(
    run: Run,
) -> None:
    led, rows = run
    led.reserve(rows[5])
    good = led.paths.out.read_bytes()
    append_raw(led.paths.out, b"\r\n" + b'{"x": 1}\n')
    line = good.count(b"\n") + 1
    assert pending(led.paths.out) == [
        ("rollouts.jsonl", line, "blank line before an unrecorded row"),
        ("rollouts.jsonl", line + 1, "unrecorded row"),
    ]
    led.close()
    with pytest.raises(
        IdentityMismatch, match=rf"line {line} of rollouts\.jsonl is blank"
    ):
        Ledger.open(led.paths.out, lock=led.lock)
    assert led.paths.out.read_bytes() == good + b'\r\n{"x": 1}\n'


@pytest.mark.parametrize(
    ("where", "inserted"),
    [
        ("between", b"\r\n"),  # a blank line of its own: line 3
        ("inside", b"\r"),  # line 3 made a CRLF line: line 3
        ("between", b'{"x": 1}\n'),  # a whole line inserted: line 3
    ],
)
def test_r_5_ev_12_bytes_inserted_mid_file_are_named_alike_by_writer_and_verify(
    run: Run, where: str, inserted: bytes
) -> None:
    led, _ = run
    data = led.paths.out.read_bytes().splitlines(keepends=True)
    before = sum(len(line) for line in data[:2])
    at = before if where == "between" else before + len(data[2]) - 1
    raw = b"".join(data)
    led.paths.out.write_bytes(raw[:at] + inserted + raw[at:])
    append_raw(led.paths.out, b"\r\n")  # and a blank line at the end
    with Ledger.open(led.paths.out) as reader:
        findings = verify(reader)
        with pytest.raises(CorruptLedger) as read:
            reader.pending_repairs()
    assert (findings[0].check, findings[0].file, findings[0].line) == (
        "rows",
        "rollouts.jsonl",
        3,
    )
    assert read.value.line == 3
    led.close()
    with pytest.raises(CorruptLedger) as opened:
        Ledger.open(led.paths.out, lock=led.lock)
    assert opened.value.line == 3
    assert str(opened.value).startswith("line 3 of rollouts.jsonl no longer holds")
    assert "rollout-ledger verify" in str(opened.value)
    assert any("line 3 of rollouts.jsonl" in f.message for f in findings)
