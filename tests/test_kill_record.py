"""EV-12: a writer whose commit fails after its rows went out stops (issue 18).

Rows are written before their events; when the commit that follows fails (a
full disk), the writer must not append after rows that have no events: it
stops, and the next writer's open records them. A row of an attempt never
released still refuses the open, naming its line.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from ledger import Ledger, RunLock, StorageError
from projections import verify
from tests.internals import SQLiteStore
from tests.test_cli_support import (
    CliRun,
    cli_run,
    graded,
    templates,
    write_jsonl,
)

__all__ = ["cli_run", "templates"]


def kinds_by(out: Path, actor: str) -> Counter[str]:
    with Ledger.open(out) as led:
        return Counter(e.kind for e in led.events() if e.actor == actor)


def test_ev_12_a_row_of_an_attempt_never_released_still_refuses_the_open(
    cli_run: CliRun,
) -> None:
    _, plan = cli_run.resume()
    stray = {**plan[0], "_ng_attempt_index": 7, **graded()}
    with cli_run.out.open("a") as handle:
        handle.write(write_jsonl(cli_run.folder / "x.jsonl", [stray]).read_text())
    result = cli_run.invoke("status", cli_run.out, "--publish")
    assert result.exit_code == 3
    assert "line 1" in result.stderr
    assert "not an outcome of an attempt reserved in this run" in result.stderr


def test_ev_12_a_commit_that_fails_after_its_rows_stops_the_writer(
    cli_run: CliRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, plan = cli_run.resume()
    append = SQLiteStore.append_many
    failing = [True]

    def full_disk(self: SQLiteStore, *args: Any, **kwargs: Any) -> Any:
        if failing[0]:
            failing[0] = False
            raise StorageError("database or disk is full", path=self.path)
        return append(self, *args, **kwargs)

    with RunLock(cli_run.out) as lock, Ledger.open(cli_run.out, lock=lock) as led:
        led.reserve(plan[0])
        monkeypatch.setattr(SQLiteStore, "append_many", full_disk)
        with pytest.raises(StorageError, match="disk is full"):
            led.record({**plan[0], **graded()})
        with pytest.raises(StorageError, match="open the run again"):
            led.reserve(plan[1])  # nothing after rows without their events
    with RunLock(cli_run.out) as lock, Ledger.open(cli_run.out, lock=lock) as led:
        assert verify(led) == []
    assert kinds_by(cli_run.out, "repair") == Counter({"result_saved": 1})
