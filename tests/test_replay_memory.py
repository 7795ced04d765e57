"""P-3: a full replay of a large log stays within 200 MiB of peak RSS.

The log is synthetic but shaped like a run: ~100k rollouts for 1M events, each
rollout reserved and recorded five times (four failures of different kinds,
with model calls and a wall time that differs per row so the fold's facts
cache cannot make every row free, then a graded result). It is built fast,
straight through the store's ``append_many`` in batches of 10k (the chain is
real, the rows behind the events are not needed to replay). A child process
opens the run as a reader, replays it into every projection (the state, every
decision, the coverage) and reports its peak RSS: ``VmHWM`` of
``/proc/self/status``, the same figure as ``ru_maxrss`` for a fresh process,
because Linux keeps ``ru_maxrss`` across ``execve`` and the child of a large
pytest process would report its parent's peak (``ru_maxrss`` is the fallback
elsewhere).

Size: the default suite replays 200k events (20k rollouts), because building
and replaying 1M events takes ~70 s on this kind of machine (~2 cores), most
of it in ``Ledger.events`` itself. The bound is scaled honestly: the child's
RSS after its imports and the open (``base``, ~40 MiB) is a fixed cost, and
what the replay adds grows linearly with the log (the state holds a small
record per attempt), so a log of N events may add at most ``(200 MiB - base)
* N / 1M``. ``ROLLOUT_LEDGER_REPLAY_EVENTS=1000000`` runs the full size
against the plain 200 MiB bound.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from ledger import Clock, Ledger, RowFacts, RunLock, row_facts
from ledger.events import (
    AttemptReserved,
    Event,
    FailureSaved,
    Location,
    ResultSaved,
    encode_body,
    kind_of,
)
from tests.conftest import MinimalManifest, input_rows
from tests.helpers_history import agent_timeout, failure, graded, legacy_failure
from tests.internals import NewEvent, RunPaths, SQLiteStore

pytestmark = pytest.mark.slow

FULL_EVENTS = 1_000_000
BOUND_MIB = 200
EVENTS = int(os.environ.get("ROLLOUT_LEDGER_REPLAY_EVENTS", "200000"))
ATTEMPTS = 5  # events per rollout: a reservation and an outcome per attempt
BATCH = 10_000
MIB = 1024  # ru_maxrss is in KiB on Linux

_FAILURES = (
    row_facts({**agent_timeout(last_status=503), "_ng_run_id": "0" * 32}),
    row_facts({**legacy_failure("transient"), "_ng_run_id": "0" * 32}),
    row_facts({**failure("session_lost", stage="seed"), "_ng_run_id": "0" * 32}),
    row_facts({**failure("judge_failed", stage="verification", answer=True)}),
)
_RESULT = row_facts(graded(1.0))
_LOCATION = Location(file="big.jsonl", offset=0, length=100, row_sha256="0" * 64)

_CHILD = textwrap.dedent(
    """
    import json, resource, sys

    from ledger import Ledger
    from projections import coverage, decide_all, replay

    def peak():
        # VmHWM: this process's own peak. ru_maxrss would do on a fresh
        # process, but Linux keeps it across execve, so a child of a big
        # pytest process would report its parent's peak instead.
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    with Ledger.open(sys.argv[1]) as led:
        base = peak()
        state = replay(led, use_snapshot=False)
        report = coverage(state, decide_all(state)).to_dict()
    print(json.dumps({"base": base, "peak": peak(), "seq": state.as_of_seq,
                      "expected": report["expected"],
                      "complete": report["decisions"]["complete"]}))
    """
)


def _outcome(task: int, rollout: int, attempt: int, number: int) -> Event:
    key = {"task": task, "rollout": rollout, "attempt": attempt}
    # A wall time per row: real rows rarely share every fact.
    wallclock = float(number % 100_003) + 0.5
    if attempt == ATTEMPTS - 1:
        facts: RowFacts = msgspec.structs.replace(_RESULT, wallclock=wallclock)
        return ResultSaved(**key, location=_LOCATION, facts=facts)
    facts = msgspec.structs.replace(_FAILURES[attempt], wallclock=wallclock)
    return FailureSaved(**key, location=_LOCATION, sidecar_line=number, facts=facts)


def _bodies(keys: list[tuple[int, int]], run_id: str) -> Iterator[Event]:
    number = 0
    for attempt in range(ATTEMPTS):
        for task, rollout in keys:
            yield AttemptReserved(
                task=task, rollout=rollout, attempt=attempt, run_id=run_id
            )
            yield _outcome(task, rollout, attempt, number)
            number += 1


def build_log(out: Path, events: int) -> int:
    """A run of ``events // 10`` rollouts with five attempts each; its head seq."""
    rows = input_rows(max(1, events // (2 * ATTEMPTS * 4)), 4)
    with RunLock(out) as lock:
        manifest = MinimalManifest(rows, max_rollout_attempts=ATTEMPTS)
        Ledger.create(out, manifest, rows, lock=lock, clock=Clock(seed=3)).close()
        run_id = str(manifest.model_dump()["run_id"])
        keys = [(r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows]
        store = SQLiteStore.open(RunPaths.of(out).db, writable=True)
        try:
            batch: list[NewEvent] = []
            for body in _bodies(keys, run_id):
                at = "2026-01-01T00:00:00.000000Z"
                batch.append(
                    NewEvent(kind_of(body), at, "collector", encode_body(body))
                )
                if len(batch) == BATCH:
                    store.append_many(batch)
                    batch = []
            store.append_many(batch)
            return store.head()[0]
        finally:
            store.close()


def replay_in_child(out: Path) -> dict[str, Any]:
    """Replay ``out`` in a fresh interpreter; what it measured."""
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(out)],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parents[1],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def allowed_peak_kib(base_kib: int, events: int) -> float:
    """P-3's bound scaled to ``events``: the fixed base plus a linear share."""
    share = min(1.0, events / FULL_EVENTS)
    return base_kib + (BOUND_MIB * MIB - base_kib) * share


def test_p_3_replay_peak_rss_stays_within_the_bound(tmp_path: Path) -> None:
    out = tmp_path / "big.jsonl"
    head = build_log(out, EVENTS)
    measured = replay_in_child(out)
    rollouts = (head - 1) // (2 * ATTEMPTS)
    assert (measured["seq"], measured["expected"]) == (head, rollouts)
    assert measured["complete"] == rollouts
    bound = allowed_peak_kib(measured["base"], head - 1)
    print(
        f"P-3: {head - 1} events, base {measured['base'] / MIB:.1f} MiB, "
        f"peak {measured['peak'] / MIB:.1f} MiB, bound {bound / MIB:.1f} MiB"
    )
    assert measured["peak"] <= bound, (
        f"peak RSS {measured['peak'] / MIB:.1f} MiB over {bound / MIB:.1f} MiB "
        f"for {head - 1} events (base {measured['base'] / MIB:.1f} MiB)"
    )


def test_p_3_reading_events_costs_no_path_work_per_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "small.jsonl"
    head = build_log(out, 2000)
    calls = 0
    db = RunPaths.db

    def counted(self: RunPaths) -> Path:
        nonlocal calls
        calls += 1
        return db.fget(self)  # type: ignore[no-any-return, attr-defined]

    with Ledger.open(out) as led:
        monkeypatch.setattr(RunPaths, "db", property(counted))
        assert sum(1 for _ in led.events()) == head
    assert calls <= 1
