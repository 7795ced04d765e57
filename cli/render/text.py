"""Text renderings of the library's values: coverage, plans, verdicts, changes.

Pure functions from values to lines; the commands echo them. No rule lives
here: every count and decision comes from ``projections``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from projections import (
        Decision,
        GateVerdict,
        HeldChoices,
        HistoryEntry,
        RunState,
        RunStatus,
    )

__all__ = [
    "choices_document",
    "coverage_lines",
    "decision_document",
    "decision_line",
    "held_lines",
    "history_header",
    "history_line",
    "plan_change_document",
    "plan_change_lines",
    "plural",
    "run_lines",
    "run_summary",
    "verdict_lines",
]

Decisions = Mapping[tuple[int, int], "Decision"]


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``"1 row"``, ``"2 rows"``: every count a command prints (``ledger.plural``)."""
    from ledger import plural as say

    return say(count, noun, many)


def _short(digest: Any) -> str:
    return str(digest)[:12]


def run_summary(state: RunState) -> dict[str, Any]:
    """The manifest summary of ``status`` (CLI-6), as plain values."""
    manifest = state.manifest
    return {
        "run_id": state.run_id,
        "created_at": manifest.get("created_at"),
        "config_digest": manifest.get("config_digest"),
        "materialized_digest": manifest.get("materialized_digest"),
        "source_digest": manifest.get("source_digest"),
        "max_rollout_attempts": state.max_rollout_attempts,
        "extension": state.extension,
        "cap": state.cap,
        "policy": state.policy,
        "policy_changes": state.policy_changes,
        "drift_acceptances": len(state.drift),
        "overrides": state.overrides,
        "identity_overridden": bool(manifest.get("identity_overridden")),
        "legacy_import": bool(manifest.get("legacy_import")),
        "as_of_seq": state.as_of_seq,
        "head_hash": state.head_hash,
    }


def _policy_text(policy: Mapping[str, Any]) -> str:
    from ledger import RecoveryPolicy

    defaults = RecoveryPolicy().to_json_dict()
    changed = {k: v for k, v in policy.items() if defaults.get(k) != v}
    if not changed:
        return "defaults"
    import msgspec

    return ", ".join(
        f"{key}={msgspec.json.encode(value).decode()}"
        for key, value in sorted(changed.items())
    )


def _digest(value: str, *, what: str) -> str:
    # "unverified" is the manifest's word for a digest nobody recorded (an
    # imported run's configuration, a run created without --source).
    return (
        f"{what} not recorded" if value == "unverified" else f"{what} {_short(value)}"
    )


def run_lines(summary: Mapping[str, Any]) -> list[str]:
    """The manifest summary as text: id, time, digests shortened, cap, policy."""
    flags = [_FLAGS[name] for name in _FLAGS if summary[name]]
    return [
        f"run {summary['run_id']} created {summary['created_at']}"
        + (f" ({', '.join(flags)})" if flags else ""),
        "  "
        + ", ".join(
            (
                _digest(summary["config_digest"], what="configuration"),
                _digest(summary["materialized_digest"], what="inputs"),
                _digest(summary["source_digest"], what="source dataset"),
            )
        ),
        f"  attempts per rollout: up to {summary['cap']} "
        f"({summary['max_rollout_attempts']} + {summary['extension']} extension)",
        f"  recovery policy: {_policy_text(summary['policy'])} "
        f"({plural(summary['policy_changes'], 'change')})",
        f"  configuration changes accepted {summary['drift_acceptances']}, "
        f"identity overrides {summary['overrides']}",
        f"  log: {plural(summary['as_of_seq'], 'event')}, head {summary['head_hash']}",
    ]


#: The manifest's flags, in words.
_FLAGS = {
    "identity_overridden": "identity overridden",
    "legacy_import": "imported from files saved without a ledger",
}


def coverage_lines(cover: Mapping[str, Any]) -> list[str]:
    """REC-41's counts as a table: each decision with rollouts, then its split."""
    from projections import REASON_LABELS

    lines = [
        f"where the {plural(cover['expected'], 'rollout')} stand (after event "
        f"{cover['as_of_seq']}; `rollout-ledger explain` says what each word means):"
    ]
    none = []
    for value, count in cover["decisions"].items():
        if not count:
            none.append(value)
            continue
        split = cover.get(value)
        detail = ""
        if isinstance(split, Mapping):
            detail = ", ".join(
                f"{REASON_LABELS.get(k, k)} {n}" for k, n in split.items() if n
            )
        lines.append(f"  {value:<10} {count:>7}" + (f"  ({detail})" if detail else ""))
    if none:
        lines.append(f"  none {', '.join(none)}")
    tasks = cover["tasks"]
    lines.append(
        f"tasks: {tasks['complete']} with every rollout complete, {tasks['partial']} "
        f"partly, {tasks['none']} with none"
    )
    lines.append(
        f"masked results {cover['masked']}, rollouts suspected of looping on free "
        f"attempts {cover['suspect']}"
    )
    if cover["failure_kinds"]:
        kinds = ", ".join(f"{k} {n}" for k, n in cover["failure_kinds"].items())
        lines.append(f"failure kinds of unfinished rollouts: {kinds}")
    return lines


def decision_line(
    task: int, rollout: int, decision: Decision, *, state: RunState | None = None
) -> str:
    """``task T rollout R attempt A: held: <the decision in words>``.

    With the run's ``state``, the words count the attempts used of its cap.
    """
    from projections import describe_decision, describe_rollout

    words = (
        describe_decision(decision)
        if state is None
        else describe_rollout(state, task, rollout, decision)
    )
    return f"task {task} rollout {rollout} attempt {decision.attempt}: {words}"


def _decision_text(decision: Decision) -> str:
    from projections import describe_reason

    reason = describe_reason(decision.reason)
    return f"{decision.value} ({reason}, attempt {decision.attempt})"


def plan_change_lines(before: Decisions, after: Decisions) -> list[str]:
    """What an operator action changed: each rollout's decision, then the counts."""
    changed = [
        f"  task {task} rollout {rollout}: {_decision_text(before[task, rollout])} "
        f"-> {_decision_text(after[task, rollout])}"
        for task, rollout in after
        if (task, rollout) in before and before[task, rollout] != after[task, rollout]
    ]
    if not changed:
        return ["no change in the plan"]
    old = Counter(d.value for d in before.values())
    new = Counter(d.value for d in after.values())
    counts = ", ".join(
        f"{value} {old[value]} -> {new[value]}"
        for value in sorted(old.keys() | new.keys())
        if old[value] != new[value]
    )
    return [
        f"plan changes ({plural(len(changed), 'rollout')}):",
        *changed,
        f"decisions: {counts}",
    ]


def decision_document(decision: Decision) -> dict[str, Any]:
    """A decision as ``--json`` shows it: value, attempt, reason, kind, rule id."""
    return {
        "value": decision.value,
        "attempt": decision.attempt,
        "reason": decision.reason,
        "kind": decision.kind,
        "rule": decision.rule,
    }


def plan_change_document(before: Decisions, after: Decisions) -> dict[str, Any]:
    """What an operator action changed, as ``--json`` shows it (docs/json.md)."""
    rollouts = [
        {
            "task": task,
            "rollout": rollout,
            "before": decision_document(before[task, rollout]),
            "after": decision_document(decision),
        }
        for (task, rollout), decision in after.items()
        if (task, rollout) in before and before[task, rollout] != decision
    ]
    old = Counter(d.value for d in before.values())
    new = Counter(d.value for d in after.values())
    counts = {
        value: {"before": old[value], "after": new[value]}
        for value in sorted(old.keys() | new.keys())
        if old[value] != new[value]
    }
    return {"rollouts": rollouts, "decisions": counts}


def verdict_lines(verdict: GateVerdict) -> list[str]:
    """The gate's verdict of a resume (REC-53..REC-57); warnings are logged."""
    if verdict.overridden:
        return ["gate: overridden with --allow-unsafe (identity_overridden recorded)"]
    if verdict.adopted:
        return ["gate: passed; the current identity was adopted (identity_adopted)"]
    if verdict.drift is not None and verdict.drift.operational:
        keys = ", ".join(verdict.drift.operational)
        return [f"gate: passed across operational drift: {keys}"]
    return ["gate: passed (configuration unchanged)"]


def history_line(entry: HistoryEntry) -> str:
    """One line of CLI-8: seq, time, actor, kind, key, summary and marks."""
    marks = "".join(f" [{mark}]" for mark in entry.marks)
    return (
        f"{entry.seq:>6}  {entry.at}  {entry.actor:<16}  {entry.kind:<20}  "
        f"{entry.key:<10}  {entry.summary}{marks}"
    )


def history_header(entry: HistoryEntry) -> str:
    """The column names above ``history_line``s, aligned with ``entry``'s."""
    return (
        f"{'seq':>6}  {'time':<{len(entry.at)}}  {'actor':<16}  {'kind':<20}  "
        f"{'key':<10}  summary"
    )


def choices_document(choices: HeldChoices) -> dict[str, Any]:
    """The held rollouts' two choices, for ``status --json`` (issue 28)."""
    return {
        "held_choices": {
            "sample_again": [
                {"task": h.task, "rollout": h.rollout, "command": h.sample_again}
                for h in choices.rollouts
            ],
            "grade_saved": [
                {"kind": g.kind, "rollouts": g.rollouts, "command": g.command}
                for g in choices.grade_saved
            ],
            "approve_all": choices.approve_all if choices.rollouts else None,
        }
    }


def held_lines(found: RunStatus, choices: HeldChoices) -> list[str]:
    """Each held rollout with the command that samples it again, then the
    other choice for those that kept an answer (grade it), then all at once."""
    if not found.held:
        return []
    lines = [f"held ({len(found.held)}), each with the command that runs it again:"]
    for h, choice in zip(found.held, choices.rollouts, strict=True):
        lines.append(
            "  " + decision_line(h.task, h.rollout, h.decision, state=found.state)
        )
        lines.append(f"    {choice.sample_again}")
    if choices.grade_saved:
        kept = choices.kept_answers
        lines.append(
            f"{kept} of them kept an answer, so there are two choices: run again "
            "(the commands above; the saved answer is discarded), or grade the "
            "saved answer with the judge, by failure kind (the dry run names each "
            "rollout that moves from held to re-judged; without --dry-run the next "
            "round grades them):"
        )
        lines += [
            f"  {g.kind} ({plural(g.rollouts, 'rollout')}): {g.command}"
            for g in choices.grade_saved
        ]
    lines.append(
        "every held rollout at once (run again; the dry run lists them, without "
        f"--dry-run it records the approvals): {choices.approve_all}"
    )
    return lines
