"""Histories built through the public API, for the tests of REC-1..REC-41.

A :class:`History` is one temporary run of N tasks x M rollouts, created with
``Ledger.create`` under its held ``RunLock``. Attempts are released by
``replan`` (as a collector that retries within one process), reserved and
recorded with real rows; judge admissions, approvals, budget resets,
extensions and policy changes are appended as the operator would. The row
builders below make small JSON literals shaped like rows.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from ledger import Clock, JudgeAdmission, Ledger, RecoveryPolicy, RunLock
from ledger.events import (
    AttemptsExtended,
    AttemptsReleased,
    FailureBudgetReset,
    PolicyChanged,
    RerunApproved,
    ResumeStarted,
)
from projections import Decision, Plan, RunState, decide, replan, replay
from tests.conftest import MinimalManifest, input_rows
from tests.internals import policy_changes, policy_from_events

__all__ = [
    "ANSWER",
    "OPERATOR",
    "PLACEHOLDER",
    "History",
    "agent_timeout",
    "calls",
    "failure",
    "graded",
    "legacy_failure",
    "masked",
    "omission",
    "unscored",
]

Row = dict[str, Any]
OPERATOR = "operator:test"

#: A Responses-API answer: one assistant message with output text (ROW-2).
ANSWER: Mapping[str, Any] = {
    "id": "resp-1",
    "object": "response",
    "status": "completed",
    "output": [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "The answer is 42."}],
        }
    ],
}
#: A typed response with neither output nor status: a placeholder (ROW-3).
PLACEHOLDER: Mapping[str, Any] = {"output": []}

_START = 1_767_225_600.0  # 2026-01-01T00:00:00Z


# -- row builders ---------------------------------------------------------------


def calls(*statuses: int, latency_ms: float = 1000.0) -> Row:
    """``ng_model_call_capture`` with one call per status, back to back (ROW-30)."""
    captured = [
        {
            "status_code": status,
            "started_at": _START + index * latency_ms / 1000,
            "latency_total_ms": latency_ms,
        }
        for index, status in enumerate(statuses)
    ]
    return {"ng_model_call_capture": {"calls": captured}}


def _answer(answer: bool) -> Row:
    return {"response": dict(ANSWER) if answer else dict(PLACEHOLDER)}


def _grade(grade: float | None) -> Row:
    return (
        {} if grade is None else {"_ng_grade": {"status": "completed", "reward": grade}}
    )


def graded(reward: float = 1.0, **extra: Any) -> Row:
    """A plain result row with a reward and an answer (REC-20.4e)."""
    return {
        "reward": reward,
        "response": dict(ANSWER),
        "elapsed_seconds": 12.5,
        **extra,
    }


def unscored(**extra: Any) -> Row:
    """A result row with an answer and no reward (REC-20.4e, ``unscored``)."""
    return {"response": dict(ANSWER), **extra}


def masked(
    kind: str,
    *,
    answer: bool,
    stage: str = "agent",
    reward: float = 0.0,
    grade: float | None = None,
    **extra: Any,
) -> Row:
    """A result row masked by the environment, with its kind and stage (ROW-40)."""
    return {
        "reward": reward,
        "mask_sample": True,
        "failure_kind": kind,
        "failure_stage": stage,
        **_answer(answer),
        **_grade(grade),
        **extra,
    }


def failure(
    kind: str,
    *,
    stage: str = "agent",
    source: str = "environment",
    delivery: str | None = "possibly_delivered",
    terminal: bool = False,
    answer: bool = False,
    response: Mapping[str, Any] | None = None,
    grade: float | None = None,
    events: Iterable[Mapping[str, Any]] = (),
    **extra: Any,
) -> Row:
    """A failure row with a typed ``_ng_failure_record`` (rows.md).

    ``answer`` keeps :data:`ANSWER` as the row's response; ``response`` keeps
    another one (a placeholder, say); neither keeps none.
    """
    record: Row = {
        "schema_version": 1,
        "source": source,
        "failure": {
            "failure_kind": kind,
            "failure_reason": f"{kind} at {stage}",
            "terminal": terminal,
            "stage": stage,
        },
        "failure_events": list(events),
    }
    if delivery is not None:
        record["delivery"] = delivery
    row: Row = {"_ng_failure_record": record, **_grade(grade), **extra}
    if answer:
        row["response"] = dict(ANSWER)
    elif response is not None:
        row["response"] = dict(response)
    return row


def legacy_failure(
    failure_class: str, *, terminal: bool = False, answer: bool = False, **extra: Any
) -> Row:
    """A failure row of an older collector: ``_ng_failure_class`` only."""
    row: Row = {"_ng_failure_class": failure_class, **extra}
    if terminal:
        row["_ng_failure_terminal"] = True
    if answer:
        row["response"] = dict(ANSWER)
    return row


def agent_timeout(
    *,
    answer: bool = True,
    last_status: int = 200,
    grade: float | None = None,
    terminal: bool = False,
) -> Row:
    """An ``agent_timeout`` failure row after three model calls (ROW-35, ROW-36).

    ``last_status`` is the last call's HTTP status: a 503 there is a server
    fault that owns the window (ROW-32), so the timeout is infrastructure's.
    """
    return failure(
        "agent_timeout",
        answer=answer,
        grade=grade,
        terminal=terminal,
        elapsed_seconds=600.0,
        **calls(200, 200, last_status),
    )


def omission(message: str = "left out by design") -> Row:
    """An intentional omission stand-in (REC-35)."""
    return {
        "_ng_omitted": True,
        "_ng_failure_class": "skipped",
        "_ng_failure_terminal": True,
        "_ng_failure_message": message,
    }


# -- the history ------------------------------------------------------------------


class History:
    """One temporary run, written through the public API, and its views."""

    def __init__(
        self,
        folder: Path,
        *,
        tasks: int = 1,
        rollouts: int = 1,
        cap: int = 3,
        policy: RecoveryPolicy | None = None,
        name: str = "rollouts.jsonl",
        clock: Clock | None = None,
    ) -> None:
        self.out = folder / name
        self.rows = input_rows(tasks, rollouts)
        self.lock = RunLock(self.out).acquire()
        manifest = MinimalManifest(self.rows, max_rollout_attempts=cap)
        self.led = Ledger.create(
            self.out,
            manifest,
            self.rows,
            lock=self.lock,
            policy=policy,
            clock=clock or Clock(seed=7),
        )
        self.run_id = self.led.run_created().run_id

    # -- lifetime ----------------------------------------------------------------

    def close(self) -> None:
        """Close the ledger and release the lock."""
        self.led.close()
        self.lock.release()

    def reopen(self) -> None:
        """Close the writer and open it again (an EV-12 repair would run here)."""
        self.led.close()
        self.led = Ledger.open(self.out, lock=self.lock, clock=self.led.clock)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- views -------------------------------------------------------------------

    def state(self, *, policy: RecoveryPolicy | None = None) -> RunState:
        """The replayed state at the head (``policy`` for what-if analysis)."""
        return replay(self.led, policy_override=policy)

    def decide(self, task: int = 0, rollout: int = 0) -> Decision:
        """REC-20 for one rollout, at the head."""
        return decide(self.state(), task, rollout)

    def policy(self) -> RecoveryPolicy:
        """The policy in force at the head (REC-60)."""
        return policy_from_events(e.body for e in self.led.events())

    def head_seq(self) -> int:
        """The seq of the newest event."""
        return self.led.head()[0]

    def sidecar_lines(self) -> int:
        """How many lines the sidecar holds."""
        path = self.led.paths.sidecar
        return len(path.read_bytes().splitlines()) if path.exists() else 0

    # -- releasing, reserving, recording -----------------------------------------

    def replan(self) -> Plan:
        """Release what the current decisions allow (REC-3)."""
        return replan(self.led)

    def release(
        self,
        dispatch: Iterable[tuple[int, int, int]] = (),
        rejudge: Iterable[tuple[int, int, int]] = (),
    ) -> None:
        """Release attempts by hand, as a resume's plan would."""
        self.led.append(
            AttemptsReleased(dispatch=tuple(dispatch), rejudge=tuple(rejudge))
        )

    def reserve(self, task: int = 0, rollout: int = 0) -> int:
        """Reserve the attempt ``replan`` releases for this rollout; its number."""
        plan = self.replan()
        for row in plan.dispatch:
            if (row["_ng_task_index"], row["_ng_rollout_index"]) == (task, rollout):
                return self.led.reserve(row)
        raise AssertionError(
            f"replan released no attempt of ({task}, {rollout}): "
            f"{self.decide(task, rollout)}"
        )

    def record(
        self, task: int, rollout: int, attempt: int, row: Mapping[str, Any]
    ) -> None:
        """Record ``row`` as the outcome of an attempt reserved earlier."""
        base = self.rows[self._line(task, rollout)]
        self.led.record(
            {**base, "_ng_attempt_index": attempt, "_ng_run_id": self.run_id, **row}
        )

    def attempt(self, row: Mapping[str, Any], task: int = 0, rollout: int = 0) -> int:
        """Reserve the next released attempt and record ``row`` as its outcome."""
        attempt = self.reserve(task, rollout)
        self.record(task, rollout, attempt, row)
        return attempt

    def kill(self, task: int = 0, rollout: int = 0) -> int:
        """Reserve an attempt whose process dies in flight, then resume (REC-4)."""
        attempt = self.reserve(task, rollout)
        self.resume_started()
        return attempt

    def _line(self, task: int, rollout: int) -> int:
        for line, row in enumerate(self.rows):
            if (row["_ng_task_index"], row["_ng_rollout_index"]) == (task, rollout):
                return line
        raise KeyError((task, rollout))

    # -- re-judgment (REC-30) ----------------------------------------------------

    def admit(self, task: int = 0, rollout: int = 0) -> JudgeAdmission:
        """Admit the re-judgment ``replan`` releases for this rollout."""
        plan = self.replan()
        for item in plan.rejudge:
            if (item.task, item.rollout) == (task, rollout):
                return self.led.admit_judgment(task, rollout, item.attempt, "judge-1")
        raise AssertionError(
            f"replan released no re-judgment of ({task}, {rollout}): "
            f"{self.decide(task, rollout)}"
        )

    def rejudge(
        self, row: Mapping[str, Any], task: int = 0, rollout: int = 0
    ) -> JudgeAdmission:
        """Admit a released re-judgment and save ``row`` as its outcome."""
        admission = self.admit(task, rollout)
        self.led.save_judgment(
            admission, {**self.rows[self._line(task, rollout)], **row}
        )
        return admission

    # -- operator events ---------------------------------------------------------

    def resume_started(self) -> None:
        """A new resume: releases lapse, reservations without outcome are unknown."""
        self.led.append(
            ResumeStarted(config_digest="c" * 64, counts={}), actor=OPERATOR
        )

    def approve(self, task: int, rollout: int, attempt: int) -> None:
        """Approve one attempt to run again (REC-25)."""
        body = RerunApproved(
            task=task, rollout=rollout, attempt=attempt, reason="approvals.txt:1"
        )
        self.led.append(body, actor=OPERATOR)

    def reset(self) -> int:
        """Reset the failure budget at the head (REC-16); the ``before_seq``."""
        before = self.head_seq()
        body = FailureBudgetReset(
            excluded_lines=self.sidecar_lines(), before_seq=before, reason="new quota"
        )
        self.led.append(body, actor=OPERATOR)
        return before

    def extend(self, total: int) -> None:
        """Record an attempts extension of ``total`` (REC-11)."""
        self.led.append(AttemptsExtended(total=total, reason="more"), actor=OPERATOR)

    def set_policy(self, **settings: Any) -> None:
        """Change policy settings (REC-60); a dotted key as ``side_overrides__kind``."""
        dotted = {key.replace("__", "."): value for key, value in settings.items()}
        changes = policy_changes(self.policy(), dotted)
        self.led.append(PolicyChanged(changes=changes, reason="test"), actor=OPERATOR)
