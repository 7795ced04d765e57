"""REC-1..REC-4, REC-10..REC-17: which outcome counts, and how attempts are counted.

Selection and duplicates, release then reserve, free attempts, caps and
extensions, the budget reset. Histories are written and decisions asserted as
in ``tests/test_decide.py``.
"""

from __future__ import annotations

import logging

import pytest

from ledger import (
    ConfigError,
    CorruptLedger,
    LedgerError,
    RecoveryPolicy,
    max_rollout_attempts,
    row_facts,
)
from ledger.events import AttemptsExtended, Location, ResultSaved
from projections import (
    coverage,
    decide,
    decide_all,
    excluded_sidecar_lines,
)
from tests.helpers_decide import (
    dispatched,
    rejudged,
    routed,
    shape,
    totals,
)
from tests.helpers_history import (
    failure,
    graded,
    legacy_failure,
    masked,
)
from tests.internals import rendered_files

# -- REC-1, REC-2: selection, duplicates and late outcomes -----------------------------


def test_rec_1_a_second_row_for_one_attempt_is_a_duplicate(history) -> None:
    run = history()
    run.attempt(legacy_failure("transient"))
    run.record(0, 0, 0, graded())
    assert shape(run.decide()) == ("retry", 1, "REC-20.5i", "failed")
    report = totals(run)
    assert (report["duplicates"], report["counted_failures"]) == (1, 1)


def test_rec_1_a_duplicate_never_counts(history) -> None:
    run = history(cap=2)
    run.attempt(graded())
    run.record(0, 0, 0, legacy_failure("transient"))
    run.record(0, 0, 0, legacy_failure("transient"))
    assert shape(run.decide()) == ("complete", 0, "REC-20.4e", "graded")
    assert totals(run)["counted_failures"] == 0
    assert totals(run)["duplicates"] == 2


def test_rec_1_outcomes_without_reservations_count(history) -> None:
    # An imported run has outcomes without reservations (REC-70).
    run = history()
    row = graded(0.5)
    location = Location(file="rollouts.jsonl", offset=0, length=1, row_sha256="0" * 64)
    run.led.append(
        ResultSaved(
            task=0, rollout=0, attempt=2, location=location, facts=row_facts(row)
        ),
        actor="import",
    )
    assert shape(run.decide()) == ("complete", 2, "REC-20.4e", "graded")


def test_rec_2_a_newer_reservation_hides_a_late_older_success(history) -> None:
    run = history()
    run.kill()  # attempt 0 is in flight when its process dies
    assert run.reserve() == 1
    run.record(0, 0, 0, graded())  # the zombie's late result
    assert shape(run.decide()) == ("retry", 2, "REC-20.1", "unknown")
    run.record(0, 0, 1, legacy_failure("transient"))
    assert shape(run.decide()) == ("retry", 2, "REC-20.5i", "failed")
    assert totals(run)["superseded"] == 1


def test_rec_2_a_late_older_outcome_never_replaces_the_newer(history) -> None:
    run = history(cap=3)
    run.kill()
    run.attempt(graded(0.5))
    run.record(0, 0, 0, legacy_failure("transient"))  # late, counted (REC-13)
    decision = run.decide()
    assert shape(decision) == ("complete", 1, "REC-20.4e", "graded")
    assert decision.score == 0.5
    report = totals(run)
    assert (report["superseded"], report["counted_failures"]) == (1, 1)


def test_rec_13_superseded_outcomes_count_toward_the_cap(history) -> None:
    run = history(cap=2)
    run.kill()
    run.attempt(legacy_failure("transient"))
    run.record(0, 0, 0, legacy_failure("transient"))
    assert shape(run.decide()) == ("exhausted", 1, "REC-20.5i", "cap")


# -- REC-3: release, then reserve ------------------------------------------------------


def test_rec_3_reserving_an_attempt_not_released_is_a_config_error(history) -> None:
    run = history()
    run.attempt(legacy_failure("transient"))
    row = {**run.rows[0], "_ng_attempt_index": 1}
    with pytest.raises(ConfigError, match="not released"):
        run.led.reserve(row)
    run.replan()
    run.resume_started()  # a release holds until the next resume
    with pytest.raises(ConfigError, match="not released"):
        run.led.reserve(row)


def test_rec_3_replan_never_releases_closed_rollouts(history) -> None:
    run = history(tasks=2, rollouts=2)
    run.attempt(graded(), 0, 0)
    run.attempt(failure("session_lost", answer=True), 0, 1)
    run.attempt(legacy_failure("transient", terminal=True), 1, 0)
    run.reserve(1, 1)
    plan = run.replan()
    assert (dispatched(plan), rejudged(plan)) == (set(), set())
    assert [(h.task, h.rollout, h.reason) for h in plan.held] == [(0, 1, "kept_answer")]
    assert plan.counts["in_flight"] == 1


# -- REC-4: free attempts --------------------------------------------------------------


def test_rec_4_free_attempts_stop_at_max_free_attempts(history) -> None:
    run = history(cap=1)
    for expected in range(4):
        assert run.kill() == expected
    assert shape(run.decide()) == ("retry", 4, "REC-20.1", "unknown")
    run.kill()
    assert shape(run.decide()) == ("exhausted", 4, "REC-4", "free_attempts")
    assert coverage(run.state()).to_dict()["exhausted"]["free_attempts"] == 1
    assert dispatched(run.replan()) == set()


@pytest.mark.parametrize(
    ("row", "rule"),
    [
        pytest.param(failure("cancelled"), "REC-20.5e", id="lifecycle"),
        pytest.param(routed("not_sent"), "REC-20.5f", id="route-not-sent"),
    ],
)
def test_rec_4_free_outcomes_count_toward_the_guard(history, row, rule) -> None:
    run = history(policy=RecoveryPolicy(max_free_attempts=3))
    run.kill()
    run.attempt(row)
    assert shape(run.decide()) == ("retry", 2, rule, "free")
    run.attempt(row)
    assert shape(run.decide()) == ("exhausted", 2, "REC-4", "free_attempts")


def test_rec_4_three_free_attempts_flag_a_rollout_suspect(history) -> None:
    run = history(rollouts=2)
    for _ in range(2):
        run.kill(0, 0)
    run.kill(0, 1)
    assert coverage(run.state()).to_dict()["suspect"] == 0
    run.kill(0, 0)
    assert coverage(run.state()).to_dict()["suspect"] == 1


def test_rec_4_the_guard_changes_nothing_but_free_retries(history) -> None:
    run = history(cap=3)
    run.kill()
    run.kill()
    run.attempt(legacy_failure("transient"))
    run.set_policy(max_free_attempts=2)
    assert shape(run.decide()) == ("retry", 3, "REC-20.5i", "failed")


def test_rec_4_a_budget_reset_restarts_the_free_count(history) -> None:
    run = history(policy=RecoveryPolicy(max_free_attempts=2))
    run.kill()
    run.kill()
    assert shape(run.decide()) == ("exhausted", 1, "REC-4", "free_attempts")
    run.reset()
    assert shape(run.decide()) == ("retry", 2, "REC-20.1", "unknown")


# -- REC-10, REC-11, REC-12: caps and extensions ---------------------------------------


@pytest.mark.parametrize(
    ("value", "cap", "warned"),
    [
        (None, 3, False),
        ("", 3, False),
        (" 5 ", 5, False),
        ("1", 1, False),
        ("0", 3, True),
        ("-2", 3, True),
        ("two", 3, True),
        ("2.5", 3, True),
    ],
)
def test_rec_10_max_rollout_attempts_from_the_environment(
    caplog, value, cap: int, warned: bool
) -> None:
    environ = {} if value is None else {"NEMO_GYM_MAX_ROLLOUT_ATTEMPTS": value}
    with caplog.at_level(logging.WARNING, logger="ledger"):
        assert max_rollout_attempts(environ=environ) == cap
    assert len(caplog.records) == int(warned)
    if warned:
        assert repr(value) in caplog.text


def test_rec_10_the_cap_saved_at_creation_decides(history) -> None:
    run = history(cap=1)
    assert run.state().cap == 1
    run.attempt(legacy_failure("transient"))
    assert shape(run.decide()) == ("exhausted", 0, "REC-20.5i", "cap")


def test_rec_11_an_extension_raises_every_cap_by_the_latest_total(history) -> None:
    run = history(cap=1, rollouts=2)
    run.attempt(legacy_failure("transient"), 0, 0)
    run.attempt(masked("session_lost", answer=False), 0, 1)
    assert {d.value for d in decide_all(run.state()).values()} == {"exhausted"}
    run.extend(1)
    state = run.state()
    assert (state.cap, coverage(state).to_dict()["totals"]["extension"]) == (2, 1)
    assert shape(decide(state, 0, 0)) == ("retry", 1, "REC-20.5i", "failed")
    assert shape(decide(state, 0, 1)) == ("retry", 1, "REC-20.4b", "failed")
    run.attempt(legacy_failure("transient"), 0, 0)
    assert shape(run.decide()) == ("exhausted", 1, "REC-20.5i", "cap")
    run.extend(1)  # the same total again: the cap does not grow
    assert shape(run.decide()) == ("exhausted", 1, "REC-20.5i", "cap")
    run.extend(3)
    run.extend(2)  # the latest total is in force
    assert run.state().cap == 3
    assert shape(run.decide()) == ("retry", 2, "REC-20.5i", "failed")


def test_rec_12_an_unreadable_extension_stops_the_run(history) -> None:
    run = history()
    # Plant an extension no reader can decode (total 0) the way a damaged or
    # foreign writer would: straight into the table, chained like any event.
    import sqlite3

    from ledger.events import chain_hash

    seq, prev = run.led.head()
    body, at = b'{"kind":"attempts_extended","total":0,"reason":null}', "t"
    conn = sqlite3.connect(run.led.paths.db, isolation_level=None)
    conn.execute(
        "INSERT INTO events VALUES (?, 'attempts_extended', ?, 'x', ?, ?, ?)",
        (
            seq + 1,
            at,
            body,
            prev,
            chain_hash(prev, seq + 1, "attempts_extended", at, "x", body),
        ),
    )
    conn.close()
    with pytest.raises(CorruptLedger, match=rf"seq {seq + 1} \(attempts_extended\)"):
        run.state()


def test_rec_12_a_writer_never_appends_an_extension_it_cannot_read(history) -> None:
    run = history()
    before = run.led.head()
    with pytest.raises(LedgerError):
        run.led.append(AttemptsExtended(total=0))
    assert run.led.head() == before


# -- REC-13, REC-16: counting and the budget reset -------------------------------------


def test_rec_16_a_budget_reset_keeps_outcomes_and_attempts_but_resets_counting(
    history,
) -> None:
    run = history(cap=2)
    run.attempt(legacy_failure("transient"))
    run.attempt(failure("session_lost"))
    before_state = run.state()
    assert shape(decide(before_state, 0, 0)) == ("exhausted", 1, "REC-20.5i", "cap")
    run.reset()
    state = run.state()
    assert shape(decide(state, 0, 0)) == ("retry", 2, "REC-20.5i", "failed")
    assert excluded_sidecar_lines(state) == 2
    report = coverage(state).to_dict()["totals"]
    assert (report["counted_failures"], report["excluded_sidecar_lines"]) == (0, 2)
    assert report["outcomes"] == coverage(before_state).to_dict()["totals"]["outcomes"]
    assert state.rollout(0, 0).outcomes == before_state.rollout(0, 0).outcomes
    assert dispatched(run.replan()) == {(0, 0, 2)}  # numbering continues
    run.attempt(legacy_failure("transient"))
    assert shape(run.decide()) == ("retry", 3, "REC-20.5i", "failed")
    run.attempt(legacy_failure("transient"))
    assert shape(run.decide()) == ("exhausted", 3, "REC-20.5i", "cap")


def test_rec_17_each_reset_is_one_line_of_failure_budget_log(history) -> None:
    run = history()
    run.attempt(legacy_failure("transient"))
    first = run.reset()
    run.attempt(legacy_failure("transient"))
    second = run.reset()
    text = rendered_files(run.state())["failure_budget.log"]
    assert text is not None
    times = [e.at for e in run.led.events(kinds=["failure_budget_reset"])]
    assert text.decode().splitlines() == [
        f"1\t{first}\t{times[0]}\tnew quota",
        f"2\t{second}\t{times[1]}\tnew quota",
    ]


def test_rec_16_no_reset_excludes_nothing(history) -> None:
    run = history()
    run.attempt(legacy_failure("transient"))
    assert excluded_sidecar_lines(run.state()) == 0


def test_rec_16_an_outcome_from_before_a_reset_stays_excluded_when_approved(
    history,
) -> None:
    # REC-13: counted failures are counted outcomes recorded after the reset.
    run = history(cap=1)
    run.attempt(failure("session_lost", answer=True))
    run.reset()
    run.approve(0, 0, 0)
    assert shape(run.decide()) == ("retry", 1, "REC-25", "failed")
    assert totals(run)["counted_failures"] == 0


def test_rec_13_an_approval_makes_its_outcome_counted(history) -> None:
    run = history(cap=3)
    run.attempt(failure("session_lost", answer=True))
    assert totals(run)["counted_failures"] == 0
    run.approve(0, 0, 0)
    assert totals(run)["counted_failures"] == 1
