"""SC-4 (issue 18, "two owners"): a coordinator whose lock session ended stops.

The run lock on PostgreSQL is a session advisory lock; the server releases it
when that session ends, also when an administrator terminates it under a live
coordinator (``pg_terminate_backend``). Each acquirer bumps the run's fencing
epoch, and each append of a coordinator checks in its own transaction that the
epoch is still its own and that its lock session still holds the lock: the
holder's next append raises ``LockLost`` and appends nothing, and a second
coordinator takes over cleanly. Against the server at ``ROLLOUT_LEDGER_TEST_PG``.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections import Counter
from contextlib import closing
from typing import Any

import psycopg
import pytest

from ledger import Ledger, LockLost, RunLock, doctor
from ledger.events import FailureBudgetReset
from projections import resume, verify
from tests.internals import (
    PG_SCHEMA_VERSION,
    SCHEMA,
    NewEvent,
    PostgresStore,
    RunUrl,
    acquire_run_lock,
)
from tests.pg_support import (
    PgRun,
    log_facts,
    new_url,
    outcome_of,
    pg_run,
    table_count,
)
from tests.test_store_contract import approvals

__all__ = ["pg_run"]  # a fixture, imported for pytest

Admin = psycopg.Connection[Any]


def run_name(url: str) -> str:
    return url.rsplit("run=", 1)[1]


def terminate_lock_session(admin: Admin, url: str) -> int:
    """End the session holding the run's lock, as an administrator would."""
    found = admin.execute(
        f"SELECT backend_pid FROM {SCHEMA}.run_locks WHERE run = %s",
        (run_name(url),),
    ).fetchone()
    assert found is not None
    pid = int(found[0])
    ended = admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()
    assert ended == (True,)
    # The signal is asynchronous: wait until the backend has exited (and with
    # it, released the lock), as any server version reports it.
    deadline = time.monotonic() + 60
    while admin.execute(
        "SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,)
    ).fetchone():
        assert time.monotonic() < deadline, "the terminated session stayed"
        time.sleep(0.01)
    return pid


def lock_check(url: str) -> str:
    return {c.name: c for c in doctor(url).checks}["run lock"].detail


def in_flight(run: PgRun) -> tuple[Ledger, list[dict[str, Any]]]:
    """The coordinator with two attempts reserved and one answer saved."""
    led = run.coordinator()
    plan = resume(led, run.config, run.global_config).plan.dispatch
    assert len(plan) >= 3
    led.reserve_many(plan[:2])
    led.record(outcome_of(plan[0], seed=5, fail_share=0.0))
    return led, plan


def test_sc_4_a_terminated_lock_session_stops_the_coordinator_before_it_appends(
    pg_run: PgRun, pg_admin: Admin
) -> None:
    led, plan = in_flight(pg_run)
    saved = (plan[0]["_ng_task_index"], plan[0]["_ng_rollout_index"])
    head = led.head()
    run = run_name(pg_run.url)
    counts = {t: table_count(pg_admin, t, run) for t in ("events", "rows")}
    terminate_lock_session(pg_admin, pg_run.url)
    assert lock_check(pg_run.url).startswith("free")  # doctor: nobody holds it

    # The holder's next appends raise, and append nothing: a row, a
    # reservation, an operator's event.
    with pytest.raises(LockLost, match="session holding the run lock ended") as caught:
        led.record(outcome_of(plan[1], seed=5, fail_share=0.0))
    assert caught.value.exit_code == 4
    assert "appended nothing more" in str(caught.value)
    assert "rollout-ledger resume" in str(caught.value)
    with pytest.raises(LockLost):
        led.reserve_many(plan[2:3])
    with pytest.raises(LockLost):
        led.append(
            FailureBudgetReset(excluded_lines=0, before_seq=1, reason="after"),
            actor="operator:t",
        )
    assert led.head() == head
    assert {t: table_count(pg_admin, t, run) for t in counts} == counts

    # A second coordinator takes over cleanly ...
    second = RunLock(pg_run.url).acquire()
    try:
        assert lock_check(pg_run.url).startswith(
            f"held by pid {os.getpid()} on host {socket.gethostname()}"
        )
        with Ledger.open(pg_run.url, lock=second) as taken:
            again = resume(taken, pg_run.config, pg_run.global_config).plan.dispatch
            assert again  # what never ran is dispatched again ...
            keys = {(r["_ng_task_index"], r["_ng_rollout_index"]) for r in again}
            assert saved not in keys  # ... the saved answer is not sampled again
            taken.reserve_many(again[:1])
            assert verify(taken) == []
            facts = log_facts(taken)
        reserved = Counter(facts.reserved)
        assert len(reserved) == 3
        assert max(reserved.values()) == 1  # no attempt reserved twice
        assert facts.unreleased == []
        assert [key[:2] for key in facts.outcomes] == [saved]
    finally:
        second.release()
    # ... and the first stays stopped.
    with pytest.raises(LockLost):
        led.record(outcome_of(plan[1], seed=5, fail_share=0.0))


def test_sc_4_a_coordinator_whose_lock_was_taken_over_appends_nothing(
    pg_run: PgRun, pg_admin: Admin
) -> None:
    """The fencing epoch: the new holder's acquire outranks every older holder."""
    led, plan = in_flight(pg_run)
    terminate_lock_session(pg_admin, pg_run.url)
    second = RunLock(pg_run.url).acquire()  # before the first appends again
    try:
        head = led.head()
        with pytest.raises(LockLost, match="another coordinator took the run lock"):
            led.record(outcome_of(plan[1], seed=5, fail_share=0.0))
        assert led.head() == head
        with Ledger.open(pg_run.url, lock=second) as taken:
            taken.record(outcome_of(plan[1], seed=5, fail_share=0.0))
            assert taken.head()[0] == head[0] + 1
            # A ledger opened again on the lost lock is refused as well.
            with (
                Ledger.open(pg_run.url, lock=pg_run.lock) as stale,
                pytest.raises(LockLost),
            ):
                stale.reserve_many(plan[2:3])
            assert taken.head()[0] == head[0] + 1
    finally:
        second.release()


def test_sc_4_fencing_is_created_on_a_database_migrated_before_it(
    pg_url: str, pg_admin: Admin
) -> None:
    """A database of schema 6 (no fencing table) is migrated when a lock is taken."""
    pg_admin.execute(f"DROP TABLE {SCHEMA}.run_fences")
    pg_admin.execute(f"DELETE FROM {SCHEMA}.migrations WHERE name = '0007_run_fences'")
    pg_admin.execute(
        f"UPDATE {SCHEMA}.meta SET value = '6' WHERE key = 'schema_version'"
    )
    run = PgRun.create(pg_url)
    try:
        led, _ = in_flight(run)
        assert led.head()[0] > 1
        version = pg_admin.execute(
            f"SELECT value FROM {SCHEMA}.meta WHERE key = 'schema_version'"
        ).fetchone()
        assert version == (str(PG_SCHEMA_VERSION),)  # every later migration too
        epochs = pg_admin.execute(f"SELECT epoch FROM {SCHEMA}.run_fences").fetchall()
        assert epochs == [(1,)]
    finally:
        run.close()


def waiting_acquirers(admin: Admin) -> int:
    """Lock sessions of rollout-ledger waiting on a row lock."""
    found = admin.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
        "'rollout-ledger lock' AND wait_event_type = 'Lock'"
    ).fetchone()
    return 0 if found is None else int(found[0])


def test_sc_4_the_fence_is_atomic_with_the_append_a_new_holder_waits_for_it(
    pg_url: str, pg_admin: Admin
) -> None:
    """An append whose fence passed commits before the next holder's epoch.

    Check-then-act would let the old holder's append land after a takeover;
    here the acquirer's epoch bump waits for the append in flight (the fence
    row is held FOR SHARE in its transaction), and every later append of the
    old holder fails.
    """
    url = RunUrl.parse(new_url(pg_url))
    PostgresStore.create(url).close()
    conn = psycopg.connect(url.conninfo, autocommit=True)
    lock = acquire_run_lock(conn, url.run)
    taken: list[RunLock] = []
    with closing(conn), closing(PostgresStore.open(url, writable=True)) as store:
        store.fence_on(lock)
        store.append_many(approvals(1))  # fenced, and held: it appends
        acquirer = threading.Thread(
            target=lambda: taken.append(RunLock(str(url)).acquire())
        )

        def build(ends: dict[str, list[int]]) -> tuple[list[NewEvent], list[None]]:
            # Inside the append's transaction, its fence passed: the lock's
            # session ends and a second coordinator starts taking the lock.
            terminate_lock_session(pg_admin, str(url))
            acquirer.start()
            deadline = time.monotonic() + 60
            while acquirer.is_alive() and not waiting_acquirers(pg_admin):
                assert time.monotonic() < deadline, (
                    "the acquirer neither took nor waited"
                )
                time.sleep(0.01)
            assert acquirer.is_alive(), "the acquirer took the lock mid-append"
            return approvals(1, start=1), [None]

        store.append_built(build)  # commits: its fence held when it was read
        acquirer.join(timeout=60)
        assert len(taken) == 1
        try:
            with pytest.raises(LockLost, match="another coordinator took the run"):
                store.append_many(approvals(1, start=2))
            assert store.head()[0] == 2  # both appends in, the third not
            epoch = pg_admin.execute(
                f"SELECT epoch FROM {SCHEMA}.run_fences WHERE run = %s", (url.run,)
            ).fetchone()
            assert epoch == (lock.epoch + 1,)
        finally:
            taken[0].release()


def test_sc_4_a_deleted_fencing_record_stops_the_coordinator(
    pg_run: PgRun, pg_admin: Admin
) -> None:
    """Without its fencing row no append can prove it holds the lock: none lands."""
    led, plan = in_flight(pg_run)
    head = led.head()
    pg_admin.execute(
        f"DELETE FROM {SCHEMA}.run_fences WHERE run = %s", (run_name(pg_run.url),)
    )
    with pytest.raises(LockLost, match="fencing record was deleted"):
        led.record(outcome_of(plan[1], seed=5, fail_share=0.0))
    assert led.head() == head
