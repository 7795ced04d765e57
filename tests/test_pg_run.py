"""A Ledger on a real PostgreSQL run (SC-1..SC-5): roles, reservations, rows, copies.

Every test runs against the server at ``ROLLOUT_LEDGER_TEST_PG`` (see
``tests/test_store_contract.py``: without one these fail in CI and skip
elsewhere). The store contract itself is tested there; here the same
guarantees are asserted through ``Ledger``, ``RunLock`` and the projections, as
a coordinator and its workers use them.
"""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ledger import (
    ConfigError,
    CorruptLedger,
    Ledger,
    LedgerError,
    LockHeld,
    RunLock,
    RunManifest,
)
from ledger.events import (
    AttemptReserved,
    AttemptsExtended,
    AttemptsReleased,
    Event,
    RerunApproved,
    ResumeStarted,
)
from projections import replan, replay, resume, selected_results, verify
from tests.internals import SCHEMA, encode_row, export_files, import_into_store
from tests.pg_support import (
    PgRun,
    new_url,
    outcome_of,
    pg_run,
    table_count,
)
from tests.test_identity import nemo_configuration

__all__ = ["pg_run"]  # a fixture, imported for pytest

ROOT = Path(__file__).resolve().parents[1]
Admin = psycopg.Connection[Any]


def run_name(url: str) -> str:
    return url.rsplit("run=", 1)[1]


def released_rows(run: PgRun) -> list[dict[str, Any]]:
    """The coordinator resumes the run: the plan's rows, released (REC-3)."""
    led = run.coordinator()
    return resume(led, run.config, run.global_config).plan.dispatch


def key_of(row: dict[str, Any]) -> tuple[int, int]:
    return row["_ng_task_index"], row["_ng_rollout_index"]


def reservation(led: Ledger, task: int, rollout: int, attempt: int) -> AttemptReserved:
    run_id = led.run_created().run_id
    return AttemptReserved(task=task, rollout=rollout, attempt=attempt, run_id=run_id)


def recorded(row: dict[str, Any]) -> dict[str, Any]:
    return outcome_of(row, seed=3, fail_share=0.0)


@pytest.fixture
def file_run(tmp_path: Path) -> Iterator[tuple[Path, RunLock]]:
    """A file-based run of ``nemo_configuration()``, two attempts recorded."""
    config, global_config, rows = nemo_configuration()
    out = tmp_path / "files" / "rollouts.jsonl"
    out.parent.mkdir()
    lock = RunLock(out).acquire()
    manifest = RunManifest.create(None, rows, config, global_config)
    with Ledger.create(out, manifest, rows, lock=lock) as led:
        plan = resume(led, config, global_config).plan.dispatch
        led.reserve_many(plan[:3])
        led.record_many([recorded(row) for row in plan[:2]])
    yield out, lock
    lock.release()


# -- SC-1: a run is named by its URL -----------------------------------------------


def test_sc_1_a_run_is_created_and_opened_by_its_url(pg_run: PgRun) -> None:
    coordinator, worker = pg_run.coordinator(), pg_run.worker()
    assert (coordinator.role, worker.role) == ("writer", "worker")
    for led in (coordinator, worker):
        assert led.folder is None  # kept in the store (SC-2)
        assert led.target == led.where == pg_run.url
        assert led.run_created().max_rollout_attempts >= 1
        assert [e.kind for e in led.events()] == ["run_created"]
        assert led.head() == coordinator.head()
    assert worker.files.read_published("manifest.json") is not None
    with pytest.raises(LedgerError, match="export --files"):
        _ = worker.paths


def test_sc_1_opening_a_run_that_does_not_exist_is_corrupt_ledger(
    pg_url: str,
) -> None:
    with pytest.raises(CorruptLedger, match="no run"):
        Ledger.open(new_url(pg_url, "missing"))


def test_sc_1_creating_a_run_twice_is_refused(pg_run: PgRun) -> None:
    config, global_config, rows = pg_run.config, pg_run.global_config, pg_run.rows
    manifest = RunManifest.create(None, rows, config, global_config)
    with pytest.raises(ConfigError, match="exists already"):
        Ledger.create(pg_run.url, manifest, rows, lock=pg_run.lock)


# -- SC-4: one coordinator, with the session advisory lock --------------------------

_TRY_LOCK = """
import sys
from ledger import LockHeld, RunLock
try:
    RunLock(sys.argv[1]).acquire()
except LockHeld as exc:
    print("LockHeld", exc, flush=True)
else:
    print("acquired", flush=True)
"""

_HOLD_LOCK = """
import sys, time
from ledger import Ledger, RunLock
lock = RunLock(sys.argv[1]).acquire()
led = Ledger.open(sys.argv[1], lock=lock)
print("coordinator", led.role, flush=True)
time.sleep(300)
"""


def _python(script: str, url: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, url],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_sc_4_a_second_coordinator_in_another_process_gets_lock_held(
    pg_run: PgRun,
) -> None:
    other = _python(_TRY_LOCK, pg_run.url)
    out, _ = other.communicate(timeout=60)
    assert out.startswith("LockHeld"), out
    assert f"pid {os.getpid()} on host {socket.gethostname()}" in out
    assert pg_run.lock.held  # the refused attempt took nothing from the holder


def test_sc_4_the_server_releases_the_lock_when_its_holder_is_sigkilled(
    pg_run: PgRun,
) -> None:
    pg_run.lock.release()
    holder = _python(_HOLD_LOCK, pg_run.url)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "coordinator writer"
        with pytest.raises(LockHeld) as caught:
            RunLock(pg_run.url).acquire()
        assert f"pid {holder.pid} on host {socket.gethostname()}" in str(caught.value)
        holder.send_signal(signal.SIGKILL)  # no release: the server ends the session
        holder.wait(timeout=30)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    deadline = time.monotonic() + 15
    while True:
        try:
            pg_run.lock = RunLock(pg_run.url).acquire()
            break
        except LockHeld:
            assert time.monotonic() < deadline, "the killed holder's lock stayed held"
            time.sleep(0.1)
    assert pg_run.coordinator().role == "writer"


def test_sc_4_a_coordinator_needs_the_held_lock_of_its_own_run(
    pg_run: PgRun,
    pg_url: str,
) -> None:
    other = RunLock(new_url(pg_url, "other")).acquire()
    try:
        with pytest.raises(LedgerError, match="not for"):
            Ledger.open(pg_run.url, lock=other)
    finally:
        other.release()
    pg_run.lock.release()
    with pytest.raises(LedgerError, match="not held"):
        Ledger.open(pg_run.url, lock=pg_run.lock)
    pg_run.lock = RunLock(pg_run.url).acquire()


# -- SC-4: workers reserve and record without the lock -----------------------------


def test_sc_4_a_worker_reserves_and_records_without_the_lock(pg_run: PgRun) -> None:
    rows = released_rows(pg_run)
    worker = pg_run.worker()
    assert worker.reserve_many(rows[:3]) == [0, 0, 0]
    worker.record_many([recorded(row) for row in rows[:2]])
    coordinator = pg_run.coordinator()
    kinds = [e.kind for e in coordinator.events()]
    assert kinds[-5:] == ["attempt_reserved"] * 3 + ["result_saved"] * 2
    state = replay(coordinator)
    for row in rows[:2]:
        rollout = state.rollout(row["_ng_task_index"], row["_ng_rollout_index"])
        assert list(rollout.outcomes) == [0]
    # The coordinator sees the worker's reservations: it releases nothing
    # that is in flight or done (REC-3), and the rest again.
    plan = replan(coordinator)
    keys = {key_of(row) for row in plan.dispatch}
    assert keys == {key_of(row) for row in rows[3:]}
    assert plan.counts["in_flight"] == 1


@pytest.mark.parametrize(
    "body",
    [
        AttemptsReleased(dispatch=((0, 0, 1),)),
        ResumeStarted(config_digest="c" * 64, counts={}),
        RerunApproved(task=0, rollout=0, attempt=0, reason="operator"),
        AttemptsExtended(total=2, reason="operator"),
    ],
    ids=["release", "resume", "operator-approval", "operator-extension"],
)
def test_sc_4_a_worker_cannot_append_coordinator_events(
    pg_run: PgRun, body: Event
) -> None:
    worker = pg_run.worker()
    head = worker.head()
    with pytest.raises(LedgerError, match="worker"):
        worker.append(body)
    with pytest.raises(LedgerError, match="worker"):
        worker.append_many([reservation(worker, 0, 0, 0), body])
    assert worker.head() == head == pg_run.coordinator().head()


def test_sc_4_a_worker_cannot_replan_resume_or_save_a_snapshot(pg_run: PgRun) -> None:
    worker = pg_run.worker()
    head = worker.head()
    with pytest.raises(LedgerError):
        replan(worker)
    with pytest.raises(LedgerError):
        resume(worker, pg_run.config, pg_run.global_config)
    with pytest.raises(LedgerError):
        worker.save_snapshot(1, head[1], "v", "p", b"{}")
    with pytest.raises(ConfigError, match="re-judgment"):
        worker.admit_judgment(0, 0, 0, "judge")
    assert pg_run.coordinator().head() == head


# -- SC-3: a reservation names a released attempt, once ---------------------------


def test_sc_3_two_workers_cannot_reserve_the_same_attempt(pg_run: PgRun) -> None:
    rows = released_rows(pg_run)
    first, second = pg_run.worker(), pg_run.worker()  # both before either reserves
    first.reserve(dict(rows[0]))
    head = first.head()
    with pytest.raises(ConfigError, match="already reserved"):
        second.reserve(dict(rows[0]))
    with pytest.raises(ConfigError, match="already reserved"):
        second.reserve_many([dict(rows[1]), dict(rows[0])])  # all or none
    assert second.head() == head
    second.reserve(dict(rows[1]))  # the refusals left the worker usable
    with pytest.raises(ConfigError, match="already reserved"):
        first.reserve(dict(rows[1]))
    reserved = [
        (e.body.task, e.body.rollout)
        for e in pg_run.coordinator().events()
        if isinstance(e.body, AttemptReserved)
    ]
    assert sorted(reserved) == sorted([key_of(rows[0]), key_of(rows[1])])


def test_sc_3_the_database_refuses_a_second_reservation_whoever_appends_it(
    pg_run: PgRun,
) -> None:
    rows = released_rows(pg_run)
    pg_run.worker().reserve(dict(rows[0]))
    coordinator = pg_run.coordinator()  # may append anything, but not this
    body = reservation(coordinator, *key_of(rows[0]), 0)
    head = coordinator.head()
    with pytest.raises(ConfigError, match="already reserved"):
        coordinator.append(body)
    assert coordinator.head() == head


def test_sc_3_nobody_reserves_an_unreleased_attempt(pg_run: PgRun) -> None:
    rows = released_rows(pg_run)
    unreleased = {**rows[0], "_ng_attempt_index": 1}
    with pytest.raises(ConfigError, match="not released"):
        pg_run.worker().reserve(dict(unreleased))
    coordinator = pg_run.coordinator()
    head = coordinator.head()
    with pytest.raises(ConfigError, match="not released"):
        coordinator.append(reservation(coordinator, *key_of(rows[0]), 1))
    # REC-3: a release holds until the next resume_started, in the database too.
    coordinator.append(ResumeStarted(config_digest="c" * 64, counts={}))
    with pytest.raises(ConfigError, match="not released"):
        coordinator.append(reservation(coordinator, *key_of(rows[0]), 0))
    with pytest.raises(ConfigError, match="not released"):
        pg_run.worker().reserve(dict(rows[1]))
    assert coordinator.head()[0] == head[0] + 1


# -- SC-2: rows live in the store ------------------------------------------------


def test_sc_2_rows_are_stored_with_their_events(pg_run: PgRun, pg_admin: Admin) -> None:
    rows = released_rows(pg_run)
    worker = pg_run.worker()
    worker.reserve_many(rows)
    outcomes = [recorded(row) for row in rows[:4]]
    outcomes[3].update(_ng_failure_class="agent_run_error", reward=0.0)  # sidecar
    worker.record_many(outcomes)
    stored = {
        seq: (file, offset, sha, bytes(data))
        for seq, file, offset, sha, data in pg_admin.execute(
            f'SELECT seq, file, "offset", sha256, data FROM {SCHEMA}.rows '
            "WHERE run = %s",
            (run_name(pg_run.url),),
        ).fetchall()
    }
    located = [e for e in worker.events() if hasattr(e.body, "location")]
    assert [e.kind for e in located] == ["result_saved"] * 3 + ["failure_saved"]
    assert sorted(stored) == [e.seq for e in located]
    for event, row in zip(located, outcomes, strict=True):
        where: Any = event.body.location  # type: ignore[union-attr]
        file, offset, sha, data = stored[event.seq]
        assert data == encode_row(row)  # the recorded row's bytes, as given
        assert (file, offset, len(data)) == (where.file, where.offset, where.length)
        assert sha == where.row_sha256 == hashlib.sha256(data).hexdigest()
    # CLI-12 reads them back: the selected rows are the recorded bytes.
    results = list(selected_results(worker, replay(worker)))
    assert len(results) == 3
    for result, row in zip(results, outcomes[:3], strict=True):
        assert result.pop("_ng_decision") == "graded"
        assert encode_row(result) == encode_row(row)
    assert table_count(pg_admin, "rows", run_name(pg_run.url)) == 4


# -- SC-5: the same guarantees; copies keep every hash ---------------------------


def test_sc_5_export_files_gives_a_sqlite_run_with_the_same_head_that_verifies(
    pg_run: PgRun, tmp_path: Path
) -> None:
    rows = released_rows(pg_run)
    worker = pg_run.worker()
    worker.reserve_many(rows)
    outcomes = [recorded(row) for row in rows]
    outcomes[0].update(_ng_failure_class="agent_run_error", reward=0.0)
    worker.record_many(outcomes[:5])
    coordinator = pg_run.coordinator()
    replan(coordinator)  # the retry released; the last attempt still in flight
    assert verify(coordinator) == []
    assert coordinator.verify_chain() is None
    paths = export_files(coordinator, tmp_path / "copy")
    assert paths.db.is_file()
    assert not paths.db.is_symlink()
    with Ledger.open(paths.out) as copy:
        assert copy.folder is not None
        assert copy.head() == coordinator.head()
        assert verify(copy) == []
        assert list(selected_results(copy, replay(copy))) == list(
            selected_results(coordinator, replay(coordinator))
        )
    results = paths.out.read_bytes()
    assert results == b"".join(encode_row(row) for row in outcomes[1:5])
    assert paths.sidecar.read_bytes() == encode_row(outcomes[0])


def test_sc_5_import_into_store_of_a_file_based_run_keeps_its_head(
    file_run: tuple[Path, RunLock], pg_url: str, tmp_path: Path
) -> None:
    out, _ = file_run
    url = new_url(pg_url, "imported")
    with Ledger.open(out) as source:
        head = source.head()
        assert import_into_store(source, url) == head
        expected = list(selected_results(source, replay(source)))
    with Ledger.open(url) as imported:
        assert imported.folder is None
        assert imported.head() == head
        assert verify(imported) == []
        assert list(selected_results(imported, replay(imported))) == expected
        back = export_files(imported, tmp_path / "back")
    with Ledger.open(back.out) as again:
        assert again.head() == head
        assert verify(again) == []
    for name in ("rollouts.jsonl", "rollouts_materialized_inputs.jsonl"):
        assert (back.folder / name).read_bytes() == (out.parent / name).read_bytes()
    with Ledger.open(out) as source, pytest.raises(ConfigError, match="exists"):
        import_into_store(source, url)  # a run is imported once


# -- ID-14 / SC-1: no credential in anything recorded ------------------------------

SECRETS = {
    "PGPASSWORD": "pg-Secret-7f3a9c",
    "JUDGE_API_KEY": "judge-Secret-51be02",
    "HF_TOKEN": "hf-Secret-c0ffee99",
}
POLICY_KEY = "sk-policy-000111222"  # nemo_configuration()'s literal policy_api_key


def _bytes(value: object) -> bytes:
    if isinstance(value, bytes | memoryview):
        return bytes(value)
    return str(value).encode()


def _all_stored_bytes(admin: Admin, run: str) -> bytes:
    found = []
    for table in ("events", "rows", "file_bytes", "published", "run_locks", "runs"):
        for row in admin.execute(
            f"SELECT * FROM {SCHEMA}.{table} WHERE run = %s", (run,)
        ).fetchall():
            found += [_bytes(value) for value in row]
    return b"\n".join(found)


def test_id_14_no_credential_is_recorded_on_postgres(
    pg_url: str, pg_admin: Admin, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    run = PgRun.create(pg_url)
    try:
        rows = released_rows(run)
        worker = run.worker()
        worker.reserve_many(rows)
        worker.record_many([recorded(row) for row in rows[:3]])
        replan(run.coordinator())
        paths = export_files(run.coordinator(), tmp_path / "copy")
        stored = _all_stored_bytes(pg_admin, run_name(run.url))
        files = [p for p in paths.folder.rglob("*") if p.is_file()]
        exported = b"".join(p.read_bytes() for p in files)
        assert b"run_created" in stored
        assert b"attempt_reserved" in stored
        for secret in (*SECRETS.values(), POLICY_KEY):
            assert secret.encode() not in stored, secret
            assert secret.encode() not in exported, secret
    finally:
        run.close()
