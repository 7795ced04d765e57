"""A simulated NeMo Gym 0.7.0 collector, and the example of wrapping any collector.

This script knows nothing of rollout-ledger: it imports the standard library
only, and it never opens the run's output file, its failures file or the
ledger. ``rollout-ledger demo`` runs it under ``rollout-ledger run``; your own
collector fits the same contract.

The contract
============

Inputs. A plan file, JSONL, one line per row to send, as ``rollout-ledger
resume -o plan.jsonl`` writes it:

- a *dispatch row* is the materialized input row (``responses_create_params``,
  ``agent_ref``, ...) stamped with ``_ng_task_index``, ``_ng_rollout_index``,
  ``_ng_attempt_index`` and ``_ng_run_id``. Send it to the agent as NeMo Gym
  sends a materialized input row.
- a *re-judgment line* is ``{"rejudge": {"task": T, "rollout": R, "attempt":
  A}}``: the saved answer of that attempt is to be judged again.

Outputs. Two files, both appended to, one JSON object a line, each line
ending in a newline (a line cut by a kill is dropped and its attempt sent
again):

- the *output file*: result rows (the dispatch row's keys, plus ``response``
  and ``reward``), as NeMo Gym writes ``rollouts.jsonl``, and re-judgment rows
  (``{"_ng_rejudgment": {task, rollout, attempt}, "reward": ...}``);
- the *failures file*: failure rows (the dispatch row's keys, plus
  ``_ng_failure_class`` and whatever else the agent or environment says:
  ``_ng_failure_stage``, ``_ng_failure_terminal``, ``_ng_failure_message``,
  ...), as NeMo Gym writes ``rollouts_failures.jsonl``.

What every row must carry: ``_ng_task_index``, ``_ng_rollout_index``,
``_ng_attempt_index`` and ``_ng_run_id`` exactly as the plan row gave them.
Copying the whole plan row into the outcome row, as NeMo Gym does, is enough.
A row for an attempt the plan did not release is refused.

Where the paths come from. ``rollout-ledger run`` replaces the placeholders
``{plan}``, ``{output}`` and ``{failures}`` in the collector's arguments, and
sets the same paths in the environment as ``ROLLOUT_LEDGER_PLAN``,
``ROLLOUT_LEDGER_OUTPUT`` and ``ROLLOUT_LEDGER_FAILURES``. This script takes
either: ``--plan {plan} --output {output} --failures {failures}``, or nothing
and the environment::

    rollout-ledger run results/rollouts.jsonl --config collection.yaml \\
        --global-config servers.yaml -- \\
        python simulated_collector.py --plan {plan} --output {output} \\
        --failures {failures} --seed 7

Any other collector is wrapped the same way: point its input at ``{plan}``
and its two outputs at ``{output}`` and ``{failures}`` (options, a small shell
script, or the environment), and have it send each plan row once (the plan
is already expanded: a collector that repeats its input rows, like NeMo
Gym's ``num_repeats``, must not repeat them again).

Dying. A real collector dies of a walltime limit, an OOM or a preemption,
sometimes halfway through writing a line. ``--die-after N`` makes this one
SIGKILL itself after writing N rows (a plan of N rows or fewer runs through),
and ``--die-probability P`` before each row with probability P (drawn from
``--seed`` and the plan's length, so the next, shorter plan dies elsewhere);
half of those deaths cut the row being written in the middle (a torn last
line). The rows not written are sent again in the next round.

Everything is deterministic for a given ``--seed``: each attempt's outcome is
a function of (seed, task, rollout, attempt).

Run it by hand::

    python simulated_collector.py --plan plan.jsonl --output out.jsonl \\
        --failures failures.jsonl --seed 7 --die-after 20
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, TextIO

Row = dict[str, Any]

# Cumulative thresholds over a draw in [0, 1000): the shapes NeMo Gym 0.7.0
# writes, each named after the fixture run it copies.
OUTCOMES = (
    (560, "graded"),  # c10 / a01's success row: response and reward
    (640, "tau2_placeholder"),  # a01: tau2's failure response, an empty answer
    (700, "environment_failed"),  # c05: an episode failure at the agent stage
    (760, "agent_request_503"),  # c01: the gateway answered 503
    (820, "transient"),  # a15: nooa's connection error
    (850, "terminal"),  # a12: a remote agent's terminal error, never retried
    (880, "timeout_partial"),  # a13: the episode's own deadline, answer kept
    (910, "session_lost_kept"),  # a20: masked, with an answer an operator judges
    (1000, "judge_invalid"),  # j05: the judge answered nothing usable
)


def draw(*parts: object) -> int:
    """A number in [0, 1000) that depends only on ``parts``."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:4], "big") % 1000


def response(text: str, *, status: str | None = "completed") -> Row:
    """A Responses API object as NeMo Gym 0.7.0 keeps it."""
    return {
        "id": "resp_answer",
        "created_at": 0.0,
        "model": "policy",
        "object": "response",
        "output": [
            {
                "id": "msg_0",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }
        ],
        "parallel_tool_calls": False,
        "tool_choice": "auto",
        "tools": [],
        "status": status,
        "error": None,
        "metadata": None,
        "usage": None,
        "incomplete_details": None,
    }


def outcome(row: Row, seed: int) -> tuple[str, Row]:
    """The file ("output" or "failures") and the row of one attempt."""
    task, rollout = row["_ng_task_index"], row["_ng_rollout_index"]
    attempt = row["_ng_attempt_index"]
    value = draw(seed, task, rollout, attempt)
    if attempt > 0:  # retries mostly succeed
        value = min(value, draw("retry", seed, task, rollout, attempt) // 2)
    name = next(name for limit, name in OUTCOMES if value < limit)
    answer = f"The answer to problem {task} is {(task * 7 + rollout) % 10}."
    reward = float(draw("reward", task, rollout) < 600)
    shapes: dict[str, tuple[str, Row]] = {
        "graded": ("output", {"response": response(answer), "reward": reward}),
        "tau2_placeholder": (
            "failures",
            {
                "reward": 0.0,
                "response": {**response(""), "id": "tau2-failure-0", "status": None},
                "_ng_failure_class": "tau2_agent_error",
                "error": "RuntimeError: simulator died",
            },
        ),
        "environment_failed": (
            "failures",
            {
                "_ng_failure_class": "environment_server_failed",
                "_ng_failure_terminal": False,
                "_ng_failure_message": "sandbox lost",
                "_ng_failure_stage": "agent",
            },
        ),
        "agent_request_503": (
            "failures",
            {
                "_ng_failure_class": "agent_request_failed",
                "_ng_failure_type": "ClientResponseError",
                "_ng_failure_message": "503 Service Unavailable",
                "_ng_failure_http_status": 503,
            },
        ),
        "transient": (
            "failures",
            {
                "reward": 0.0,
                "response": {**response(""), "status": "failed"},
                "_ng_failure_class": "transient",
                "error": "ClientConnectorError: connection reset",
            },
        ),
        "terminal": (
            "failures",
            {
                "reward": 0.0,
                "response": {**response(""), "status": None},
                "_ng_failure_class": "remote_agent_error",
                "error": "agent loop failed: RemoteAgentTerminalError",
                "_ng_failure_terminal": True,
            },
        ),
        "timeout_partial": (
            "failures",
            {
                "reward": 0.0,
                "response": {**response(answer), "status": "incomplete"},
                "_ng_failure_class": "timeout_exceeded",
                "error": "episode exceeded run_timeout_secs=1800s",
                "_ng_failure_terminal": True,
            },
        ),
        "session_lost_kept": (
            "output",
            {
                "response": response(answer),
                "reward": 0.0,
                "mask_sample": True,
                "failure_kind": "session_lost",
                "failure_reason": "session expired after the answer",
            },
        ),
        "judge_invalid": (
            "failures",
            {
                "response": response(answer),
                "reward": 0.0,
                "invalid_judge_response": True,
                "judge_response": {"error": "unparseable"},
                "_ng_failure_class": "judge_invalid",
            },
        ),
    }
    where, shape = shapes[name]
    return where, {**row, **shape}  # the plan row's keys, its indices included


def rejudgment(ref: Row, seed: int) -> Row:
    """A judge-only re-grading of a saved answer: a reward this time."""
    reward = float(draw("reward", ref["task"], ref["rollout"]) < 600)
    return {"_ng_rejudgment": ref, "reward": reward}


def plan_rows(path: Path) -> list[Row]:
    """The plan file's lines, each one JSON object."""
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            value = json.loads(line)
            if not isinstance(value, dict):
                sys.exit(f"{path}:{number}: a plan line must be a JSON object")
            rows.append(value)
    return rows


def die(handle: TextIO, line: str, *, torn: bool) -> None:
    """SIGKILL this process, after writing half of ``line`` when ``torn``."""
    if torn:
        handle.write(line[: len(line) // 2])
        handle.flush()
    print("dying now (SIGKILL)", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


def collect(args: argparse.Namespace) -> int:
    """Send every plan row; append each outcome row to its file."""
    counts = {"output": 0, "failures": 0}
    rows = plan_rows(args.plan)
    with (
        args.output.open("a", encoding="utf-8") as output,
        args.failures.open("a", encoding="utf-8") as failures,
    ):
        files = {"output": output, "failures": failures}
        for number, row in enumerate(rows):
            if "rejudge" in row:
                where, out = "output", rejudgment(row["rejudge"], args.seed)
            else:
                where, out = outcome(row, args.seed)
            line = json.dumps(out, sort_keys=True) + "\n"
            # The plan shrinks as rows are recorded, so a round that died here
            # draws differently next time: every round makes progress.
            chance = draw("die", args.seed, len(rows), number) / 1000
            if number == args.die_after or chance < args.die_probability:
                torn = draw("torn", args.seed, len(rows), number) < 500
                die(files[where], line, torn=torn)
            if args.row_delay:
                time.sleep(args.row_delay)  # a model that takes its time
            files[where].write(line)
            files[where].flush()  # a row is out once written, as NeMo Gym's are
            counts[where] += 1
    results, failed = counts["output"], counts["failures"]
    print(
        f"wrote {results} result row{'s' * (results != 1)} and "
        f"{failed} failure row{'s' * (failed != 1)}",
        flush=True,
    )
    return 0


def parse(argv: list[str] | None) -> argparse.Namespace:
    """The options, with the paths defaulting to the environment's."""
    env = os.environ.get
    parser = argparse.ArgumentParser(
        prog="simulated_collector.py",
        description="A simulated NeMo Gym 0.7.0 collector (stdlib only).",
    )
    parser.add_argument("--plan", type=Path, default=env("ROLLOUT_LEDGER_PLAN"))
    parser.add_argument("--output", type=Path, default=env("ROLLOUT_LEDGER_OUTPUT"))
    parser.add_argument("--failures", type=Path, default=env("ROLLOUT_LEDGER_FAILURES"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--die-after", type=int, default=-1, help="SIGKILL itself after N rows."
    )
    parser.add_argument(
        "--die-probability",
        type=float,
        default=0.0,
        help="SIGKILL itself before each row with this probability.",
    )
    parser.add_argument(
        "--row-delay",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="Wait this long before each row (a slower model).",
    )
    args = parser.parse_args(argv)
    for name in ("plan", "output", "failures"):
        if getattr(args, name) is None:
            variable = f"ROLLOUT_LEDGER_{name.upper()}"
            parser.error(f"give --{name} or set {variable}")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run one round: the plan in, the two files appended to."""
    return collect(parse(argv))


if __name__ == "__main__":
    sys.exit(main())
