"""EV-12 and REC-3: the recorder writes rows before events; a writer's open repairs.

Histories are built through the public API: a run is created, attempts are
released (as `resume`/`replan` would), reserved and recorded.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger import (
    ConfigError,
    CorruptLedger,
    IdentityMismatch,
    Ledger,
    LedgerError,
    RowError,
    RunLock,
)
from ledger.events import (
    AttemptsReleased,
    FailureSaved,
    JudgeOutcomeSaved,
    OmissionSaved,
    ResultSaved,
    ResumeStarted,
    TailRepaired,
)
from tests.conftest import MinimalManifest, input_rows

ANSWER = {
    "output": [{"type": "message", "content": [{"type": "output_text", "text": "42"}]}],
    "status": "completed",
}


@pytest.fixture
def run(tmp_path: Path) -> Iterator[tuple[Ledger, list[dict[str, Any]]]]:
    """A writer ledger over 3 tasks x 2 rollouts with attempt 0 of each released."""
    out = tmp_path / "rollouts.jsonl"
    rows = input_rows(3, 2)
    with RunLock(out) as lock:
        led = Ledger.create(out, MinimalManifest(rows), rows, lock=lock)
        release(led, [(r["_ng_task_index"], r["_ng_rollout_index"], 0) for r in rows])
        yield led, rows
        led.close()


def release(
    led: Ledger, dispatch: list[tuple[int, int, int]], rejudge: tuple = ()
) -> None:
    led.append(AttemptsReleased(dispatch=tuple(dispatch), rejudge=tuple(rejudge)))


def result(row: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**row, "reward": 1.0, "response": ANSWER, **extra}


def line_bytes(path: Path, location: Any) -> bytes:
    return path.read_bytes()[location.offset : location.offset + location.length]


def reopen(led: Ledger) -> Ledger:
    led.close()
    assert led.lock is not None
    return Ledger.open(led.paths.out, lock=led.lock)


# -- REC-3: released, then reserved, once -------------------------------------------


def test_rec_3_reserve_stamps_attempt_and_run_id_and_is_durable(run) -> None:
    led, rows = run
    row = dict(rows[0])
    assert led.reserve(row) == 0
    assert row["_ng_attempt_index"] == 0
    assert row["_ng_run_id"] == led.run_created().run_id
    with Ledger.open(led.paths.out) as reader:
        assert [e.kind for e in reader.events()][-1] == "attempt_reserved"


def test_rec_3_reserving_an_unreleased_attempt_is_a_config_error(run) -> None:
    led, rows = run
    before = led.head()
    with pytest.raises(ConfigError, match="not released"):
        led.reserve({**rows[0], "_ng_attempt_index": 1})
    assert led.head() == before


def test_rec_3_an_attempt_is_reserved_once(run) -> None:
    led, rows = run
    led.reserve(dict(rows[0]))
    with pytest.raises(ConfigError, match="already reserved"):
        led.reserve(dict(rows[0]))


def test_rec_3_reserve_many_is_one_transaction_and_all_or_nothing(run) -> None:
    led, rows = run
    before = led.head()
    with pytest.raises(ConfigError):
        led.reserve_many([dict(rows[0]), dict(rows[1]), dict(rows[0])])
    assert led.head() == before
    assert led.reserve_many([dict(r) for r in rows]) == [0] * 6
    assert led.head()[0] == before[0] + 6


def test_rec_3_a_release_holds_until_the_next_resume_started(run) -> None:
    led, rows = run
    led.append(ResumeStarted(config_digest="c" * 64, counts={}))
    with pytest.raises(ConfigError, match="not released"):
        led.reserve(dict(rows[0]))


def test_id_40_a_row_of_another_run_or_key_is_refused(run) -> None:
    led, rows = run
    with pytest.raises(IdentityMismatch, match="_ng_run_id"):
        led.reserve({**rows[0], "_ng_run_id": "someone-else"})
    with pytest.raises(IdentityMismatch, match="not among"):
        led.reserve({**rows[0], "_ng_task_index": 99})


def test_rec_3_recording_an_unreserved_attempt_is_refused(run) -> None:
    led, rows = run
    with pytest.raises(ConfigError, match="not reserved"):
        led.record(result(rows[0]))
    assert not led.paths.out.exists() or led.paths.out.read_bytes() == b""


# -- Routing (rows.md) and EV-12's order --------------------------------------------


def test_routing_results_to_out_failures_and_omissions_to_the_sidecar(run) -> None:
    led, rows = run
    for row in rows[:4]:
        led.reserve(row)
    led.record(result(rows[0]))
    led.record({**rows[1], "_ng_failure_class": "transient"})
    led.record({**rows[2], "_ng_omitted": True, "_ng_failure_class": "skipped",
                "_ng_failure_message": "x" * 5000})  # fmt: skip
    led.record({**rows[3], "_ng_no_persist": True})
    kinds = [(e.kind, e.body) for e in led.events(1)][-3:]
    saved, failed, omitted = (body for _, body in kinds)
    assert isinstance(saved, ResultSaved)
    assert isinstance(failed, FailureSaved)
    assert failed.sidecar_line == 0
    assert isinstance(omitted, OmissionSaved)
    assert omitted.sidecar_line == 1
    assert len(omitted.reason) == 2000
    assert len(led.paths.out.read_bytes().splitlines()) == 1
    assert len(led.paths.sidecar.read_bytes().splitlines()) == 2


def test_ev_12_each_event_points_at_its_row_bytes(run) -> None:
    led, rows = run
    for row in rows:
        led.reserve(row)
        led.record(result(row))
    checked = 0
    for event in led.events():
        if isinstance(event.body, ResultSaved):
            data = line_bytes(led.paths.out, event.body.location)
            assert hashlib.sha256(data).hexdigest() == event.body.location.row_sha256
            row = json.loads(data)
            assert (row["_ng_task_index"], row["_ng_rollout_index"]) == (
                event.body.task, event.body.rollout,
            )  # fmt: skip
            checked += 1
    assert checked == len(rows) > 0  # one result_saved per recorded row


def test_a_second_row_for_one_attempt_is_still_recorded(run) -> None:
    led, rows = run
    led.reserve(rows[0])
    led.record(result(rows[0]))
    led.record(result(rows[0], reward=0.0))
    saved = [e for e in led.events() if e.kind == "result_saved"]
    assert len(saved) == 2  # REC-1: the projection marks the second a duplicate


def test_a_row_that_is_not_a_mapping_or_not_json_is_a_row_error(run) -> None:
    led, rows = run
    led.reserve(rows[0])
    with pytest.raises(RowError):
        led.record(["not", "a", "row"])  # type: ignore[arg-type]
    with pytest.raises(RowError, match="JSON"):
        led.record({**rows[0], "reward": object()})


def test_a_reader_cannot_record(run) -> None:
    led, _ = run
    with (
        Ledger.open(led.paths.out) as reader,
        pytest.raises(LedgerError, match="read-only"),
    ):
        reader.reserve({"_ng_task_index": 0, "_ng_rollout_index": 0})


# -- REC-30: judge admissions ---------------------------------------------------------


def test_rec_30_admit_then_save_a_graded_rejudgment(run) -> None:
    led, rows = run
    led.reserve(rows[0])
    led.record({**rows[0], "_ng_failure_class": "judge_failed", "response": ANSWER})
    release(led, [], rejudge=[(0, 0, 0)])
    admission = led.admit_judgment(0, 0, 0, "judge-digest")
    assert (admission.task, admission.rollout, admission.attempt) == (0, 0, 0)
    with pytest.raises(ConfigError, match="already admitted"):
        led.admit_judgment(0, 0, 0, "judge-digest")
    row = {"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 0.5}
    led.save_judgment(admission, row)
    assert row["_ng_rejudgment"] == {"admission_id": admission.admission_id}
    outcome = list(led.events())[-1].body
    assert isinstance(outcome, JudgeOutcomeSaved)
    assert (outcome.outcome, outcome.reward, outcome.location.file) == (
        "graded", 0.5, "rollouts.jsonl",
    )  # fmt: skip
    with pytest.raises(ConfigError, match="not open"):
        led.save_judgment(admission, dict(row))


def test_rec_30_a_failed_rejudgment_goes_to_the_sidecar(run) -> None:
    led, _ = run
    release(led, [], rejudge=[(1, 1, 0)])
    admission = led.admit_judgment(1, 1, 0, "j")
    led.save_judgment(admission, {"_ng_failure_class": "judge_failed"})
    outcome = list(led.events())[-1].body
    assert isinstance(outcome, JudgeOutcomeSaved)
    assert outcome.outcome == "failed"
    assert outcome.failure_kind == "judge_failed"
    assert outcome.sidecar_line == 0


def test_rec_30_admitting_an_attempt_not_released_for_rejudgment(run) -> None:
    led, _ = run
    with pytest.raises(ConfigError, match="not released for re-judgment"):
        led.admit_judgment(0, 0, 0, "j")


# -- EV-12: repair on a writer's open ---------------------------------------------


def append_raw(path: Path, data: bytes) -> None:
    with path.open("ab") as handle:
        handle.write(data)


def test_ev_12_a_torn_last_line_is_cut_back_and_saved(run) -> None:
    led, rows = run
    led.reserve(rows[0])
    led.record(result(rows[0]))
    good = led.paths.out.read_bytes()
    append_raw(led.paths.out, b'{"_ng_task_index": 0, "rew')
    led = reopen(led)
    assert led.paths.out.read_bytes() == good
    repaired = list(led.events())[-1]
    assert repaired.actor == "repair"
    assert isinstance(repaired.body, TailRepaired)
    saved = led.paths.folder / repaired.body.saved_as
    assert saved.read_bytes() == b'{"_ng_task_index": 0, "rew'
    assert repaired.body.offset == len(good)
    led = reopen(led)  # a second open has nothing left to repair
    assert list(led.events())[-1].seq == repaired.seq


def test_ev_12_an_unrecorded_row_of_a_reserved_attempt_is_recorded_once(run) -> None:
    led, rows = run
    led.reserve(rows[1])
    row = result(rows[1])
    append_raw(led.paths.out, json.dumps(row).encode() + b"\n")
    led = reopen(led)
    last = list(led.events())[-1]
    assert last.actor == "repair"
    assert isinstance(last.body, ResultSaved)
    assert last.body.location.offset == 0
    led = reopen(led)
    assert sum(e.kind == "result_saved" for e in led.events()) == 1


def test_ev_12_an_unrecorded_foreign_row_refuses_the_open_and_changes_nothing(
    run,
) -> None:
    """EV-12; a row without a run id waits for `import` to adopt it (REC-86)."""
    led, rows = run
    append_raw(
        led.paths.sidecar,
        # attempt 7 was never released: no transaction of this run wrote it
        json.dumps(
            {**rows[2], "_ng_attempt_index": 7, "_ng_failure_class": "x"}
        ).encode()
        + b"\n{torn",
    )
    before = (led.head(), led.paths.sidecar.read_bytes())
    led.close()
    with pytest.raises(
        IdentityMismatch, match=r"rollouts_failures\.jsonl: 1 row from line 1.*import"
    ):
        Ledger.open(led.paths.out, lock=led.lock)
    with Ledger.open(led.paths.out) as reader:
        assert (reader.head(), led.paths.sidecar.read_bytes()) == before
        pending = reader.pending_repairs()
    assert [(p.line, p.what) for p in pending] == [
        (1, "row written without the ledger"),
        (2, "torn last line"),
    ]


def test_ev_12_a_file_shorter_than_recorded_is_corrupt(run) -> None:
    led, rows = run
    led.reserve(rows[0])
    led.record(result(rows[0]))
    data = led.paths.out.read_bytes()
    led.close()
    led.paths.out.write_bytes(data[:-5])
    with pytest.raises(CorruptLedger, match="shorter"):
        Ledger.open(led.paths.out, lock=led.lock)
    led.paths.out.unlink()
    with pytest.raises(CorruptLedger, match="missing"):
        Ledger.open(led.paths.out, lock=led.lock)
    with (
        Ledger.open(led.paths.out) as reader,
        pytest.raises(CorruptLedger, match="missing"),
    ):
        reader.pending_repairs()  # a reader reports it, and changes nothing


def test_rec_51_collector_files_without_a_ledger_point_to_import(
    tmp_path: Path,
) -> None:
    out = tmp_path / "old.jsonl"
    out.write_text('{"_ng_task_index": 0}\n')
    with pytest.raises(CorruptLedger, match="rollout-ledger import"):
        Ledger.open(out)
