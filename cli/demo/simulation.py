"""The Python API example's simulated agent and judge: an outcome per attempt.

Every outcome is a pure function of ``(task, rollout, attempt, seed)``, so a
demo with a given ``--seed`` always ends the same way, however its collector is
killed and resumed. The mix covers what real collections hit: graded answers,
agent timeouts with and without a kept answer, a timeout cut short by a 503 on
the last model call, lost sessions, failed judges, transient errors, and
kill-shaped attempts that leave no row.
"""

from __future__ import annotations

import hashlib
from typing import Any

__all__ = ["judge_again", "simulate"]

Row = dict[str, Any]

# Cumulative thresholds over a draw in [0, 1000); later attempts fail less.
_OUTCOMES = (
    (560, "graded"),
    (620, "final_timeout"),  # the agent ran out of its own deadline, answer kept
    (670, "timeout_no_answer"),
    (710, "timeout_503"),  # the last model call got a 503: our fault, retried
    (760, "session_lost"),  # masked by the environment, no answer: retried
    (790, "session_lost_kept"),  # masked with a kept answer: held for an operator
    (850, "judge_failed"),  # the judge failed; the answer is re-judged
    (930, "transient"),
    (1000, "kill_shaped"),  # the collector dies with the request in flight
)


def _draw(*parts: object) -> int:
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:4], "big") % 1000


def _answer(task: int, rollout: int) -> Row:
    text = f"The answer to problem {task} is {(task * 7 + rollout) % 10}."
    return {
        "status": "completed",
        "output": [
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": text}],
            },
        ],
    }


def _failure(kind: str, stage: str, **extra: Any) -> Row:
    record = {
        "schema_version": 1,
        "source": "environment",
        "delivery": "delivered",
        "failure": {
            "failure_kind": kind,
            "failure_reason": f"simulated {kind}",
            "terminal": False,
            "stage": stage,
        },
    }
    return {"_ng_failure_class": kind, "_ng_failure_record": record, **extra}


def _calls(last_status: int) -> Row:
    calls = [
        {"status_code": 200, "started_at": 1000.0 + 10 * i, "latency_total_ms": 9000}
        for i in range(5)
    ]
    calls.append(
        {"status_code": last_status, "started_at": 1060.0, "latency_total_ms": 50000}
    )
    return {"calls": calls}


def _outcome(name: str, row: Row) -> Row:
    task, rollout = row["_ng_task_index"], row["_ng_rollout_index"]
    answer = _answer(task, rollout)
    reward = float(_draw("reward", task, rollout) < 600)
    shapes: dict[str, Row] = {
        "graded": {"response": answer, "reward": reward},
        "final_timeout": _failure("agent_timeout", "agent", response=answer),
        "timeout_no_answer": _failure("agent_timeout", "agent"),
        "timeout_503": _failure(
            "agent_timeout",
            "agent",
            response=answer,
            ng_model_call_capture=_calls(503),
            elapsed_seconds=110.0,
        ),
        "session_lost": {
            "mask_sample": True,
            "failure_kind": "session_lost",
            "failure_stage": "agent",
            "reward": 0.0,
        },
        "session_lost_kept": {
            "mask_sample": True,
            "failure_kind": "session_lost",
            "failure_stage": "agent",
            "reward": 0.0,
            "response": answer,
        },
        "judge_failed": _failure("judge_failed", "verification", response=answer),
        "transient": {
            "_ng_failure_class": "transient",
            "_ng_failure_message": "simulated connection reset",
        },
        "kill_shaped": {"_ng_no_persist": True},
    }
    return {
        **row,
        **shapes[name],
        "elapsed_seconds": 3.0 + _draw("t", task, rollout) / 50,
    }


def simulate(row: Row, *, seed: int) -> Row:
    """The outcome row of the attempt ``row`` names (stamped by the plan)."""
    key = (row["_ng_task_index"], row["_ng_rollout_index"], row["_ng_attempt_index"])
    draw = _draw(seed, *key)
    if key[2] > 0:
        draw = min(draw, _draw("retry", seed, *key) // 2)  # retries mostly succeed
    name = next(name for limit, name in _OUTCOMES if draw < limit)
    return _outcome(name, row)


def judge_again(task: int, rollout: int, attempt: int, *, seed: int) -> Row:
    """A judge-only re-grading of a saved answer: graded, or failed again."""
    if _draw("judge", seed, task, rollout, attempt) < 150:
        return {
            "_ng_task_index": task,
            "_ng_rollout_index": rollout,
            **_failure("judge_failed", "verification"),
        }
    reward = float(_draw("reward", task, rollout) < 600)
    return {"_ng_task_index": task, "_ng_rollout_index": rollout, "reward": reward}
