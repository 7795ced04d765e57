"""``history``: the audit trail of a run (CLI-8), as values.

One entry per event: seq, time, actor, kind, the rollout key it concerns and a
short summary, marked ``superseded`` (REC-2: an outcome that arrived after a
newer attempt was allocated), ``duplicate`` (REC-1: a second outcome of one
attempt) or ``abandoned`` (REC-33: a judge admission a later resume found
open). Filtered to one rollout, the trail ends with its decision and the rule
that decided. Pure: the marks are read off the folded state.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import msgspec

from ledger import MAX_SEQ, bounded, plural, redact_secrets, rollout_index, task_index
from ledger import events as ev
from ledger.errors import ConfigError
from projections.decisions.rules import Decision, decide
from projections.fold.reading import EventSource, replay
from projections.fold.state import RolloutState, RunState
from projections.views.file_events import row_text, score_text
from projections.views.row_lines import RowLines
from projections.words.describe import describe_rollout
from projections.words.tables import RULE_NAMES

__all__ = ["History", "HistoryEntry", "history"]


class HistoryEntry(msgspec.Struct, frozen=True, kw_only=True):
    """One event of the trail."""

    seq: int
    at: str
    actor: str
    kind: str
    task: int | None = None
    rollout: int | None = None
    attempt: int | None = None
    summary: str
    marks: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        """``t<task> r<rollout> a<attempt>``, or ``-`` for a run-wide event."""
        if self.task is None:
            return "-"
        parts = [f"t{self.task}", f"r{self.rollout}"]
        return " ".join(parts + ([] if self.attempt is None else [f"a{self.attempt}"]))


class History(msgspec.Struct, frozen=True, kw_only=True):
    """The trail, and for one rollout its decision and why."""

    entries: tuple[HistoryEntry, ...]
    decision: Decision | None = None
    #: The decision in words, as the run decided it (its id stays in ``decision``).
    words: str | None = None

    @property
    def why(self) -> str | None:
        """The deciding rule and its words, e.g. ``"REC-20.5a final agent timeout"``."""
        if self.decision is None:
            return None
        words = RULE_NAMES.get(self.decision.rule)
        return self.decision.rule + (f" {words}" if words else "")


Key = tuple[int, int, int | None]
_OUTCOMES = (ev.ResultSaved, ev.FailureSaved, ev.OmissionSaved)
#: Events that name one attempt of one rollout.
_KEYED = (ev.RerunApproved, ev.AttemptReserved, ev.JudgeAdmitted, *_OUTCOMES)


def _short(digest: str) -> str:
    return digest[:12]


def _released(
    body: ev.AttemptsReleased, task: int | None = None, rollout: int | None = None
) -> str:
    if task is None and rollout is None:
        return (
            f"released {len(body.dispatch)} to dispatch, {len(body.rejudge)} to judge"
        )
    lists = (("dispatch", body.dispatch), ("re-judgment", body.rejudge))
    return "; ".join(
        f"released t{t} r{r} a{a} for {name}"
        for name, released in lists
        for t, r, a in released
        if _matches((t, r), task, rollout)
    )


def _matches(key: tuple[int, int], task: int | None, rollout: int | None) -> bool:
    return (task is None or key[0] == task) and (rollout is None or key[1] == rollout)


def _reason(text: str | None) -> str:
    return f": {text}" if text else ""


def _judged(body: ev.JudgeOutcomeSaved) -> str:
    if body.outcome == "graded":
        return f"judged: graded, reward {score_text(body.reward)}"
    return f"judged: failed ({body.failure_kind or 'unclassified'})"


_SUMMARIES: dict[type[Any], Callable[[Any], str]] = {
    ev.RunCreated: lambda b: (
        f"run {b.run_id}: {plural(len(b.index), 'rollout')}, cap "
        f"{b.max_rollout_attempts}, "
        f"config {_short(b.config_digest)}"
    ),
    ev.LegacyImported: lambda b: (
        f"imported {b.rows_imported} of {plural(b.rows_read, 'row')} "
        f"({b.rows_rejected} rejected)"
    ),
    ev.AttemptReserved: lambda b: (
        "reserved" if b.stage_index is None else f"reserved from stage {b.stage_index}"
    ),
    ev.OmissionSaved: lambda b: f"omission{_reason(b.reason)}",
    ev.RowRefused: lambda b: (
        ("" if b.round is None else f"round {b.round}: ")
        + f"{b.file} line {b.line} not recorded: {b.reason}"
    ),
    ev.JudgeAdmitted: lambda b: f"judge admitted ({b.admission_id})",
    ev.JudgeOutcomeSaved: _judged,
    ev.RerunApproved: lambda b: f"rerun approved{_reason(b.reason)}",
    ev.AttemptsExtended: lambda b: f"attempts extended by {b.total}{_reason(b.reason)}",
    ev.FailureBudgetReset: lambda b: (
        f"failure budget reset: sidecar lines < {b.excluded_lines}, "
        f"seq <= {b.before_seq} no longer count{_reason(b.reason)}"
    ),
    ev.PolicyChanged: lambda b: (
        "policy: "
        + ", ".join(
            f"{key} {_json(change.old)} -> {_json(change.new)}"
            for key, change in sorted(b.changes.items())
        )
        + _reason(b.reason)
    ),
    ev.DriftAccepted: lambda b: (
        f"operational drift accepted ({_short(b.from_digest)} -> "
        f"{_short(b.to_digest)}): {', '.join(b.operational_keys)}"
    ),
    ev.IdentityAdopted: lambda b: (
        f"identity adopted ({_short(b.from_digest)} -> {_short(b.to_digest)})"
    ),
    ev.IdentityOverridden: lambda b: (
        f"identity overridden ({_short(b.from_digest)} -> {_short(b.to_digest)}): "
        f"{', '.join(b.semantic_keys)}{_reason(b.reason)}"
    ),
    ev.ResumeStarted: lambda b: (
        "resume: "
        + ", ".join(f"{name} {count}" for name, count in sorted(b.counts.items()))
    ),
}


def _json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


class _Trail:
    """Keys and marks of events, read off the folded state."""

    def __init__(self, state: RunState, lines: RowLines) -> None:
        self.state = state
        self.lines = lines
        self._admissions: dict[str, tuple[int, int, int]] | None = None

    def admission(self, admission_id: str) -> tuple[int, int, int] | None:
        if self._admissions is None:  # built once, only when a judgment is shown
            self._admissions = {
                judgment.admission_id: (task, index, attempt)
                for task, rollouts in self.state.rollouts.items()
                for index, rollout in rollouts.items()
                for attempt in (rollout.judgments or {})
                for judgment in rollout.judgments_of(attempt)
            }
        return self._admissions.get(admission_id)

    def key(self, body: Any) -> Key | None:
        if isinstance(body, ev.JudgeOutcomeSaved):
            return self.admission(body.admission_id)
        if isinstance(body, _KEYED):
            return body.task, body.rollout, body.attempt
        return None

    def marks(self, event: ev.StoredEvent, key: Key | None) -> tuple[str, ...]:
        body = event.body
        if key is None or key[2] is None:
            return ()
        rollout = self.state.rollouts.get(key[0], {}).get(key[1])
        if rollout is None:
            return ()
        if isinstance(body, _OUTCOMES):
            stage_mark = _stage_mark(rollout, body, event.seq)
            if stage_mark is not None:
                return stage_mark
            first = rollout.outcomes.get(key[2])
            if first is None or first.seq != event.seq:
                return ("duplicate",)  # REC-1: the first outcome stands
            return ("superseded",) if first.late else ()  # REC-2
        if isinstance(body, ev.JudgeAdmitted):
            judgment = next(
                (
                    j
                    for j in rollout.judgments_of(key[2])
                    if j.admission_id == body.admission_id
                ),
                None,
            )
            # REC-33: still open when a later resume replayed the log.
            if (
                judgment is not None
                and judgment.outcome is None
                and self.state.latest_resume_seq > event.seq
            ):
                return ("abandoned",)
        return ()


def _stage_mark(
    rollout: RolloutState, body: object, seq: int
) -> tuple[str, ...] | None:
    """ROW-64: the mark of a stage row before its final stage (no outcome).

    The row that saved its stage has none; a second row of the stage is a
    duplicate; a row the fold did not take (late, REC-2) is superseded.
    ``None`` for any other row.
    """
    if not isinstance(body, ev.ResultSaved) or body.stage_index is None:
        return None
    if body.stage_index == body.final_stage_index:
        return None  # the final stage's row is its attempt's outcome
    saved = (rollout.stages or {}).get(body.stage_index)
    if saved is None:
        return ("superseded",)
    return () if saved[1] == seq else ("duplicate",)


def _names(body: Any, task: int | None, rollout: int | None) -> bool:
    return isinstance(body, ev.AttemptsReleased) and any(
        _matches((t, r), task, rollout) for t, r, _ in (*body.dispatch, *body.rejudge)
    )


def _entry(
    trail: _Trail, event: ev.StoredEvent, key: Key | None, summary: str
) -> HistoryEntry:
    return HistoryEntry(
        seq=event.seq,
        at=event.at,
        actor=event.actor,
        kind=event.kind,
        task=None if key is None else key[0],
        rollout=None if key is None else key[1],
        attempt=None if key is None else key[2],
        # ID-13: a reason or kind a log written before redaction holds.
        summary=redact_secrets(summary),
        marks=trail.marks(event, key),
    )


def _entries(
    trail: _Trail,
    stored: Iterable[ev.StoredEvent],
    task: int | None,
    rollout: int | None,
    kind: str | None,
) -> Iterator[HistoryEntry]:
    keyed = task is not None or rollout is not None
    for event in stored:
        if kind is not None and event.kind != kind:
            continue
        key = trail.key(event.body)
        if not keyed or (key is not None and _matches(key[:2], task, rollout)):
            yield _entry(trail, event, key, _summary(event.body, trail.lines))
        elif key is None and _names(event.body, task, rollout):
            # A release that names the rollout(s) asked about, shown for them.
            summary = _released(event.body, task, rollout)  # type: ignore[arg-type]
            yield _entry(trail, event, None, summary)


def _summary(body: Any, lines: RowLines) -> str:
    if isinstance(body, ev.AttemptsReleased):
        return _released(body)
    if isinstance(body, (ev.ResultSaved, ev.FailureSaved, ev.TailRepaired)):
        return row_text(body, lines)  # a row by its file and line
    render = _SUMMARIES.get(type(body))
    return render(body) if render is not None else ""


def _sources(
    source: EventSource | RunState | Iterable[ev.StoredEvent],
    events: Iterable[ev.StoredEvent] | None,
    since: int | None,
) -> tuple[RunState, Iterable[ev.StoredEvent]]:
    if since is not None and since > MAX_SEQ:
        raise ConfigError(
            f"--since {since} is past the largest seq a run can have ({MAX_SEQ})",
            key="since",
        )
    start = 1 if since is None else max(since, 1)
    if isinstance(source, RunState):
        if events is None:
            raise TypeError("history(state) needs the events too: events=...")
        return source, (e for e in events if e.seq >= start)
    if isinstance(source, Iterable):
        stored = list(source)
        return replay(stored), (e for e in stored if e.seq >= start)
    return replay(source), source.events(start)


def _check_bounds(
    task: int | None, rollout: int | None, since: int | None, kind: str | None
) -> None:
    """Each filter within its bound, before anything is read (``ConfigError``).

    ``kind`` names an event kind: a typo would show nothing, silently.
    """
    if kind is not None and kind not in ev.KINDS:
        raise ConfigError(
            f"{kind!r} is not an event kind; the kinds are {', '.join(ev.KINDS)}",
            key="kind",
        )
    if since is not None:
        bounded(since, low=1, high=MAX_SEQ, what="--since takes a seq", key="since")
    if task is not None:
        task_index(task)
    if rollout is not None:
        rollout_index(rollout)


def history(
    source: EventSource | RunState | Iterable[ev.StoredEvent],
    *,
    events: Iterable[ev.StoredEvent] | None = None,
    task: int | None = None,
    rollout: int | None = None,
    kind: str | None = None,
    since: int | None = None,
) -> History:
    """The audit trail of CLI-8: entries from seq ``since`` on, filtered.

    ``source`` is a ledger, stored events, or a ``RunState`` with the
    ``events`` it was folded from. With both ``task`` and ``rollout``, the
    history carries that rollout's decision (``ConfigError`` for an unknown key).
    """
    _check_bounds(task, rollout, since, kind)
    state, stored = _sources(source, events, since)
    lines = RowLines(getattr(source, "files", None))
    entries = tuple(_entries(_Trail(state, lines), stored, task, rollout, kind))
    decision = words = None
    if task is not None and rollout is not None:
        if rollout not in state.rollouts.get(task, {}):
            raise ConfigError(
                f"task {task}, rollout {rollout} is not among this run's rollouts",
                key="task",
            )
        decision = decide(state, task, rollout)
        words = describe_rollout(state, task, rollout, decision)
    return History(entries=entries, decision=decision, words=words)
