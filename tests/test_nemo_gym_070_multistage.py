"""ROW-64: NeMo Gym 0.7.0's multistage rows (GDPVal) are stages of one attempt.

A multistage environment writes one row per stage of a rollout, each carrying
``stage_index`` and ``expected_final_stage_index``. Through import and through
``record``, rows of different stages are one attempt's stages, never
duplicates; the rollout is complete once its final stage is saved, with the
final stage's score; ``results`` writes each saved stage row; a rollout whose
final stage is missing is unfinished and dispatched to continue at its first
missing stage, so a saved stage is never run again (R-4).

The run ``f04_multistage_stage_index`` of ``../shared/fixtures/nemo-gym-0.7``:
task 0 rollout 0 saved stages 0 (reward 0.5) and 1 (0.7) of final stage 1;
task 0 rollout 1 saved stage 0 (1.0) of final stage 1 only.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cli import main
from ledger import (
    ConfigError,
    Ledger,
    RecoveryIncomplete,
    RowError,
    RunLock,
    RunManifest,
    events,
)
from projections import (
    check_complete,
    coverage,
    decide,
    decide_all,
    history,
    import_run,
    replan,
    replay,
    result_rows,
    resume,
    verify,
)
from tests.pg_support import PgRun, pg_run
from tests.prerequisites import unavailable
from tests.test_cli_support import CliRun, graded, read_jsonl, templates
from tests.test_identity import nemo_configuration

__all__ = ["pg_run", "templates"]  # fixtures, imported for pytest

F04 = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "fixtures"
    / "nemo-gym-0.7"
    / "f04_multistage_stage_index"
)
if not (F04 / "rollouts.jsonl").is_file():
    unavailable(f"the NeMo Gym 0.7.0 fixture run is missing at {F04}")

Row = dict[str, Any]


def _copy(tmp_path: Path, *, keep: Any = None) -> Path:
    """A writable copy of f04; ``keep(row)`` chooses the rows of OUT kept."""
    folder = tmp_path / "f04"
    shutil.copytree(F04, folder)
    for path in folder.iterdir():
        path.chmod(0o644)
    out = folder / "rollouts.jsonl"
    if keep is not None:
        lines = out.read_bytes().splitlines(keepends=True)
        out.write_bytes(b"".join(line for line in lines if keep(json.loads(line))))
    return out


def _only_stage_0(row: Row) -> bool:
    return bool(row["stage_index"] == 0)


def _cli(*args: Any) -> Result:
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result


def _stage_row(plan_row: Row, stage: int, reward: float, final: int = 1) -> Row:
    """The collector's row of one stage of a dispatched rollout."""
    return {
        **plan_row,
        **graded(reward),
        "stage_index": stage,
        "expected_final_stage_index": final,
    }


# -- import ------------------------------------------------------------------------


def test_row64_f04_import_counts_no_duplicate_for_later_stages(
    tmp_path: Path,
) -> None:
    """ROW-64: the stage-1 row of (0, 0) is its attempt's next stage, no duplicate."""
    out = _copy(tmp_path)
    dry = json.loads(_cli("import", out, "--dry-run", "--json").stdout)
    assert dry["rows"] == {"read": 3, "imported": 3, "rejected": 0}
    assert dry["coverage"]["totals"]["duplicates"] == 0
    assert dry["coverage"]["totals"]["outcomes"] == 3
    _cli("import", out)
    status = json.loads(_cli("status", out, "--json").stdout)
    assert status["coverage"]["totals"]["duplicates"] == 0
    with Ledger.open(out) as led:
        entries = history(led).entries
        unfinished = history(led, task=0, rollout=1)
    assert all("duplicate" not in entry.marks for entry in entries)
    assert [e.summary.split(",")[0] for e in entries[2:]] == [
        "result at stage 0 of 1",
        "result at stage 1 of 1",
        "result at stage 0 of 1",
    ]
    assert unfinished.why == "ROW-64 multistage rollout whose final stage is not saved"


def test_row64_f04_the_final_stage_decides_the_score(tmp_path: Path) -> None:
    """ROW-64: complete once the final stage is saved, with that stage's score."""
    state = import_run(_copy(tmp_path), dry_run=True).state
    done = decide(state, 0, 0)
    assert (done.value, done.attempt, done.score) == ("complete", 0, 0.7)
    # Rollout 1 saved stage 0 of final stage 1 only: unfinished, never complete.
    unfinished = decide(state, 0, 1)
    assert (unfinished.value, unfinished.attempt) == ("pending", 0)
    assert (unfinished.rule, unfinished.reason) == ("ROW-64", "unfinished")
    with pytest.raises(RecoveryIncomplete, match="1 pending"):
        check_complete(state)


def test_row64_results_writes_each_saved_stage_row_of_the_selected_attempt(
    tmp_path: Path,
) -> None:
    """ROW-64: `results` writes stage 0 and stage 1 of (0, 0), as 0.7.0 aggregates."""
    out = _copy(tmp_path)
    _cli("import", out)
    selected = tmp_path / "selected.jsonl"
    assert "wrote 2 rows" in _cli("results", out, "-o", selected).stdout
    rows = read_jsonl(selected)
    assert [(r["_ng_rollout_index"], r["stage_index"], r["reward"]) for r in rows] == [
        (0, 0, 0.5),
        (0, 1, 0.7),
    ]
    assert {r["_ng_decision"] for r in rows} == {"graded"}
    with Ledger.open(out) as led:
        found = result_rows(led)
        assert found.count == 2
        assert [r["stage_index"] for r in found.rows] == [0, 1]
        every = result_rows(led, all=True)
        listed = list(every.rows)
    assert every.count == len(listed) == 3
    unfinished = listed[-1]
    assert (unfinished["_ng_rollout_index"], unfinished["_ng_decision"]) == (
        1,
        "pending",
    )
    assert "reward" not in unfinished


# -- unfinished rollouts ---------------------------------------------------------


def test_row64_a_missing_final_stage_is_dispatched_at_its_first_missing_stage(
    tmp_path: Path,
) -> None:
    """ROW-64, R-4: only stage 0 saved: the plan continues both rollouts at stage 1."""
    out = _copy(tmp_path, keep=_only_stage_0)
    imported = import_run(out)
    decisions = decide_all(imported.state)
    assert {d.value for d in decisions.values()} == {"pending"}
    assert imported.coverage.decisions["complete"] == 0
    with RunLock(out) as lock, Ledger.open(out, lock=lock) as led:
        plan = replan(led)
    assert [
        (r["_ng_rollout_index"], r["_ng_attempt_index"], r["stage_index"])
        for r in plan.dispatch
    ] == [(0, 0, 1), (1, 0, 1)]


def test_row64_a_continued_attempt_completes_and_its_saved_stage_never_reruns(
    tmp_path: Path,
) -> None:
    """ROW-64, R-4: the continuation saves stage 1; nothing is dispatched again."""
    out = _copy(tmp_path, keep=_only_stage_0)
    import_run(out)
    with RunLock(out) as lock, Ledger.open(out, lock=lock) as led:
        plan = replan(led)
        for row in plan.dispatch:
            led.reserve(row)
        led.record(_stage_row(plan.dispatch[0], 1, 0.25))
        state = replay(led)
        done = decide(state, 0, 0)
        assert (done.value, done.score) == ("complete", 0.25)
        assert coverage(state).to_dict()["totals"]["duplicates"] == 0
        # Rollout 1 was reserved at stage 1 and cut off: it goes on at stage 1
        # again, never at stage 0.
        again = replan(led)
    assert again.dispatch == []  # (0, 1)'s continuation is still in flight
    selected = tmp_path / "selected.jsonl"
    _cli("results", out, "-o", selected)
    assert [r["stage_index"] for r in read_jsonl(selected)] == [0, 1]


def test_row64_a_failed_stage_retries_at_that_stage_not_from_the_start(
    tmp_path: Path,
) -> None:
    """ROW-64: stage 0 saved, stage 1 failed: the retry starts at stage 1."""
    out = _copy(tmp_path, keep=_only_stage_0)
    import_run(out)
    with RunLock(out) as lock, Ledger.open(out, lock=lock) as led:
        plan = replan(led)
        first = plan.dispatch[0]
        led.reserve(first)
        failure = {
            **first,
            "_ng_failure_class": "transient",
            "expected_final_stage_index": 1,
        }
        led.record(failure)
        decision = decide(replay(led), 0, 0)
        assert (decision.value, decision.attempt) == ("retry", 1)
        retry = [r for r in replan(led).dispatch if r["_ng_rollout_index"] == 0]
    assert [(r["_ng_attempt_index"], r["stage_index"]) for r in retry] == [(1, 1)]


# -- record ------------------------------------------------------------------------


class _Run:
    """A run created through the API (one task config, six rollouts), lock held."""

    def __init__(self, folder: Path) -> None:
        self.config, self.servers, rows = nemo_configuration()
        self.out = folder / "rollouts.jsonl"
        self.lock = RunLock(self.out).acquire()
        manifest = RunManifest.create(None, rows, self.config, self.servers)
        Ledger.create(self.out, manifest, rows, lock=self.lock).close()

    def ledger(self) -> Ledger:
        return Ledger.open(self.out, lock=self.lock)


@pytest.fixture
def api_run(tmp_path: Path) -> Any:
    made = _Run(tmp_path)
    yield made
    made.lock.release()


def test_row64_recorded_stage_rows_are_one_attempt_and_continue_after_a_kill(
    api_run: _Run,
) -> None:
    """ROW-64 through `record`: stage rows of one attempt; a kill resumes at stage 1."""
    with api_run.ledger() as led:
        plan = resume(led, api_run.config, api_run.servers).plan
        first = plan.dispatch[0]
        led.reserve(first)
        led.record(_stage_row(first, 0, 0.5, final=2))
        state = replay(led)
        unfinished = decide(state, 0, 0)
        assert (unfinished.value, unfinished.rule) == ("pending", "ROW-64")
        # The collector dies; the next resume continues attempt 0 at stage 1.
        plan = resume(led, api_run.config, api_run.servers).plan
        item = next(r for r in plan.dispatch if r["_ng_task_index"] == 0 and
                    r["_ng_rollout_index"] == 0)  # fmt: skip
        assert (item["_ng_attempt_index"], item["stage_index"]) == (0, 1)
        assert led.reserve(item) == 0
        with pytest.raises(ConfigError, match=r"stage 1 of attempt 0 .* reserved once"):
            led.reserve(dict(item))
        led.record(_stage_row(item, 1, 0.6, final=2))
        led.record(_stage_row(item, 2, 0.9, final=2))
        state = replay(led)
    done = decide(state, 0, 0)
    assert (done.value, done.attempt, done.score) == ("complete", 0, 0.9)
    assert coverage(state).to_dict()["totals"]["duplicates"] == 0


def _first(plan_rows: list[Row]) -> Row:
    return next(
        r for r in plan_rows if (r["_ng_task_index"], r["_ng_rollout_index"]) == (0, 0)
    )


def test_row64_a_continuation_cut_off_goes_on_in_a_new_attempt_at_that_stage(
    api_run: _Run,
) -> None:
    """ROW-64, REC-4, REC-2: a kill before the continued stage's row.

    The continuation is an unknown attempt: the next resume releases the next
    attempt at the same stage (stage 0 is never run again); a late row of the
    cut continuation is superseded and saves nothing.
    """
    with api_run.ledger() as led:
        first = _first(resume(led, api_run.config, api_run.servers).plan.dispatch)
        led.reserve(first)
        led.record(_stage_row(first, 0, 0.5))
        going_on = _first(resume(led, api_run.config, api_run.servers).plan.dispatch)
        led.reserve(going_on)  # then the collector is killed
        # While it runs, a replan in the same process leaves it alone.
        keys = {
            (r["_ng_task_index"], r["_ng_rollout_index"]) for r in replan(led).dispatch
        }
        assert (0, 0) not in keys
        assert (0, 1) in keys
        retry = _first(resume(led, api_run.config, api_run.servers).plan.dispatch)
        assert (retry["_ng_attempt_index"], retry["stage_index"]) == (1, 1)
        decision = decide(replay(led), 0, 0)
        assert (decision.value, decision.reason) == ("retry", "unknown")
        led.reserve(retry)
        led.record(_stage_row(retry, 1, 0.75))
        led.record(_stage_row(going_on, 1, 0.1))  # the cut attempt's late row
        state = replay(led)
        rows = [r for r in result_rows(led).rows if r["_ng_task_index"] == 0]
        assert verify(led) == []  # chain, rows, refolds: stage rows included
        marks = [
            e.marks for e in history(led, task=0, rollout=0).entries
            if e.kind == "result_saved"
        ]  # fmt: skip
    assert marks == [(), (), ("superseded",)]
    done = decide(state, 0, 0)
    assert (done.value, done.attempt, done.score) == ("complete", 1, 0.75)
    totals = coverage(state).to_dict()["totals"]
    assert (totals["duplicates"], totals["superseded"]) == (0, 1)
    stages = [
        (r["stage_index"], r["_ng_attempt_index"], r["reward"])
        for r in rows
        if r["_ng_rollout_index"] == 0
    ]
    assert stages == [(0, 0, 0.5), (1, 1, 0.75)]


def test_row64_on_postgresql_two_workers_never_reserve_one_stage(
    pg_run: PgRun,
) -> None:
    """ROW-64, SC-3: a continuation's stage is reserved once across workers."""
    coordinator, one, two = pg_run.coordinator(), pg_run.worker(), pg_run.worker()
    first = _first(
        resume(coordinator, pg_run.config, pg_run.global_config).plan.dispatch
    )
    one.reserve(first)
    one.record(_stage_row(first, 0, 0.5))
    plan = resume(coordinator, pg_run.config, pg_run.global_config).plan
    item = _first(plan.dispatch)
    assert (item["_ng_attempt_index"], item["stage_index"]) == (0, 1)
    one.reserve(dict(item))
    with pytest.raises(ConfigError, match="a stage is reserved once"):
        two.reserve(dict(item))
    # The store's own check, in the appending transaction (what a worker whose
    # index had not caught up would meet).
    again = events.AttemptReserved(
        task=0, rollout=0, attempt=0, run_id=item["_ng_run_id"], stage_index=1
    )
    head = coordinator.head()
    with pytest.raises(ConfigError, match=r"^postgresql.*a stage is reserved once"):
        coordinator.append(again)
    assert coordinator.head() == head
    one.record(_stage_row(item, 1, 0.7))
    done = decide(replay(coordinator), 0, 0)
    assert (done.value, done.attempt, done.score) == ("complete", 0, 0.7)
    rows = [r for r in result_rows(coordinator).rows if r["_ng_task_index"] == 0]
    assert [r.get("stage_index") for r in rows if r["_ng_rollout_index"] == 0] == [
        0,
        1,
    ]


def test_row64_a_second_row_of_a_saved_stage_is_a_duplicate(api_run: _Run) -> None:
    """ROW-64, REC-1: a stage is saved once; its second row changes nothing."""
    with api_run.ledger() as led:
        first = resume(led, api_run.config, api_run.servers).plan.dispatch[0]
        led.reserve(first)
        led.record(_stage_row(first, 0, 0.5))
        led.record(_stage_row(first, 0, 0.1))
        led.record(_stage_row(first, 1, 0.8))
        led.record(_stage_row(first, 1, 0.2))
        state = replay(led)
        trail = history(led, task=0, rollout=0).entries
    assert decide(state, 0, 0).score == 0.8
    assert coverage(state).to_dict()["totals"]["duplicates"] == 2
    saved = [
        (e.summary.split(",")[0], e.marks) for e in trail if e.kind == "result_saved"
    ]
    assert saved == [
        ("result at stage 0 of 1", ()),
        ("result at stage 0 of 1", ("duplicate",)),
        ("result at stage 1 of 1", ()),
        ("result at stage 1 of 1", ("duplicate",)),
    ]


def test_row64_cli_record_takes_every_stage_row_of_an_attempt(
    tmp_path: Path, templates: Any
) -> None:
    """ROW-64 through `rollout-ledger record`: each stage row once, none twice."""
    run: CliRun = templates("created", tmp_path, CliRun.create)
    _, plan = run.resume()
    rows = [_stage_row(r, s, 0.1 * (s + 1)) for r in plan for s in (0, 1)]
    recorded = run.record(rows)
    assert recorded.stdout.startswith("recorded 12 rows: 12 results, 0 failures")
    assert "(6 attempts reserved)" in recorded.stdout
    status = json.loads(run.ok("status", run.out, "--json").stdout)
    assert status["coverage"]["decisions"]["complete"] == 6
    assert status["coverage"]["totals"]["duplicates"] == 0
    again = run.record(rows)  # the same file again: nothing recorded twice
    assert "0 results" in again.stdout, again.stdout
    selected = tmp_path / "selected.jsonl"
    run.ok("results", run.out, "-o", selected)
    written = read_jsonl(selected)
    assert len(written) == 12
    assert [r["stage_index"] for r in written[:2]] == [0, 1]
    assert [r["reward"] for r in written[:2]] == [0.1, 0.2]


# -- bad input and plain rows ---------------------------------------------------------


def test_row64_malformed_stage_fields_are_refused_naming_the_key(
    tmp_path: Path, api_run: _Run
) -> None:
    """ROW-64: a stage past its final stage, or not an integer, is refused."""
    out = _copy(tmp_path)
    lines = out.read_text().splitlines(keepends=True)
    row = json.loads(lines[2])
    row["stage_index"] = 3
    lines[2] = json.dumps(row) + "\n"
    out.write_text("".join(lines))
    with pytest.raises(
        RowError, match=r"rollouts\.jsonl line 3: stage_index 3 is past"
    ):
        import_run(out, dry_run=True)
    report = import_run(out, dry_run=True, skip_rejected=True).report
    assert [(r.line, r.reason) for r in report.rejections] == [
        (3, "stage_index 3 is past the row's expected_final_stage_index 1")
    ]
    with api_run.ledger() as led:
        first = resume(led, api_run.config, api_run.servers).plan.dispatch[0]
        led.reserve(first)
        bad = {**_stage_row(first, 0, 0.5), "expected_final_stage_index": "one"}
        with pytest.raises(RowError, match="expected_final_stage_index must be") as e:
            led.record(bad)
    assert e.value.key == "expected_final_stage_index"


def test_row64_plain_rows_keep_their_event_bytes(api_run: _Run) -> None:
    """ROW-64: a row without stage fields records the same event bytes as before."""
    with api_run.ledger() as led:
        first = resume(led, api_run.config, api_run.servers).plan.dispatch[0]
        led.reserve(first)
        led.record({**first, **graded(1.0), "stage_index": 0})  # no final stage
        stored = [e for e in led.events() if e.kind in ("result_saved",)]
        reserved = [e for e in led.events() if e.kind == "attempt_reserved"]
    body = events.encode_body(stored[0].body)
    assert b"stage_index" not in body
    assert b"stage_index" not in events.encode_body(reserved[0].body)
