"""R-4 and REC-41 as properties over arbitrary histories built through the API.

A history is a sequence of steps on a small run (2 tasks x 2 rollouts, the steps
touching three of them, so that they often meet on one rollout): attempts
released by ``replan`` and recorded with rows of every REC-20 branch, attempts
killed in flight, late rows of older attempts, duplicates, judge admissions
(graded, failed or cut off), approvals of the selected or an older attempt,
budget resets, extensions, policy changes and resumes. After every step:

- R-4: no rollout whose selected outcome keeps a saved answer (ROW-10) is in
  ``replan(...).dispatch``, unless it is an infrastructure agent timeout
  (REC-21) or an approval names that attempt (REC-25). The selected outcome
  and its facts are read from the events themselves, not from the fold.
- REC-41: the coverage adds up, and ``decide`` agrees with ``decide_all``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from ledger import RecoveryPolicy, RowFacts, facts_rules
from ledger import events as ev
from projections import coverage, decide, decide_all
from tests.helpers_history import (
    ANSWER,
    PLACEHOLDER,
    History,
    agent_timeout,
    failure,
    graded,
    legacy_failure,
    masked,
    omission,
    unscored,
)

KEYS = [(0, 0), (0, 1), (1, 0)]

#: One row per REC-20 branch (and a few variants): what a collector records.
ROWS: list[dict[str, Any]] = [
    graded(1.0),
    unscored(),
    masked("session_lost", answer=False),
    masked("session_lost", answer=True),
    masked("judge_failed", answer=True, stage="verification"),
    masked("session_lost", answer=True, grade=0.5),
    agent_timeout(),
    agent_timeout(grade=0.5),
    agent_timeout(terminal=True),
    agent_timeout(last_status=503),
    agent_timeout(answer=False, last_status=503),
    agent_timeout(answer=False, terminal=True),
    legacy_failure("transient", terminal=True),
    legacy_failure("transient"),
    legacy_failure("timeout_exceeded", terminal=True, answer=True),
    failure("session_release_failed", stage="cleanup", answer=True, grade=0.75),
    failure("cancelled"),
    failure("cancelled", answer=True),
    failure("agent_request_failed", source="collector", delivery="not_sent"),
    failure("agent_request_failed", source="collector", delivery="delivered"),
    failure("agent_request_failed", source="collector", response=dict(ANSWER)),
    failure("agent_request_failed", source="collector", response=dict(PLACEHOLDER)),
    failure("judge_failed", stage="verification", answer=True),
    failure("verifier_error", stage="verification", answer=True),
    failure("agent_command_not_allowed", answer=True),
    failure("session_lost", answer=True),
    failure("session_lost"),
    omission(),
    {"_ng_no_persist": True, "_ng_failure_class": "kill_shaped"},
]

_row = st.integers(0, len(ROWS) - 1)
_key = st.integers(0, len(KEYS) - 1)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("attempt"), _key, _row),
        st.tuples(st.just("attempt"), _key, _row),
        st.tuples(st.just("kill"), _key),
        st.tuples(st.just("resume")),
        st.tuples(st.just("late"), _key, _row),
        st.tuples(
            st.just("rejudge"), _key, st.sampled_from(["graded", "failed", "open"])
        ),
        st.tuples(st.just("approve"), _key, st.booleans()),
        st.tuples(st.just("reset")),
        st.tuples(st.just("extend"), st.integers(1, 3)),
        st.tuples(
            st.just("policy"),
            st.sampled_from(
                [
                    {"retry_terminal_timeouts": True},
                    {"retry_terminal_timeouts": False},
                    {"side_overrides.session_lost": "model"},
                    {"fault_share": 0.25},
                    {"max_free_attempts": 2},
                ]
            ),
        ),
    ),
    min_size=3,
    max_size=14,
)


# -- the steps, each through the public API --------------------------------------------


def _released(run: History, task: int, rollout: int) -> dict[str, Any] | None:
    for row in run.replan().dispatch:
        if (row["_ng_task_index"], row["_ng_rollout_index"]) == (task, rollout):
            return row
    return None


def _attempt(run: History, key: int, row: int) -> None:
    task, rollout = KEYS[key]
    released = _released(run, task, rollout)
    if released is not None:
        attempt = run.led.reserve(released)
        run.record(task, rollout, attempt, ROWS[row])


def _kill(run: History, key: int) -> None:
    released = _released(run, *KEYS[key])
    if released is not None:
        run.led.reserve(released)  # in flight; the next resume finds it unknown


def _late(run: History, key: int, row: int) -> None:
    # A zombie's row for an attempt reserved earlier (a duplicate when it has one).
    task, rollout = KEYS[key]
    reserved = [
        e.body.attempt
        for e in run.led.events(kinds=["attempt_reserved"])
        if (e.body.task, e.body.rollout) == (task, rollout)  # type: ignore[union-attr]
    ]
    if reserved:
        run.record(task, rollout, min(reserved), ROWS[row])


def _rejudge(run: History, key: int, how: str) -> None:
    task, rollout = KEYS[key]
    items = [i for i in run.replan().rejudge if (i.task, i.rollout) == (task, rollout)]
    if not items:
        return
    admission = run.led.admit_judgment(task, rollout, items[0].attempt, "judge-1")
    base = {"_ng_task_index": task, "_ng_rollout_index": rollout}
    if how == "graded":
        run.led.save_judgment(admission, {**base, "reward": 0.5})
    elif how == "failed":
        run.led.save_judgment(admission, {**base, "_ng_failure_class": "judge_failed"})


def _approve(run: History, key: int, selected: bool) -> None:
    task, rollout = KEYS[key]
    chosen = run.state().rollout(task, rollout).selected_attempt()
    if chosen is not None:
        run.approve(task, rollout, chosen if selected else max(chosen - 1, 0))


def _policy(run: History, settings: dict[str, Any]) -> None:
    if any(run.policy().to_json_dict().get(k) != v for k, v in settings.items()):
        run.set_policy(**{k.replace(".", "__"): v for k, v in settings.items()})


def _step(run: History, step: tuple[Any, ...]) -> None:
    name, *args = step
    actions = {
        "attempt": _attempt,
        "kill": _kill,
        "resume": lambda run: run.resume_started(),
        "late": _late,
        "rejudge": _rejudge,
        "approve": _approve,
        "reset": lambda run: run.reset(),
        "extend": lambda run, total: run.extend(total),
        "policy": _policy,
    }
    actions[name](run, *args)


# -- an independent reading of the log ------------------------------------------------


def _selected_outcomes(
    run: History,
) -> dict[tuple[int, int], tuple[int, RowFacts | None]]:
    """Per rollout: the selected attempt (REC-1) and its first outcome's facts."""
    allocated: dict[tuple[int, int], int] = {}
    first: dict[tuple[int, int, int], RowFacts | None] = {}
    for event in run.led.events():
        body = event.body
        if isinstance(body, ev.AttemptReserved | ev.ResultSaved | ev.FailureSaved):
            key = (body.task, body.rollout)
            allocated[key] = max(allocated.get(key, 0), body.attempt)
        if isinstance(body, ev.ResultSaved | ev.FailureSaved):
            first.setdefault((body.task, body.rollout, body.attempt), body.facts)
        elif isinstance(body, ev.OmissionSaved):
            key = (body.task, body.rollout)
            allocated[key] = max(allocated.get(key, 0), body.attempt)
            first.setdefault((body.task, body.rollout, body.attempt), None)
    return {
        key: (attempt, first.get((*key, attempt))) for key, attempt in allocated.items()
    }


def _approved(run: History) -> set[tuple[int, int, int]]:
    return {
        (e.body.task, e.body.rollout, e.body.attempt)  # type: ignore[union-attr]
        for e in run.led.events(kinds=["rerun_approved"])
    }


def check_r_4(run: History) -> None:
    """R-4: a saved answer is never sampled again, but for REC-21 and REC-25."""
    selected = _selected_outcomes(run)
    approved = _approved(run)
    policy: RecoveryPolicy = run.policy()
    for row in run.replan().dispatch:
        key = (row["_ng_task_index"], row["_ng_rollout_index"])
        attempt, facts = selected.get(key, (None, None))
        if facts is None or not facts.keeps_saved_answer:
            continue
        assert attempt is not None
        infrastructure = facts_rules.is_infrastructure_agent_timeout(facts, policy)
        assert infrastructure or (*key, attempt) in approved, (
            f"rollout {key} attempt {attempt} keeps a saved answer "
            f"({facts.selected_kind}) and is dispatched as attempt "
            f"{row['_ng_attempt_index']}"
        )


def check_rec_41(run: History) -> None:
    """REC-41: the counts add up; ``decide`` and ``decide_all`` agree."""
    state = run.state()
    decisions = decide_all(state)
    report = coverage(state, decisions).to_dict()
    assert sum(report["decisions"].values()) == report["expected"] == 4
    for value in ("complete", "retry", "held", "exhausted", "omitted"):
        assert sum(report[value].values()) == report["decisions"][value], value
    for key, decision in decisions.items():
        assert decide(state, *key) == decision, key


# Histories the search rarely meets by chance, each a rule R-4 leans on.
_SESSION_LOST_KEPT, _TRANSIENT, _INFRA_TIMEOUT = 25, 13, 9


@given(
    steps=steps,
    cap=st.integers(1, 3),
    retry_terminal=st.booleans(),
)
@example(  # REC-25: an approval of an older attempt reopens nothing
    [("attempt", 0, _TRANSIENT), ("attempt", 0, _SESSION_LOST_KEPT),
     ("approve", 0, False)], 3, False,
)  # fmt: skip
@example(  # REC-25: the approved attempt reruns, the new one is held again
    [("attempt", 0, _SESSION_LOST_KEPT), ("approve", 0, True),
     ("attempt", 0, _SESSION_LOST_KEPT)], 3, False,
)  # fmt: skip
@example(  # REC-2: a zombie's late answer never adds a sample
    [("kill", 0), ("resume",), ("attempt", 0, _SESSION_LOST_KEPT), ("late", 0, 0)],
    2, False,
)  # fmt: skip
@example(  # REC-32, REC-33: re-judged, never re-dispatched
    [("attempt", 0, 22), ("rejudge", 0, "failed"), ("rejudge", 0, "open"),
     ("resume",), ("rejudge", 0, "graded")], 3, True,
)  # fmt: skip
@example(  # REC-21: an infrastructure timeout is dispatched again, to the cap
    [("attempt", 0, _INFRA_TIMEOUT), ("attempt", 0, _INFRA_TIMEOUT)], 3, True,
)  # fmt: skip
@example(  # REC-35: a held omission approved, then its sibling completes
    [("attempt", 0, 27), ("approve", 0, True), ("attempt", 1, 0)], 2, False,
)  # fmt: skip
def test_r_4_a_saved_answer_is_never_sampled_again(
    steps: list[tuple[Any, ...]], cap: int, retry_terminal: bool
) -> None:
    policy = RecoveryPolicy(retry_terminal_timeouts=retry_terminal)
    with (
        tempfile.TemporaryDirectory() as folder,
        History(Path(folder), tasks=2, rollouts=2, cap=cap, policy=policy) as run,
    ):
        for step in steps:
            _step(run, step)
            check_r_4(run)
            check_rec_41(run)
