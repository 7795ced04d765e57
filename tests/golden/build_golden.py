"""Write one golden log: ``python -m tests.golden.build_golden NAME``.

Run it only to ADD a golden log. An existing one is never rewritten: it is
the proof that logs written by this version keep decoding and keep their
meaning (house style, "Evolve without breaking"). A change that alters an
existing golden's coverage is a change of meaning and needs a spec decision.

Each golden folder holds the run's collector files as written (``OUT``, the
sidecar, the materialized inputs), ``events.jsonl`` (one stored event a line:
the envelope, hashes in hex, and the body's stored bytes verbatim) and
``coverage.json``, the coverage (REC-41) the log projects.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import msgspec

from ledger import Ledger
from projections import coverage, replay
from tests.helpers_history import (
    ANSWER,
    History,
    agent_timeout,
    failure,
    graded,
    legacy_failure,
    masked,
    omission,
    unscored,
)
from tests.internals import canonical_json

HERE = Path(__file__).parent
FILES = (
    "rollouts.jsonl",
    "rollouts_failures.jsonl",
    "rollouts_materialized_inputs.jsonl",
)
JUDGE_FAILED = failure("judge_failed", stage="verification", answer=True)


def branches(folder: Path) -> History:
    """One rollout per REC-20 outcome most runs meet (4 tasks x 3, cap 2)."""
    run = History(folder, tasks=4, rollouts=3, cap=2)
    run.attempt(graded(1.0), 0, 0)
    run.attempt(unscored(), 0, 1)
    run.attempt(agent_timeout(), 0, 2)
    run.attempt(legacy_failure("transient"), 1, 0)
    run.attempt(legacy_failure("transient"), 1, 0)
    run.attempt(failure("cancelled"), 1, 1)
    run.attempt(masked("session_lost", answer=True), 1, 2)
    route = failure("agent_request_failed", source="collector", delivery="delivered")
    run.attempt({**route, "response": dict(ANSWER)}, 2, 0)
    run.attempt(failure("session_lost", answer=True), 2, 1)
    run.attempt(JUDGE_FAILED, 2, 2)
    run.attempt(legacy_failure("transient", terminal=True), 3, 0)
    run.attempt(omission(), 3, 1)
    return run


def rejudge_and_approvals(folder: Path) -> History:
    """Re-judgments (REC-31, REC-32), an approval (REC-25), an omission (REC-35)."""
    run = History(folder, tasks=2, rollouts=2, cap=3)
    run.attempt(JUDGE_FAILED, 0, 0)
    run.rejudge(legacy_failure("judge_failed"), 0, 0)
    run.rejudge({"reward": 0.5}, 0, 0)
    run.attempt(masked("session_lost", answer=True), 0, 1)
    run.approve(0, 1, 0)
    run.attempt(graded(0.25), 0, 1)
    run.attempt(omission(), 1, 0)
    run.attempt(graded(1.0), 1, 1)
    return run


def budget_and_policy(folder: Path) -> History:
    """Kills, a reset, a policy change, an extension, a zombie and a duplicate."""
    run = History(folder, tasks=2, rollouts=2, cap=2)
    run.kill(0, 0)
    run.attempt(legacy_failure("transient"), 0, 0)
    run.attempt(legacy_failure("transient"), 0, 0)
    run.reset()
    run.attempt(agent_timeout(answer=False, terminal=True), 0, 1)
    run.set_policy(retry_terminal_timeouts=True)
    run.kill(1, 0)
    run.attempt(graded(0.75), 1, 0)
    run.record(1, 0, 0, legacy_failure("transient"))  # a zombie's late row
    run.attempt(graded(1.0), 1, 1)
    run.record(1, 1, 0, legacy_failure("transient"))  # a duplicate
    run.extend(1)
    return run


def infrastructure(folder: Path) -> History:
    """Infrastructure faults cut short by us (REC-21, REC-22), to the cap."""
    run = History(folder, tasks=1, rollouts=3, cap=2)
    run.attempt(agent_timeout(last_status=503), 0, 0)
    run.attempt(agent_timeout(last_status=503, grade=0.25), 0, 0)
    run.attempt(agent_timeout(answer=False, last_status=503), 0, 1)
    run.attempt(agent_timeout(answer=False, last_status=503), 0, 1)
    run.attempt(masked("session_lost", answer=False), 0, 2)
    run.attempt(graded(0.5), 0, 2)
    return run


SCENARIOS: dict[str, Callable[[Path], History]] = {
    "branches": branches,
    "rejudge_and_approvals": rejudge_and_approvals,
    "budget_and_policy": budget_and_policy,
    "infrastructure": infrastructure,
}


def export_events(led: Ledger) -> bytes:
    """Every stored event as a JSON line: envelope, hex hashes, verbatim body."""
    lines = []
    for row in led.raw_events():
        head = msgspec.json.encode(
            {"seq": row.seq, "kind": row.kind, "at": row.at, "actor": row.actor,
             "prev_hash": bytes(row.prev_hash).hex(), "hash": bytes(row.hash).hex()}
        )  # fmt: skip
        lines.append(head[:-1] + b',"body":' + bytes(row.body) + b"}\n")
    return b"".join(lines)


def build(name: str) -> Path:
    """Write the golden ``name``; refuses to rewrite an existing one."""
    target = HERE / name
    if target.exists():
        raise SystemExit(f"{target} exists: golden logs are never rewritten")
    with (
        tempfile.TemporaryDirectory() as scratch,
        SCENARIOS[name](Path(scratch)) as run,
    ):
        target.mkdir()
        for file in FILES:
            source = Path(scratch) / file
            if source.exists():
                shutil.copyfile(source, target / file)
        (target / "events.jsonl").write_bytes(export_events(run.led))
        report = coverage(replay(run.led, use_snapshot=False)).to_dict()
        (target / "coverage.json").write_bytes(canonical_json(report))
    return target


if __name__ == "__main__":
    for argument in sys.argv[1:]:
        print(build(argument))
