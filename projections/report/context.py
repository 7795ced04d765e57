"""The HTML report of a run (issue 16), as one plain context dict.

``report_context`` reads and never writes: from a folded state, its events,
the decisions and (optionally) the ``verify`` findings, the reward figures and
the run's ledger, it builds every value the template shows: what was
evaluated, the headline and the command that moves the run on, the coverage,
the grid of tasks by rollouts (bands when too large), the audit trails with
what each row holds, failures by kind and side over time, held rollouts with
their commands, the run's changes, its workers, and the verdict with what was
checked and the head hash. Rule ids appear only in the trails' auditor
fields; every sentence a person reads is in plain words.

One pass over the events, and trails only for the rollouts shown one by one
(every rollout of a small run; the unfinished ones, up to ``TRAIL_LIMIT``, of
a large one): 100k rollouts stay a few megabytes (P-4).
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from ledger import Ledger, RecoveryPolicy, redact_secrets
from ledger import events as ev
from projections.browse.header import Evaluated, evaluated
from projections.decisions.completion import Coverage, coverage
from projections.decisions.rules import DECISION_VALUES, Decision
from projections.figures.in_words import pass_coverage
from projections.figures.metrics import PassAtK
from projections.fold.state import RunState
from projections.report.charts import (
    COLORS,
    SIDE_COLORS,
    SIDES,
    bands_svg,
    coverage_svg,
    failures_svg,
    per_task_svg,
)
from projections.report.content import PREVIEW, read_content
from projections.report.trail import Listed, Trails
from projections.views.next_steps import NextSteps, held_choices
from projections.views.workers import workers_seen
from projections.words.describe import GLOSSARY, describe_decision, describe_kind

__all__ = ["GRID_LIMIT", "TRAIL_LIMIT", "report_context", "report_verdict"]

#: Rollouts up to which the grid shows one cell per rollout.
GRID_LIMIT = 5000
#: Unfinished rollouts listed (and their trails kept) in a larger run.
TRAIL_LIMIT = 2000
#: Task bands of a larger run's grid.
BANDS = 200

Decisions = Mapping[tuple[int, int], Decision]
_UNFINISHED = ("pending", "retry", "rejudge", "held", "terminal", "exhausted")


def _command(*words: str) -> str:
    return " ".join(shlex.quote(w) if w[:1] != "<" else w for w in words)


def _next_steps(
    steps: NextSteps, counts: Mapping[str, int], first_terminal: Any
) -> list[dict[str, Any]]:
    """Each kind of unfinished work, its count and the command that moves it."""
    found = []
    resumable = sum(counts.get(v, 0) for v in ("pending", "retry", "rejudge"))
    if resumable:
        found.append(
            {
                "count": resumable,
                "what": "can run again now (waiting, to retry or to judge again)",
                "command": steps.run(),
            }
        )
    if counts.get("held"):
        found.append(
            {
                "count": counts["held"],
                "what": "are held until a person decides: run again, or grade a "
                "saved answer (see Held rollouts)",
                "command": steps.approve_all(),
            }
        )
    if counts.get("exhausted"):
        found.append(
            {
                "count": counts["exhausted"],
                "what": "used every attempt allowed",
                "command": steps.extend(),
            }
        )
    if counts.get("terminal"):
        task, rollout = first_terminal if first_terminal else (None, None)
        found.append(
            {
                "count": counts["terminal"],
                "what": "failed in a way a retry cannot fix; read why",
                "command": steps.history(task, rollout),
            }
        )
    return found


def _headline(
    steps: NextSteps, cover: Coverage, decisions: Decisions
) -> dict[str, Any]:
    counts = cover.decisions
    done = counts.get("complete", 0)
    expected = cover.expected
    first_terminal = next(
        (key for key, d in decisions.items() if d.value == "terminal"), None
    )
    remaining = sum(counts.get(v, 0) for v in _UNFINISHED)
    return {
        "complete": done,
        "expected": expected,
        "omitted": counts.get("omitted", 0),
        "percent": f"{100 * done / expected:.1f}" if expected else "0.0",
        "remaining": remaining,
        "steps": _next_steps(steps, counts, first_terminal),
    }


def _coverage_rows(cover: Coverage) -> list[dict[str, Any]]:
    splits: Mapping[str, Mapping[str, int]] = {
        "complete": cover.complete,
        "retry": cover.retry,
        "held": cover.held,
        "exhausted": cover.exhausted,
        "omitted": cover.omitted,
    }
    rows = []
    for value in DECISION_VALUES:
        parts = [
            {"reason": reason, "count": n, "sentence": GLOSSARY.get(reason, "")}
            for reason, n in splits.get(value, {}).items()
            if n
        ]
        rows.append(
            {
                "value": value,
                "count": cover.decisions.get(value, 0),
                "sentence": GLOSSARY.get(value, ""),
                "parts": parts,
            }
        )
    return rows


def _policy(state: RunState) -> RecoveryPolicy:
    try:
        return RecoveryPolicy.model_validate(state.policy)
    except ValueError:  # a policy this version reads differently: the default
        return RecoveryPolicy()


def _grid(
    state: RunState, decisions: Decisions, cap: int
) -> tuple[dict[str, Any], set[tuple[int, int]]]:
    """The grid (cells, or per-task bands), and the rollouts given a trail."""
    if len(decisions) <= GRID_LIMIT:
        rows: list[dict[str, Any]] = []
        for task, by_rollout in state.rollouts.items():
            cells = []
            for index in by_rollout:
                decision = decisions[task, index]
                cells.append(
                    {
                        "rollout": index,
                        "value": decision.value,
                        "words": describe_decision(decision, cap=cap),
                    }
                )
            rows.append({"task": task, "cells": cells})
        widest = max((len(row["cells"]) for row in rows), default=1)
        return {"mode": "cells", "rows": rows, "widest": widest}, set(decisions)
    tasks = list(state.rollouts)
    size = -(-len(tasks) // BANDS)
    bands = []
    for start in range(0, len(tasks), size):
        chunk = tasks[start : start + size]
        counts: Counter[str] = Counter(
            decisions[task, index].value
            for task in chunk
            for index in state.rollouts[task]
        )
        bands.append({"first": chunk[0], "last": chunk[-1], "counts": counts})
    unfinished = [
        key for key, d in decisions.items() if d.value not in ("complete", "omitted")
    ]
    listed = unfinished[:TRAIL_LIMIT]
    grid = {
        "mode": "bands",
        "tasks": len(tasks),
        "first_task": tasks[0],
        "last_task": tasks[-1],
        "band_size": size,
        "svg": bands_svg(bands),
        "unfinished": len(unfinished),
        "listed": [
            {
                "task": t,
                "rollout": r,
                "value": decisions[t, r].value,
                "words": describe_decision(decisions[t, r], cap=cap),
            }
            for t, r in listed
        ],
    }
    return grid, set(listed)


def _held(steps: NextSteps, decisions: Decisions, cap: int) -> dict[str, Any]:
    """The held rollouts (the first ``TRAIL_LIMIT``) and both choices for them."""
    held: list[dict[str, Any]] = []
    keys = []
    for (task, rollout), d in decisions.items():
        if d.value != "held":
            continue
        keys.append((task, rollout, d.attempt, d.reason, d.kind))
        if len(held) < TRAIL_LIMIT:
            held.append(
                {
                    "task": task,
                    "rollout": rollout,
                    "attempt": d.attempt,
                    "reason": GLOSSARY.get(d.reason, d.reason),
                    "words": describe_decision(d, cap=cap),
                    "command": steps.approve(task, rollout, d.attempt),
                }
            )
    choices = held_choices(steps, keys)
    return {
        "listed": held,
        "kept_answers": choices.kept_answers,
        "grade_saved": [
            {"kind": g.kind, "rollouts": g.rollouts, "command": g.command}
            for g in choices.grade_saved
        ],
        "approve_all": choices.approve_all,
    }


_EVERY_CHECK = (
    "Every check, every byte, for this report: the chain from the first event, "
    "every row against its file, two refolds, the published files."
)


def report_verdict(
    verification: Any, seq: int, head: str, proof: str | None
) -> dict[str, Any]:
    """The page's integrity verdict (``None``: nothing checked, ``proof`` said)."""
    if verification is None:  # not checked: the last verify's proof, in words
        return {
            **{"checked": False, "ok": None, "findings": [], "proved_up_to": None},
            **{"seq": seq, "head": head, "words": proof},
        }
    return {
        "checked": True,
        "ok": not verification.findings,
        "findings": [redact_secrets(str(f)) for f in verification.findings],
        "seq": verification.seq,
        "head": verification.head.hex(),
        "words": verification.words or _EVERY_CHECK,
        "proved_up_to": verification.proved_up_to,
    }


def _setting(value: Any) -> str:
    text = value if isinstance(value, str) else msgspec.json.encode(value).decode()
    return redact_secrets(text)


def _header(found: Evaluated) -> dict[str, Any]:
    """What the run evaluated, in the words and numbers the page's header shows."""
    digest = found.dataset_digest
    return {
        "agent": found.agent,
        "model": found.model,
        "dataset": found.dataset,
        "digest": digest,
        "digest_short": digest[:12] if digest else None,
        "num_repeats": found.num_repeats,
        "sampling": ", ".join(f"{k} {_setting(v)}" for k, v in found.sampling.items()),
        "max_attempts": found.max_attempts,
        "first_event_at": found.first_event_at,
        "last_event_at": found.last_event_at,
    }


def _pass_at_k(metrics: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Each pass@k with the tasks it covers in words (status's)."""
    if not metrics or not metrics.get("pass_at_k"):
        return []
    block = metrics["pass_at_k"]
    counting = block.get("counting", {})
    zeros = counting.get("failure_classes_counted_as_zero", 0) + counting.get(
        "missing_counted_as_zero", 0
    )
    found = []
    for p in block["values"]:
        entry = PassAtK(p["k"], p["value"], p["tasks"], p.get("of_tasks", p["tasks"]))
        found.append(
            {
                "k": entry.k,
                "value": entry.value,
                "covers": pass_coverage(entry, zeros=zeros),
            }
        )
    return found


def report_context(
    state: RunState,
    events: Iterable[ev.StoredEvent] | Listed,
    decisions: Decisions,
    *,
    out: str,
    verification: Any | None = None,
    metrics: Mapping[str, Any] | None = None,
    ledger: Ledger | None = None,
    proof: str | None = None,
) -> dict[str, Any]:
    """Everything the report shows, as plain values (strings, numbers, lists).

    ``verification`` is a ``Verification`` (``None``: not checked) and
    ``metrics`` the plain value of the reward figures (``None``: not given).
    ``events``: every event, or what a function of the rollouts given a trail
    returns (``Listed``). With the run's ``ledger``, the header says what was
    evaluated, each trail what its row holds and, for a run on PostgreSQL,
    who worked on it (``None`` without). ``proof``: the last verify's proof in
    words, said when this report checked nothing (``verification`` is ``None``).
    """
    cover = coverage(state, dict(decisions))
    cap = state.cap
    steps = NextSteps(out) if ledger is None else NextSteps.of(ledger, state)
    grid, with_trail = _grid(state, decisions, cap)
    policy = _policy(state)
    trails = Trails(state, decisions, with_trail, policy=policy)
    for event in events(with_trail) if callable(events) else events:
        trails.add(event)
    kinds = trails.kinds
    header, content, workers = None, None, None
    if ledger is not None:
        header = _header(evaluated(ledger, state, last_event_at=trails.last_at))
        content = read_content(ledger.files, trails.places())
        seen = workers_seen(ledger)  # a run on PostgreSQL (issue 29)
        workers = None if seen is None else [w.to_dict() for w in seen]
    return {
        "run_id": redact_secrets(state.run_id),
        "evaluated": header,
        "out": out,
        "as_of_seq": state.as_of_seq,
        "headline": _headline(steps, cover, decisions),
        "coverage": _coverage_rows(cover),
        "coverage_svg": coverage_svg(cover.decisions),
        "metrics": metrics,
        "per_task_svg": per_task_svg(metrics),
        "pass_at_k": _pass_at_k(metrics),
        "grid": grid,
        "trails": trails.trails(content),
        "preview": PREVIEW,
        "failures": {
            "kinds": [
                {
                    "kind": kind,
                    "words": describe_kind(kind),
                    "side": side_,
                    "count": n,
                    "unfinished": cover.failure_kinds.get(kind, 0),
                }
                for (kind, side_), n in sorted(
                    kinds.items(), key=lambda item: (-item[1], item[0])
                )
            ],
            "sides": {
                s: sum(n for (_, s2), n in kinds.items() if s2 == s) for s in SIDES
            },
            "svg": failures_svg(trails.times),
        },
        "held": _held(steps, decisions, cap),
        "held_total": cover.decisions.get("held", 0),
        "workers": workers,
        "changes": trails.changes,
        "refused_more": trails.refused_more,
        "refused_command": _command(
            "rollout-ledger", "history", out, "--event", "row_refused"
        ),
        "verify": report_verdict(verification, state.as_of_seq, state.head_hash, proof),
        "cap": cap,
        "colors": COLORS,
        "side_colors": SIDE_COLORS,
    }
