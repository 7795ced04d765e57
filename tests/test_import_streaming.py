"""An import streams (P-9): bounded batches, no event held, the same log as ever.

P-9 asks an import of a million rollouts to stay under 500 MiB; these tests
show the properties that make it so, without timing anything: the log is
appended in batches of at most ``BATCH`` events, what the import holds grows
by a few dozen bytes a row (the encoded index entry and the key), not by the
events, and what it records is exactly what it recorded before streaming.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path
from typing import Any

import msgspec
import pytest

from ledger import Ledger, RunLock, import_legacy_run
from ledger.events import RunCreated, encode_body
from projections import decide_all, import_run, replay
from tests.conftest import input_rows
from tests.internals import SQLiteStore, TaskDecisions, legacy_log
from tests.test_legacy_import import failure, lines, make_run, result


def _run(folder: Path, tasks: int, rollouts: int = 2) -> Path:
    """A run of ``tasks`` x ``rollouts``: a failure then a result for each rollout."""
    rows = input_rows(tasks, rollouts)
    keys = [(r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows]
    return make_run(
        folder,
        inputs=rows,
        sidecar=lines(*(failure(t, r) for t, r in keys)),
        out=lines(*(result(t, r) for t, r in keys)),
    )


def _batches(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The kinds of the events of each ``append_many`` call, as they come."""
    append = SQLiteStore.append_many
    calls: list[list[str]] = []

    def counted(self: SQLiteStore, events: Any, **kwargs: Any) -> Any:
        calls.append([event.kind for event in events])
        return append(self, events, **kwargs)

    monkeypatch.setattr(SQLiteStore, "append_many", counted)
    return calls


def test_p_9_import_appends_in_bounded_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(legacy_log, "BATCH", 4)
    calls = _batches(monkeypatch)
    out = _run(tmp_path, tasks=5)  # 10 rollouts: 20 outcome rows
    report = import_run(out).report
    assert calls[0] == ["run_created", "legacy_imported"]
    assert [len(c) for c in calls[1:]] == [4, 4, 4, 4, 4]
    assert [k for c in calls[1:] for k in c] == ["failure_saved"] * 10 + [
        "result_saved"
    ] * 10
    assert report.kinds == {
        "run_created": 1,
        "legacy_imported": 1,
        "failure_saved": 10,
        "result_saved": 10,
    }
    # The report reads its events back from the log it wrote, in seq order.
    assert len(report.events) == 22
    with Ledger.open(out) as reader:
        assert list(report.events) == list(reader.events())
    assert [e.seq for e in report.events[20:]] == [21, 22]
    assert report.events[-1].kind == "result_saved"


def _held_by_import(folder: Path, tasks: int, *, dry_run: bool) -> int:
    """The most memory ``import_legacy_run`` held at once, in bytes (tracemalloc).

    A dry run's report (its events) is kept while the peak is read.
    """
    out = _run(folder, tasks)
    tracemalloc.start()
    try:
        with RunLock(out) as lock:
            tracemalloc.reset_peak()
            before = tracemalloc.get_traced_memory()[0]
            report = import_legacy_run(
                out, lock=None if dry_run else lock, dry_run=dry_run
            )
            assert len(report.events) == 2 + 4 * tasks
            return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("dry_run", [False, True])
def test_p_9_import_holds_no_event_per_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dry_run: bool
) -> None:
    # 4,000 more rollouts, 8,000 more outcome rows: an import that held its
    # events (~1-2 KB each as bodies, encodings and stored rows) grew by
    # megabytes; one that streams grows by the index entry and key of each
    # input row (batches of 100 events are all it holds of the rest; a dry
    # run keeps its events in a temporary file, and their offsets).
    monkeypatch.setattr(legacy_log, "BATCH", 100)
    _held_by_import(tmp_path / "first", tasks=50, dry_run=dry_run)  # lazy imports
    small = _held_by_import(tmp_path / "small", tasks=500, dry_run=dry_run)
    large = _held_by_import(tmp_path / "large", tasks=2500, dry_run=dry_run)
    assert large - small < 4000 * 500  # ~200 bytes a rollout; holding: ~1,500


def test_p_9_spliced_run_created_is_the_whole_body_encoded(tmp_path: Path) -> None:
    out = _run(tmp_path, tasks=3)
    import_run(out)
    with Ledger.open(out) as reader:
        row = next(reader.raw_events(1))
    body = msgspec.json.decode(row.body, type=RunCreated)
    first, second = body.index[0][3], body.index[1][3]  # the rows' lengths
    assert body.index[:2] == (
        (0, 0, 0, first, "simple_agent", None),
        (0, 1, first, second, "simple_agent", None),
    )
    assert encode_body(body) == bytes(row.body)


def test_p_9_decisions_a_task_at_a_time_are_decide_all(tmp_path: Path) -> None:
    out = make_run(
        tmp_path,
        inputs=input_rows(3, 3),
        sidecar=lines(
            failure(0, 0),
            {**failure(1, 0), "_ng_omitted": True, "_ng_omission_reason": "x"},
            {**failure(2, 0), "_ng_omitted": True, "_ng_omission_reason": "x"},
        ),
        out=lines(result(0, 1), result(1, 1), result(1, 2)),
    )
    state = import_run(out).state
    lazy = TaskDecisions(state)
    assert dict(lazy) == decide_all(state)
    assert len(lazy) == state.expected == 9
    assert lazy[1, 0].value == "omitted"  # REC-35: beside a complete rollout
    assert lazy[2, 0].value != "omitted"


def test_p_9_replay_of_an_import_is_the_fold_of_its_events(tmp_path: Path) -> None:
    # Replay decodes run_created's index an entry at a time: the same state as
    # the fold of the decoded events.
    out = _run(tmp_path, tasks=4)
    import_run(out)
    with Ledger.open(out) as reader:
        streamed = replay(reader, use_snapshot=False)
        folded = replay(list(reader.events()))
    assert msgspec.msgpack.encode(streamed) == msgspec.msgpack.encode(folded)


def test_p_9_dry_run_shows_the_events_the_import_records(tmp_path: Path) -> None:
    dry = import_run(_run(tmp_path / "dry", tasks=3), dry_run=True)
    real = import_run(_run(tmp_path / "real", tasks=3))
    assert not (tmp_path / "dry" / "rollouts_ledger").exists()
    assert len(dry.report.events) == len(real.report.events) == 14
    assert [(e.seq, e.kind) for e in dry.report.events] == [
        (e.seq, e.kind) for e in real.report.events
    ]
    assert [e.body for e in dry.report.events[2:]] == [
        e.body for e in real.report.events[2:]
    ]
    assert dry.report.events[-1].hash == list(dry.report.events)[-1].hash
    assert dry.coverage.decisions == real.coverage.decisions
