"""SC-5, R-5: ``export --files`` of a run its writer is appending to.

The export copies the log up to the head it read at its start, and of each
collector file the bytes the events up to that head record: the copy is a
consistent prefix that verifies, never a "corrupt" refusal.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import ledger
from ledger import Ledger, RunLock
from ledger.events import AttemptsReleased
from projections import verify
from tests.conftest import MinimalManifest, input_rows

ROWS = 300


class Collector(threading.Thread):
    """Records one row after another (reserve, record) until stopped."""

    def __init__(self, out: Path, created: threading.Event) -> None:
        super().__init__(daemon=True)
        self.out, self.created = out, created
        self.stop = threading.Event()
        self.recorded = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._collect()
        except BaseException as exc:  # reported by the test
            self.error = exc
            self.created.set()

    def _collect(self) -> None:
        rows = input_rows(ROWS, 1)
        with RunLock(self.out) as lock:
            manifest = MinimalManifest(rows)
            with Ledger.create(self.out, manifest, rows, lock=lock) as led:
                keys = tuple((r["_ng_task_index"], 0, 0) for r in rows)
                led.append(AttemptsReleased(dispatch=keys, rejudge=()))
                self.created.set()
                for row in rows:
                    if self.stop.is_set():
                        break
                    led.reserve(row)
                    failed = row["_ng_task_index"] % 3 == 0
                    extra = {"_ng_failure_class": "x"} if failed else {"reward": 1.0}
                    led.record({**row, **extra})
                    self.recorded += 1


@pytest.fixture
def collector(tmp_path: Path) -> Iterator[Collector]:
    created = threading.Event()
    thread = Collector(tmp_path / "run" / "rollouts.jsonl", created)
    thread.out.parent.mkdir()
    thread.start()
    assert created.wait(60)
    yield thread
    thread.stop.set()
    thread.join(60)


def test_sc_5_r_5_export_files_while_a_writer_appends_copies_a_consistent_prefix(
    collector: Collector, tmp_path: Path
) -> None:
    moved = 0
    for number in range(8):
        with Ledger.open(collector.out) as source:
            before = source.head()[0]
        copied = ledger.copy_to_files(collector.out, tmp_path / f"copy{number}")
        with Ledger.open(collector.out) as source:
            after = source.head()[0]
            assert before <= copied.seq <= after
            hashes = {row.seq: bytes(row.hash) for row in source.raw_events(1)}
        moved += after > before
        assert hashes[copied.seq] == copied.head  # a prefix of the source's log
        with Ledger.open(copied.out) as copy:
            # This test's minimal manifest is not the one ``create`` would
            # publish; everything else verifies.
            findings = [f for f in verify(copy) if f.check != "published"]
            assert findings == [], findings
            assert copy.pending_repairs() == []
    assert collector.error is None, collector.error
    assert moved >= 1, "the writer never appended during an export"
