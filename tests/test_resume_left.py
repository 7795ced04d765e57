"""P-8 and REC-55: a resume in proportion to the work left, the gate as strong.

A resume (and ``status``) after an earlier resume starts from the snapshot of
what is left: the state with only the rollouts still to decide, the settled
ones summed. These tests hold it to what a full replay gives (the plan, the
counts, the coverage, the reward figures), show that it reads no
materialized row it does not dispatch, that it falls back to a full replay
when an event reopens a settled rollout, and that a changed input is still
refused (REC-55), whatever the stat proof that spares the hash.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from click.testing import CliRunner

from cli import main
from ledger import IdentityMismatch, Ledger, RunLock, RunManifest
from projections import (
    coverage,
    decide_all,
    replay,
    resume,
    reward_metrics,
    status,
    verify,
)
from tests.internals import (
    InputsSeen,
    files_module,
    inputs_seen_module,
    load_open,
    save_open,
    still_seen,
)
from tests.test_identity import nemo_configuration

TASKS, REPEATS = 12, 4
AGENT = {"type": "responses_api_agents", "name": "math_agent"}


def _rows() -> list[dict[str, Any]]:
    return [
        {
            "_ng_task_index": task,
            "_ng_rollout_index": rollout,
            "agent_ref": dict(AGENT),
            "responses_create_params": {
                "input": [{"role": "user", "content": f"Problem {task} " + "x" * 40}]
            },
        }
        for task in range(TASKS)
        for rollout in range(REPEATS)
    ]


def _failure(row: dict[str, Any], cls: str, **more: Any) -> dict[str, Any]:
    return {**row, "_ng_failure_class": cls, "_ng_failure_message": cls, **more}


def _result(row: dict[str, Any], reward: float) -> dict[str, Any]:
    response = {"output": [{"type": "message", "content": [{"text": "42"}]}]}
    return {**row, "reward": reward, "response": response}


def _fate(task: int, rollout: int) -> str:
    """One fate per rollout, every kind of decision among them."""
    fates = ("ok", "ok", "ok", "retry", "terminal", "exhausted", "judge", "pending")
    return fates[(task * REPEATS + rollout) % len(fates)] if task % 3 else "ok"


class Run:
    """A run with every kind of decision, resumed once (the snapshot saved)."""

    def __init__(self, folder: Path) -> None:
        self.config, self.global_config, _ = nemo_configuration()
        self.rows = _rows()
        self.out = folder / "rollouts.jsonl"
        self.lock = RunLock(self.out).acquire()
        manifest = RunManifest.create(None, self.rows, self.config, self.global_config)
        Ledger.create(self.out, manifest, self.rows, lock=self.lock).close()
        for _ in range(3):  # three rounds: failures pile up to the cap
            self._round()

    def resume(self, **options: Any) -> Any:
        with Ledger.open(self.out, lock=self.lock) as led:
            return resume(led, self.config, self.global_config, **options)

    def _round(self) -> None:
        plan = self.resume().plan
        with Ledger.open(self.out, lock=self.lock) as led:
            for row in plan.dispatch:
                fate = _fate(row["_ng_task_index"], row["_ng_rollout_index"])
                attempt = row["_ng_attempt_index"]
                if fate == "pending" or (fate == "retry" and attempt > 0):
                    continue  # never dispatched, or killed before it reserved
                led.reserve(row)
                reward = (row["_ng_task_index"] + row["_ng_rollout_index"]) % 3 / 2
                if fate == "ok":
                    led.record(_result(row, reward))
                elif fate == "exhausted" or (fate == "retry" and attempt == 0):
                    led.record(_failure(row, "transient"))
                elif fate == "terminal":
                    failed = _failure(row, "timeout_exceeded")
                    led.record({**failed, "_ng_failure_terminal": True})
                elif fate == "judge":
                    failed = _failure(_result(row, 0.0), "judge_failed")
                    led.record({**failed, "_ng_failure_judge_error": "502"})

    def fresh(self) -> Any:
        with Ledger.open(self.out) as led:
            return replay(led, use_snapshot=False)

    @property
    def materialized(self) -> Path:
        return self.out.with_name(f"{self.out.stem}_materialized_inputs.jsonl")


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Run]:
    # A file written less than the clock's tick before its read is hashed
    # again (tested apart below); here every file is that fresh.
    monkeypatch.setattr(inputs_seen_module, "_RACY_NS", 0)
    made = Run(tmp_path)
    yield made
    made.lock.release()


def _drop_snapshots(run: Run) -> None:
    db = run.out.parent / f"{run.out.stem}_ledger" / "ledger.db"
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM snapshots")
    conn.close()


def _keys(items: Any) -> list[tuple[int, int, int]]:
    return [
        (row["_ng_task_index"], row["_ng_rollout_index"], row["_ng_attempt_index"])
        for row in items
    ]


def test_p_8_the_run_has_every_decision(run: Run) -> None:
    values = {d.value for d in decide_all(run.fresh()).values()}
    assert {
        "complete",
        "retry",
        "terminal",
        "exhausted",
        "rejudge",
        "pending",
    } <= values


def test_p_8_a_resume_from_what_is_left_plans_as_a_full_replay(run: Run) -> None:
    left = run.resume(dry_run=True)
    assert left.state.settled is not None  # the snapshot of what is left was used
    assert left.state.settled.rollouts > 0
    assert len(left.state.rollouts) < TASKS  # fewer tasks held than the run has
    _drop_snapshots(run)
    whole = run.resume(dry_run=True)
    assert whole.state.settled is None
    assert _keys(left.plan.dispatch) == _keys(whole.plan.dispatch)
    assert left.plan.dispatch == whole.plan.dispatch
    assert left.plan.rejudge == whole.plan.rejudge
    assert left.plan.held == whole.plan.held
    assert left.plan.counts == whole.plan.counts
    assert left.state.expected == whole.state.expected == TASKS * REPEATS
    assert coverage(left.state, left.decisions) == coverage(whole.state)
    for options in ({}, {"count_failure_classes_as_zero": True},
                    {"count_missing_rollouts_as_zero": True}):  # fmt: skip
        with Ledger.open(run.out) as led:
            ours = reward_metrics(led, left.state, **options)
            theirs = reward_metrics(led, whole.state, **options)
        assert ours == theirs, options


def test_p_8_status_from_what_is_left_is_a_full_replay_s(run: Run) -> None:
    with Ledger.open(run.out) as led:
        left = status(led)
    assert left.state.settled is not None
    _drop_snapshots(run)
    with Ledger.open(run.out) as led:
        whole = status(led)
    assert whole.state.settled is None
    assert left.coverage == whole.coverage
    assert left.metrics == whole.metrics
    assert left.held == whole.held


class _Spy:
    """Every byte range read from one file, through ``ledger.files``'s ``open``."""

    def __init__(self, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.path, self.ranges = path.resolve(), list[tuple[int, int]]()
        real = open
        spy = self
        fds: set[int] = set()

        class Tracked:
            def __init__(self, handle: Any) -> None:
                self._handle = handle

            def read(self, size: int = -1) -> bytes:
                start = self._handle.tell()
                data: bytes = self._handle.read(size)
                spy.ranges.append((start, len(data)))
                return data

            def __getattr__(self, name: str) -> Any:
                return getattr(self._handle, name)

            def close(self) -> None:
                fds.discard(self._handle.fileno())  # the number may be reused
                self._handle.close()

            def __enter__(self) -> Tracked:
                return self

            def __exit__(self, *exc: object) -> None:
                self.close()

        real_pread = os.pread

        def tracking(file: Any, *args: Any, **kwargs: Any) -> Any:
            handle = real(file, *args, **kwargs)
            if isinstance(file, str | Path) and Path(file).resolve() == spy.path:
                fds.add(handle.fileno())
                return Tracked(handle)
            return handle

        def pread(fd: int, length: int, offset: int) -> bytes:
            data = real_pread(fd, length, offset)
            if fd in fds:
                spy.ranges.append((offset, len(data)))
            return data

        monkeypatch.setattr(files_module, "open", tracking, raising=False)
        monkeypatch.setattr(os, "pread", pread)


def test_p_8_a_resume_after_a_kill_reads_the_tail_once(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fixture's results were recorded after the last resume's snapshot:
    # the tail a killed collector leaves. It is read once, replay's way.
    with Ledger.open(run.out) as led:
        head = led.head()[0]
    reads: list[int] = []
    decoded: list[int] = []
    fold_read = Ledger.rows_for_fold
    events_read = Ledger.events

    def counting_fold(self: Ledger, from_seq: int = 1) -> Any:
        reads.append(from_seq)
        return fold_read(self, from_seq)

    def counting_events(self: Ledger, from_seq: int = 1, **kw: Any) -> Any:
        decoded.append(from_seq)
        return events_read(self, from_seq, **kw)

    monkeypatch.setattr(Ledger, "rows_for_fold", counting_fold)
    monkeypatch.setattr(Ledger, "events", counting_events)
    found = run.resume(dry_run=True)
    assert found.state.settled is not None  # from the snapshot of what is left
    assert found.state.as_of_seq == head
    assert len(reads) == 1
    assert 1 < reads[0] < head  # a tail after the snapshot, not empty
    assert decoded == []  # never decoded a second time


def test_p_8_a_resume_with_a_snapshot_reads_no_row_it_does_not_dispatch(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    spy = _Spy(run.materialized, monkeypatch)
    found = run.resume(dry_run=True)
    assert found.state.settled is not None
    dispatched = {
        (found.state.rollout(t, r).offset, found.state.rollout(t, r).length)
        for t, r, _ in _keys(found.plan.dispatch)
    }
    assert dispatched  # the plan dispatches something: the check means something
    read = {(start, length) for start, length in spy.ranges if length}
    assert read == dispatched
    # The spy sees a full read: without the snapshot the whole file is hashed.
    spy.ranges.clear()
    _drop_snapshots(run)
    run.resume(dry_run=True)
    size = run.materialized.stat().st_size
    assert sum(length for _, length in spy.ranges) >= size


def _refused(run: Run) -> None:
    with pytest.raises(IdentityMismatch) as caught:
        run.resume(dry_run=True)
    assert "materialized" in str(caught.value) or "input" in str(caught.value)


def _edit_in_place(path: Path) -> None:
    """Change one byte of the last row, keeping the size and the modification time."""
    before = path.stat()
    data = bytearray(path.read_bytes())
    at = data.rindex(b"x")
    data[at : at + 1] = b"y"
    with open(path, "r+b") as handle:  # the same inode
        handle.write(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    assert path.stat().st_mtime_ns == before.st_mtime_ns


def _copied_over(path: Path) -> None:
    """Replace the file by an edited copy that keeps its times (``cp -p``)."""
    copy = path.with_name("copy.jsonl")
    shutil.copy2(path, copy)
    data = bytearray(copy.read_bytes())
    at = data.rindex(b"x")
    data[at : at + 1] = b"y"
    stat = copy.stat()
    copy.write_bytes(bytes(data))
    os.utime(copy, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.replace(copy, path)


def _appended(path: Path) -> None:
    with open(path, "ab") as handle:
        handle.write(b'{"_ng_task_index": 99, "_ng_rollout_index": 0}\n')


@pytest.mark.parametrize(
    "change",
    [_edit_in_place, _copied_over, _appended],
    ids=["same-size edit, mtime put back", "copy with its times", "appended"],
)
def test_rec_55_a_changed_input_is_still_refused_after_a_snapshot(
    run: Run, change: Any
) -> None:
    """REC-55: the stat proof catches every write through the file system."""
    assert run.resume(dry_run=True).state.settled is not None  # the fast path
    change(run.materialized)
    _refused(run)


def test_rec_55_a_file_written_just_before_its_read_is_hashed_again(
    tmp_path: Path,
) -> None:
    """A file whose times are within the clock's tick of the read is not trusted."""
    path = tmp_path / "inputs.jsonl"
    path.write_bytes(b"{}\n")
    found = path.stat()

    def seen(read_at: int) -> InputsSeen:
        return InputsSeen(
            found.st_dev, found.st_ino, found.st_size, found.st_mtime_ns,
            found.st_ctime_ns, read_at, "digest", [],
        )  # fmt: skip

    written = max(found.st_mtime_ns, found.st_ctime_ns)
    assert still_seen(seen(written + 10**6), path) is None  # 1 ms after: racy
    assert still_seen(seen(written + 3 * 10**9), path) is not None
    assert still_seen(seen(written + 3 * 10**9), tmp_path / "gone") is None


def test_rec_55_verify_hashes_what_the_proof_trusted(run: Run) -> None:
    """A change the stat cannot see (under the file system) is verify's to find."""
    with Ledger.open(run.out, lock=run.lock) as led:
        opened = load_open(led)
        assert opened is not None
        assert opened.inputs is not None
        true_digest = opened.inputs.digest
        state = opened.state
        assert state is not None
        # What a raw write to the disk would leave: the same times, other bytes.
        forged = msgspec.structs.replace(opened.inputs, digest="0" * 64)
        save_open(led, state, decide_all(state), forged)
    with pytest.raises(IdentityMismatch):
        run.resume(dry_run=True)  # the trusted digest is not the saved one
    with Ledger.open(run.out) as led:
        found = verify(led)  # the bytes are the saved ones; the record is not
    assert [f.check for f in found] == ["snapshot"]
    assert "without their file's times changing" in found[0].message
    # And the other way round: the bytes changed, the proof still trusted.
    _edit_in_place(run.materialized)
    stat = run.materialized.stat()
    with Ledger.open(run.out, lock=run.lock) as led:
        opened = load_open(led)
        assert opened is not None
        assert opened.state is not None
        assert opened.inputs is not None
        forged = msgspec.structs.replace(
            opened.inputs,
            device=stat.st_dev, inode=stat.st_ino, size=stat.st_size,
            mtime_ns=stat.st_mtime_ns, ctime_ns=stat.st_ctime_ns,
            read_at_ns=time.time_ns() + 10**10, digest=true_digest,
        )  # fmt: skip
        save_open(led, opened.state, decide_all(opened.state), forged)
    run.resume(dry_run=True)  # trusted, as a raw write would be
    with Ledger.open(run.out) as led:
        checks = {finding.check for finding in verify(led)}
    assert "inputs" in checks


def test_p_8_an_event_on_a_settled_rollout_falls_back_to_a_full_replay(
    run: Run,
) -> None:
    fresh = run.fresh()
    decisions = decide_all(fresh)
    task, index = next(k for k, d in decisions.items() if d.value == "complete")
    attempt = decisions[task, index].attempt
    row = next(
        r
        for r in run.rows
        if (r["_ng_task_index"], r["_ng_rollout_index"]) == (task, index)
    )
    with Ledger.open(run.out, lock=run.lock) as led:
        led.record(_result({**row, "_ng_attempt_index": attempt}, 1.0))  # a duplicate
    found = run.resume(dry_run=True)
    assert found.state.settled is None  # replayed in full
    assert found.state.rollout(task, index).duplicates == 1


@pytest.mark.parametrize(
    ("options", "reopened"),
    [
        ({"extend_attempts": 2}, "exhausted"),
        ({"retry_terminal_timeouts": True}, "terminal"),
    ],
)
def test_p_8_an_option_that_reopens_settled_rollouts_replays_in_full(
    run: Run, options: dict[str, Any], reopened: str
) -> None:
    before = decide_all(run.fresh())
    keys = {(t, r) for (t, r), d in before.items() if d.value == reopened}
    assert keys
    found = run.resume(dry_run=True, **options)
    assert found.state.settled is None
    planned = {(t, r) for t, r, _ in _keys(found.plan.dispatch)}
    assert keys <= planned


def test_p_8_resume_dry_run_command_counts_what_it_read_and_kept_no_row(
    run: Run,
) -> None:
    run.lock.release()
    config = run.out.parent / "collection.json"
    servers = run.out.parent / "servers.json"
    config.write_bytes(msgspec.json.encode(run.config))
    servers.write_bytes(msgspec.json.encode(run.global_config))
    args = ["resume", str(run.out), "--config", str(config),
            "--global-config", str(servers), "--dry-run", "--json"]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    document = msgspec.json.decode(result.output)
    whole = run.fresh()
    expected = sum(d.value in ("pending", "retry") for d in decide_all(whole).values())
    assert document["plan"]["dispatch"] == expected > 0
    run.lock = RunLock(run.out).acquire()


def test_p_8_status_at_the_head_reads_what_the_snapshot_kept(run: Run) -> None:
    """After a resume nothing follows its snapshot: status decides nothing again."""
    run.resume()
    with Ledger.open(run.out) as led:
        opened = load_open(led)
        assert opened is not None
        assert opened.at_head is not None  # the status as of the head, kept
        left = status(led)
    _drop_snapshots(run)
    with Ledger.open(run.out) as led:
        whole = status(led)
    assert left.coverage == whole.coverage
    assert left.metrics == whole.metrics
    assert left.held == whole.held
    assert left.state.expected == whole.state.expected
    with Ledger.open(run.out) as led:
        counted = status(led, count_failure_classes_as_zero=True)
    assert counted.metrics is not None
    assert counted.metrics.failure_classes_counted_as_zero > 0


def test_resume_decisions_answer_for_settled_rollouts_too(run: Run) -> None:
    """Issue 25 / api.md: ``Resume.decisions`` holds every rollout, settled ones too."""
    left = run.resume()
    assert left.state.settled is not None  # the snapshot of what is left was used
    whole = decide_all(run.fresh())
    settled = [key for key in whole if key not in left.decisions.open]
    assert {whole[key].value for key in settled} >= {"complete", "terminal"}
    for key in settled:  # each answered (was: KeyError), as a full replay decides
        assert left.decisions[key] == whole[key]
    assert len(left.decisions) == len(whole) == TASKS * REPEATS
    assert dict(left.decisions) == whole
    assert (0, 0) in left.decisions
    assert (TASKS, 0) not in left.decisions
    assert coverage(left.state, left.decisions) == coverage(run.fresh())


def test_resume_decisions_of_a_dry_run_answer_after_the_run_is_closed(
    run: Run,
) -> None:
    """Issue 25: a settled rollout asked about once the ledger was closed."""
    left = run.resume(dry_run=True)
    whole = decide_all(run.fresh())
    complete = next(k for k, d in whole.items() if d.value == "complete")
    assert complete not in left.decisions.open
    assert left.decisions[complete].value == "complete"
