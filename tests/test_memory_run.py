"""The in-memory backend (``memory://NAME``) proves the store seam (SC-6).

A run kept in memory goes through the same public API as a run in a folder or
on PostgreSQL: created, released, reserved, recorded, replayed and verified,
with the same events giving the same hash chain as in a folder.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger import Clock, Ledger, LedgerError, LockHeld, RunLock, RunManifest
from projections import check_complete, coverage, publish, replan, replay, verify
from tests.conftest import input_rows
from tests.internals import forget_all


@pytest.fixture
def memory_url() -> Iterator[str]:
    """A fresh run name in this process's memory, dropped afterwards."""
    yield f"memory://t-{uuid.uuid4().hex[:12]}"
    forget_all()


def collect(led: Ledger) -> int:
    """Reserve and record a rewarded row for every attempt the plan releases."""
    plan = replan(led)
    for row in plan.dispatch:
        led.reserve(row)
        led.record({**row, "reward": 1.0, "response": {"output": ["4"]}})
    return len(plan.dispatch)


def plain_rows() -> list[dict[str, Any]]:
    """Input rows without an agent reference (no server blocks needed)."""
    return [
        {key: value for key, value in row.items() if key != "agent_ref"}
        for row in input_rows()
    ]


def manifest(rows: list[dict[str, Any]]) -> RunManifest:
    """A real manifest of a small configuration, the same on every call."""
    config = {"policy_model": {"model": "m", "temperature": 0.0}}
    return RunManifest.create(None, rows, config, {}, clock=Clock(seed=3))


def run_once(out: Path | str) -> tuple[int, bytes]:
    rows = plain_rows()
    with (
        RunLock(out) as lock,
        Ledger.create(out, manifest(rows), rows, lock=lock, clock=Clock(seed=7)) as led,
    ):
        assert collect(led) == len(rows)
        state = replay(led)
        check_complete(state)  # raises unless every rollout is complete
        assert coverage(state).decisions["complete"] == len(rows)
        publish(led, state)  # coverage.json, as every command publishes it
        assert verify(led) == []
        return led.head()


def test_sc_6_a_memory_run_records_replays_and_verifies(memory_url: str) -> None:
    seq, head = run_once(memory_url)
    assert seq > 1
    with Ledger.open(memory_url) as reader:
        assert reader.role == "reader"
        assert reader.head() == (seq, head)
        assert reader.folder is None


def test_sc_5_the_same_events_give_the_same_chain_in_memory_and_in_a_folder(
    memory_url: str, tmp_path: Path
) -> None:
    # The same name: events locate rows in files named after the run.
    name = memory_url.removeprefix("memory://")
    assert run_once(memory_url) == run_once(tmp_path / f"{name}.jsonl")


def test_ev_40_a_memory_run_has_one_lock_holder(memory_url: str) -> None:
    rows = plain_rows()
    with RunLock(memory_url) as lock:
        Ledger.create(memory_url, manifest(rows), rows, lock=lock).close()
        with pytest.raises(LockHeld):
            RunLock(memory_url).acquire()
    with RunLock(memory_url):  # released: free again
        pass


def test_ev_12_a_reader_of_a_memory_run_cannot_append(memory_url: str) -> None:
    rows = plain_rows()
    with RunLock(memory_url) as lock:
        Ledger.create(memory_url, manifest(rows), rows, lock=lock).close()
    with Ledger.open(memory_url) as reader, pytest.raises(LedgerError) as caught:
        reader.reserve(dict(rows[0]))
    assert caught.value.exit_code == 3
    assert "read-only" in str(caught.value)


def test_cli_2_creating_a_memory_run_twice_is_refused(memory_url: str) -> None:
    rows = plain_rows()
    with RunLock(memory_url) as lock:
        Ledger.create(memory_url, manifest(rows), rows, lock=lock).close()
        with pytest.raises(LedgerError, match="exists already"):
            Ledger.create(memory_url, manifest(rows), rows, lock=lock)
