"""P-3's compact state and fast decisions keep their meaning (issue 8).

``decide_all`` and ``coverage`` read an attempt's packed fields and compute
REC-13's and REC-4's counts only when a branch needs them; ``RolloutState``
chains its attempts and keeps its rare fields apart. These properties compare
them, on arbitrary states, with a plain reference written the way the spec
reads (every rollout decided through the attempts' properties), and check that
a state survives its snapshot encoding. No timing here: speed is measured by
``python -m bench`` (P-3, P-5), never asserted.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import msgspec
from hypothesis import given
from hypothesis import strategies as st

from projections import Decision, RunState, coverage, decide, decide_all
from tests.internals import BRANCHES, Judgment, RolloutState

_KINDS = st.sampled_from([None, "session_lost", "judge_failed"])
_SCORES = st.sampled_from([None, 0.0, 0.5, 1.0])
# No outcome (-1) often, so REC-4's unknown attempts reach the free limit.
_CODES = st.sampled_from([-1, -1, -1, -1, *range(len(BRANCHES))])


@st.composite
def rollouts(draw: st.DrawFn, line: int) -> RolloutState:
    """A rollout with attempts added in any order, judgments and approvals."""
    state = RolloutState(line, line * 10, 10)
    numbers = draw(st.lists(st.integers(0, 5), unique=True, max_size=4))
    for number in numbers:
        record = state.add_attempt(number)
        record.seq = draw(st.integers(1, 40))
        record.code = draw(_CODES)
        record.flags = draw(st.integers(0, 7))
        record.kind, record.grade = draw(_KINDS), draw(_SCORES)
        record.reward = draw(_SCORES)
    if numbers and draw(st.booleans()):
        state.judgments = {}
        for number in draw(st.lists(st.sampled_from(numbers), min_size=1)):
            state.judgments.setdefault(number, []).append(
                Judgment(
                    "j",
                    draw(st.integers(1, 40)),
                    draw(st.sampled_from([None, "graded", "failed"])),
                    draw(_SCORES),
                    draw(st.integers(0, 40)),
                    draw(_KINDS),
                )
            )
    if numbers and draw(st.booleans()):
        approved = draw(st.lists(st.sampled_from(numbers), min_size=1))
        state.approvals = dict.fromkeys(approved, 5)
    state.duplicates = draw(st.integers(0, 2))
    state.superseded = draw(st.integers(0, 2))
    return state


@st.composite
def states(draw: st.DrawFn) -> RunState:
    """A run of up to 4 tasks x 3 rollouts, in materialized order or not."""
    sizes = draw(st.lists(st.integers(1, 3), min_size=1, max_size=4))
    lines = draw(st.permutations(range(1, sum(sizes) + 1)))
    if draw(st.booleans()):
        lines = sorted(lines)  # the fold's order, the common case
    state = RunState(
        max_rollout_attempts=draw(st.integers(1, 4)),
        extension=draw(st.integers(0, 2)),
        before_seq=draw(st.integers(0, 30)),
        policy={"max_free_attempts": draw(st.integers(1, 3))},
    )
    position = iter(lines)
    for task, size in enumerate(sizes):
        state.rollouts[task * 7] = {
            index: draw(rollouts(next(position))) for index in range(size)
        }
    return state


# -- the reference: the spec's reading, through the attempts' properties -----


def _counted(rollout: RolloutState, after: int) -> int:
    count = sum(
        a.has_outcome and a.seq > after and (a.counted or rollout.approved(a.attempt))
        for a in rollout.attempts
    )
    failed = [j for j in rollout.all_judgments() if j.outcome == "failed"]
    return count + sum(j.outcome_seq > after for j in failed)


def _free(rollout: RolloutState, after: int) -> int:
    return sum((a.unknown or a.free) and a.seq > after for a in rollout.attempts)


def _reference(state: RunState, key: tuple[int, int], task_complete: bool) -> Any:
    rollout = state.rollout(*key)
    outcome = rollout.selected()
    if outcome is None:
        return ("pending", 0, "REC-20.1", None, "pending", None)
    cap, after = state.cap, state.before_seq
    counted, free = _counted(rollout, after), _free(rollout, after)
    max_free = state.policy.get("max_free_attempts", 5)
    attempt, rule, kind = outcome.attempt, None, outcome.kind

    def counted_step(value: str, reason: str, rule: str, kind: Any) -> Any:
        if counted >= cap:
            return ("exhausted", attempt, rule, kind, "cap", None)
        return (value, attempt + (value == "retry"), rule, kind, reason, None)

    def free_retry(rule: str, kind: Any, reason: str) -> Any:
        if free >= max_free:
            return ("exhausted", attempt, "REC-4", kind, "free_attempts", None)
        return ("retry", attempt + 1, rule, kind, reason, None)

    def held() -> Any:
        if rollout.approved(attempt):
            return counted_step("retry", "failed", "REC-25", kind)
        return ("held", attempt, outcome.rule, kind, outcome.reason, None)

    if not outcome.has_outcome:
        return free_retry("REC-20.1", None, "unknown")
    rule = outcome.rule
    if outcome.row_kind == "omission":
        if task_complete:
            return ("omitted", attempt, "REC-35", kind, "accepted", None)
        return held()
    judgments = rollout.judgments_of(attempt)
    if judgments:
        latest = judgments[-1]
        kind = latest.failure_kind or kind
        if latest.outcome is None:
            return ("rejudge", attempt, "REC-20.3", kind, "open_admission", None)
        if latest.outcome == "graded":
            graded = [j for j in judgments if j.outcome == "graded"]
            return (
                "complete",
                attempt,
                "REC-20.3",
                kind,
                "rejudged",
                graded[-1].reward,
            )
        return counted_step("rejudge", "judge_failed", "REC-20.3", kind)
    action, reason = outcome.action, outcome.reason
    if action == "complete":
        score = {"graded": outcome.reward, "settled_zero": 0.0}.get(
            reason, outcome.grade
        )
        return (
            "complete",
            attempt,
            rule,
            kind,
            reason,
            None if reason == "unscored" else score,
        )
    if action == "held":
        return held()
    if action == "terminal":
        return ("terminal", attempt, rule, kind, "terminal", None)
    if action == "free":
        return free_retry(rule, kind, "free")
    if action == "retry":
        return counted_step("retry", "failed", rule, kind)
    if action == "rejudge":
        return counted_step("rejudge", reason, rule, kind)
    if counted >= cap and outcome.grade is not None:  # "infra"
        return ("complete", attempt, rule, kind, "infra_cut", outcome.grade)
    return counted_step("retry", "failed", rule, kind)


def _reference_all(state: RunState) -> dict[tuple[int, int], Any]:
    keys = sorted(
        (rollout.line, task, index)
        for task, by_index in state.rollouts.items()
        for index, rollout in by_index.items()
    )
    first = {(t, i): _reference(state, (t, i), False) for _, t, i in keys}
    done = {key[0] for key, d in first.items() if d[0] == "complete"}
    return {
        key: _reference(state, key, key[0] in done) if key[0] in done else d
        for key, d in first.items()
    }


def _fields(decision: Decision) -> tuple[Any, ...]:
    return tuple(msgspec.structs.astuple(decision))


@given(states())
def test_decide_all_equals_the_reference_in_materialized_order(state: RunState) -> None:
    expected = _reference_all(state)
    decisions = decide_all(state)
    assert list(decisions) == list(expected) == state.ordered_keys()
    assert {k: _fields(d) for k, d in decisions.items()} == expected
    for key, decision in decisions.items():  # decide alone agrees (REC-35)
        assert decide(state, *key) == decision


@given(states())
def test_coverage_counts_equal_the_reference(state: RunState) -> None:
    report = coverage(state).to_dict()
    expected = _reference_all(state)
    values = Counter(d[0] for d in expected.values())
    assert report["decisions"] == {v: values.get(v, 0) for v in report["decisions"]}
    for value in ("complete", "retry", "held", "exhausted", "omitted"):
        reasons = Counter(d[4] for d in expected.values() if d[0] == value)
        assert report[value] == {r: reasons.get(r, 0) for r in report[value]}
    everything = [r for by in state.rollouts.values() for r in by.values()]
    attempts = [a for r in everything for a in r.attempts]
    totals = report["totals"]
    assert totals["attempts_reserved"] == sum(a.reserved for a in attempts)
    assert totals["outcomes"] == sum(a.has_outcome for a in attempts) + sum(
        r.duplicates for r in everything
    )
    assert totals["counted_failures"] == sum(
        _counted(r, state.before_seq) for r in everything
    )
    assert report["masked"] == sum(
        r.selected() is not None and r.selected().masked for r in everything
    )
    assert report["suspect"] == sum(_free(r, state.before_seq) >= 3 for r in everything)
    kinds = Counter(d[3] for d in expected.values() if d[0] != "complete" and d[3])
    assert report["failure_kinds"] == dict(sorted(kinds.items()))


@given(states())
def test_a_state_survives_its_snapshot_encoding(state: RunState) -> None:
    data = msgspec.msgpack.encode(state)
    again = msgspec.msgpack.decode(data, type=RunState)
    assert msgspec.msgpack.encode(again) == data
    assert again == state
    for by_index in state.rollouts.values():
        for rollout in by_index.values():
            numbers = [a.attempt for a in rollout.attempts]
            assert numbers == sorted(set(numbers))  # add_attempt keeps the order
            for number in numbers:
                assert rollout.attempt(number) is rollout.add_attempt(number)
