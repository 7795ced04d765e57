"""One ``resume`` replays the log once and decides once (REC-56, P-4).

The state it returns, the snapshot it saves and the files it publishes are
still those a fresh replay of the log gives after it.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from ledger import Ledger
from projections import coverage, decide_all, replay, verify
from tests.test_resume import Run, changed


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Run]:
    made = Run(tmp_path)
    yield made
    made.lock.release()


def _count_calls(monkeypatch: pytest.MonkeyPatch, function: Any) -> list[str]:
    """Replace ``function`` in every projections module that holds it; the calls."""
    calls: list[str] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(function.__name__)
        return function(*args, **kwargs)

    patched = 0
    for name, module in list(sys.modules.items()):
        if name != "projections" and not name.startswith("projections."):
            continue
        for attribute, value in list(vars(module).items()):
            if value is function:
                monkeypatch.setattr(module, attribute, spy)
                patched += 1
    assert patched >= 2  # the package and the modules that call it
    return calls


def _drop_snapshots(run: Run) -> None:
    db = run.out.parent / f"{run.out.stem}_ledger" / "ledger.db"
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM snapshots")
    conn.close()


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The ``from_seq`` of every read of a ledger's rows for a fold."""
    reads: list[int] = []
    original: Callable[..., Any] = Ledger.rows_for_fold

    def counting(self: Ledger, from_seq: int = 1) -> Any:
        reads.append(from_seq)
        return original(self, from_seq)

    monkeypatch.setattr(Ledger, "rows_for_fold", counting)
    return reads


def _record_timeouts(run: Run) -> None:
    plan = run.resume().plan
    with Ledger.open(run.out, lock=run.lock) as led:
        for row in plan.dispatch:
            led.reserve(row)
            led.record(
                {
                    **row,
                    "_ng_failure_class": "timeout_exceeded",
                    "_ng_failure_terminal": True,
                    "_ng_failure_message": "agent ran out of time",
                }
            )


def _encoded(state: Any) -> bytes:
    return msgspec.msgpack.encode(state)


def test_a_resume_with_operator_events_replays_once_and_decides_once(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    _record_timeouts(run)
    replays = _count_calls(monkeypatch, replay)
    decides = _count_calls(monkeypatch, decide_all)
    reads = _count_reads(monkeypatch)
    # Every kind of pending event: an extension, a policy change (all outcomes
    # reclassified, REC-60), an approval and the gate's drift_accepted.
    result = run.resume(
        changed(run.config, "num_samples_in_parallel", 8),
        extend_attempts=4,
        retry_terminal_timeouts=True,
        approvals=[(0, 0, 0)],
        reason="ops",
    )
    assert replays == ["replay"]
    assert decides == ["decide_all"]
    assert len(reads) == 1
    monkeypatch.undo()
    assert run.kinds()[-6:] == [
        "attempts_extended",
        "policy_changed",
        "rerun_approved",
        "drift_accepted",
        "resume_started",
        "attempts_released",
    ]
    with Ledger.open(run.out) as led:
        fresh = replay(led, use_snapshot=False)
        assert verify(led) == []  # the snapshot and the published files hold
    assert _encoded(result.state) == _encoded(fresh)
    assert result.state.drift[-1].at != ""  # the time the log gave it
    assert result.decisions == decide_all(fresh)
    assert coverage(fresh).decisions["terminal"] == 0


def test_a_plain_resume_replays_once_and_decides_once(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    _record_timeouts(run)
    _drop_snapshots(run)  # no snapshot of what is left: a full replay
    replays = _count_calls(monkeypatch, replay)
    decides = _count_calls(monkeypatch, decide_all)
    result = run.resume()
    assert (replays, decides) == (["replay"], ["decide_all"])
    monkeypatch.undo()
    with Ledger.open(run.out) as led:
        fresh = replay(led, use_snapshot=False)
        assert verify(led) == []
    assert _encoded(result.state) == _encoded(fresh)


def test_p_8_a_resume_from_what_is_left_replays_nothing_and_decides_once(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    """P-8: after a resume, the next one starts from the snapshot of what is left."""
    _record_timeouts(run)
    run.resume()  # saves the snapshot of what is left
    replays = _count_calls(monkeypatch, replay)
    decides = _count_calls(monkeypatch, decide_all)
    result = run.resume()
    assert (replays, decides) == ([], ["decide_all"])
    monkeypatch.undo()
    assert result.state.settled is not None
    assert result.state.settled.rollouts > 0
    with Ledger.open(run.out) as led:
        fresh = replay(led, use_snapshot=False)
        assert verify(led) == []
    whole = decide_all(fresh)
    assert result.decisions == {key: whole[key] for key in result.decisions}
    assert coverage(result.state, result.decisions) == coverage(fresh, whole)
    assert result.state.expected == fresh.expected


def test_a_dry_run_replays_once_and_decides_once(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    _record_timeouts(run)
    replays = _count_calls(monkeypatch, replay)
    decides = _count_calls(monkeypatch, decide_all)
    with Ledger.open(run.out) as led:
        from projections import resume

        result = resume(
            led,
            run.config,
            run.global_config,
            retry_terminal_timeouts=True,
            dry_run=True,
        )
    assert (replays, decides) == (["replay"], ["decide_all"])
    assert len(result.plan.dispatch) == 6  # the timeouts, retried under the change


@pytest.mark.parametrize("left", [False, True], ids=["replayed", "what-is-left"])
def test_outcomes_recorded_since_the_replay_are_folded_and_decided(
    run: Run, monkeypatch: pytest.MonkeyPatch, left: bool
) -> None:
    # On PostgreSQL a worker may record between the replay and the commit
    # (SC-4): the state and the published coverage are then the log's.
    # The module, not the function the package exports under its name.
    resume_module = sys.modules["projections.operations.resuming"]
    released = run.resume().plan.dispatch
    build_plan = resume_module.build_plan

    def racing(ledger: Ledger, *args: Any, **options: Any) -> Any:
        plan = build_plan(ledger, *args, **options)
        row = dict(released[0])
        ledger.reserve(row)
        ledger.record({**row, "reward": 1.0, "response": {"output": []}})
        return plan

    if not left:
        _drop_snapshots(run)  # a full replay
    monkeypatch.setattr(resume_module, "build_plan", racing)
    decides = _count_calls(monkeypatch, decide_all)
    result = run.resume()
    assert decides == ["decide_all", "decide_all"]  # the plan's, then the log's
    monkeypatch.undo()
    with Ledger.open(run.out) as led:
        fresh = replay(led, use_snapshot=False)
        assert verify(led) == []
    assert (result.state.settled is not None) == left
    if left:  # P-8: what is left, and the settled sums
        assert coverage(result.state) == coverage(fresh)
    else:
        assert _encoded(result.state) == _encoded(fresh)
    assert coverage(fresh).decisions["complete"] == 1
