"""The snapshot of what is left (P-8): a resume in proportion to the work left.

A full snapshot (``projections.snapshot``) restores every rollout; at a
million rollouts that alone costs seconds and hundreds of MiB, though most
rollouts are settled: complete, terminal, exhausted or accepted as omitted.
Their decisions cannot change without an event that names them or changes
what every decision reads (the cap, the policy, the failure budget). So the
snapshot of what is left keeps the state with only the other rollouts, and
sums what the settled ones add to the counts, the coverage and the reward
figures (``RunState.settled``, exact sums: the figures are a full replay's).

It is used only while that holds: every event after it must name a rollout
it kept, or change nothing a decision reads (``tail_is_open``); otherwise
the caller replays in full, as before. It also carries what the last full
read of the materialized inputs found (``ledger.run.inputs_seen``), so a
resume need not hash the whole file again while the file is untouched.
"""

from __future__ import annotations

import hashlib
import itertools
from array import array
from collections.abc import Iterable, Mapping
from pathlib import Path

import msgspec

from ledger import Ledger
from ledger import events as ev
from ledger.policy.log import policy_from_json
from ledger.run.inputs_seen import InputsSeen, same_file
from projections.bulk import gc_paused
from projections.coverage import Coverage, Tally, coverage
from projections.decide import Decision, decide_all
from projections.fold import fold_into
from projections.metrics import RewardMetrics, metrics_of, unfinished_kind
from projections.replay import replay
from projections.reward_figures import (
    Figures,
    Scores,
    figures_of_scores,
    merge_scores,
    pack_scores,
    sorted_scores,
    unpack_scores,
    updated,
)
from projections.snapshot import CODE_VERSION
from projections.state import RolloutState, RunState, Settled

__all__ = [
    "OPEN_VERSION",
    "SETTLED_VALUES",
    "AtHead",
    "OpenSnapshot",
    "Opened",
    "load_open",
    "open_problems",
    "save_left",
    "save_open",
    "settle",
    "tail_is_open",
]

#: The decisions no event but one naming the rollout (or changing the cap, the
#: policy or the failure budget) can change.
SETTLED_VALUES = frozenset({"complete", "terminal", "exhausted", "omitted"})


def _open_version() -> str:
    # The fold's code, and the code that decides and sums what is left out.
    digest = hashlib.sha256(CODE_VERSION.encode())
    here = Path(__file__).parent
    names = ("decide.py", "coverage.py", "metrics.py", "reward_figures.py")
    for name in (*names, Path(__file__).name):
        digest.update((here / name).read_bytes())
    return "left-" + digest.hexdigest()[:16]


OPEN_VERSION = _open_version()


class AtHead(msgspec.Struct, array_like=True, frozen=True):
    """What ``status`` shows, as of the snapshot's own seq (default counting)."""

    coverage: Coverage
    metrics: RewardMetrics
    held: list[tuple[int, int, Decision]]


class OpenSnapshot(msgspec.Struct, array_like=True):
    """The state of what is left, and what the inputs were when last read whole.

    ``at_head`` is an encoded ``AtHead`` (msgpack ``nil`` for none), decoded
    only by a ``status`` at the snapshot's seq: a resume never builds it.
    """

    state: RunState
    inputs: InputsSeen | None = None
    at_head: msgspec.Raw = msgspec.Raw(b"\xc0")


_DECODER = msgspec.msgpack.Decoder(OpenSnapshot)
_ENCODER = msgspec.msgpack.Encoder()
_AT_HEAD = msgspec.msgpack.Decoder(AtHead | None)
_FIGURES = msgspec.msgpack.Decoder(Figures)


class _Sums:
    """A ``Settled`` being added to, rollout by rollout."""

    def __init__(self, base: Settled | None, after: int) -> None:
        base = base or Settled()
        self.settled = msgspec.structs.replace(
            base,
            decisions={v: dict(r) for v, r in base.decisions.items()},
            tasks=dict(base.tasks),
            task_base=dict(base.task_base),
            failure_tasks=list(base.failure_tasks),
            missing_tasks=list(base.missing_tasks),
        )
        self.tally = Tally(base)
        self.tally.base = {}
        self.base = base
        self.new_tasks, self.new_scores = array("q"), array("d")
        self.after = after

    def add(self, task: int, rollout: RolloutState, decision: Decision) -> None:
        found = self.settled
        reasons = found.decisions.setdefault(decision.value, {})
        reasons[decision.reason] = reasons.get(decision.reason, 0) + 1
        found.rollouts += 1
        self.tally.add_kind(decision)
        self.tally.add_rollout(rollout, self.after)
        if decision.value == "complete":
            if decision.score is None:
                found.unscored += 1
            else:
                found.scored += 1
                self.new_tasks.append(task)
                self.new_scores.append(decision.score)
            return
        if decision.value == "omitted":
            found.omitted += 1
            return
        kind = unfinished_kind(rollout)
        if kind == "missing":
            found.missing += 1
            found.missing_tasks.append(task)
        elif kind == "failure_classes":
            found.failure_classes += 1
            found.failure_tasks.append(task)
        elif kind == "omitted":
            found.omitted += 1
        elif kind == "masked":
            found.metric_masked += 1
        else:
            found.other += 1

    def done(self) -> Settled:
        """The sums, each in one order (R-3: the same log, the same bytes).

        Lists and maps are sorted, so the sums of a prefix settled in one
        go or over several resumes encode alike. The lists were sorted
        before and grew by a few: sorting them again is close to linear.
        """
        found, tally = self.settled, self.tally
        found.decisions = {
            value: dict(sorted(reasons.items()))
            for value, reasons in sorted(found.decisions.items())
        }
        found.failure_tasks.sort()
        found.missing_tasks.sort()
        found.tasks = dict(sorted(tally.tasks.items()))
        found.kinds = dict(sorted(tally.kinds.items()))
        found.masked, found.suspect = tally.masked, tally.suspect
        found.reserved, found.outcomes = tally.reserved, tally.outcomes
        found.duplicates, found.superseded = tally.duplicates, tally.superseded
        found.counted = tally.counted
        found.task_base = dict(sorted(found.task_base.items()))
        base = self.base
        if self.new_tasks or not base.figures:  # else the base's, unread
            new = sorted_scores(self.new_tasks, self.new_scores)
            self.new_tasks, self.new_scores = array("q"), array("d")
            old: Scores = unpack_scores(base.scores)
            figures = None
            if base.figures:  # only the tasks that gained values, again
                added: dict[int, list[float]] = {}
                for task, score in zip(*new, strict=True):
                    added.setdefault(task, []).append(score)
                figures = updated(_FIGURES.decode(base.figures), old, added)
            scores = merge_scores(old, new)
            del old, new
            found.scores = pack_scores(scores)
            figures = figures or figures_of_scores(scores)
            found.figures = _ENCODER.encode(figures)
        return found


def settle(
    state: RunState,
    decisions: Mapping[tuple[int, int], Decision],
    *,
    consume: bool = False,
) -> RunState:
    """``state`` with its settled rollouts moved into ``settled`` (a new state).

    ``decisions`` are ``state``'s (``decide_all``). The rollouts kept are the
    same objects as ``state``'s: the caller no longer folds into ``state``.
    ``consume``: each task is taken out of ``state`` once summed, so its
    settled rollouts are freed as the sums grow (an import, P-9).
    """
    sums = _Sums(state.settled, state.before_seq)
    kept: dict[int, dict[int, RolloutState]] = {}
    for task in list(state.rollouts):
        by_rollout = state.rollouts[task]
        total, done, complete = sums.settled.task_base.pop(task, (0, 0, 0))
        keep: dict[int, RolloutState] = {}
        for index, rollout in by_rollout.items():
            decision = decisions[task, index]
            if decision.value not in SETTLED_VALUES:
                keep[index] = rollout
                continue
            sums.add(task, rollout, decision)
            total += 1
            done += decision.value in ("complete", "omitted")
            complete += decision.value == "complete"
        if keep:
            kept[task] = keep
            if total:
                sums.settled.task_base[task] = (total, done, complete)
        else:
            sums.tally.add_completion(total, done, complete)
        if consume:
            del state.rollouts[task]
    return msgspec.structs.replace(state, rollouts=kept, settled=sums.done())


def save_open(
    ledger: Ledger,
    state: RunState,
    decisions: Mapping[tuple[int, int], Decision],
    inputs: InputsSeen | None,
    *,
    covered: Coverage | None = None,
) -> None:
    """Store the snapshot of what is left of ``state`` (its ``decisions``).

    With what ``status`` shows as of it: a status at its seq reads them, and
    decides nothing. ``covered``: ``state``'s coverage, when already made.
    """
    save_left(ledger, settle(state, decisions), decisions, inputs, covered=covered)


def save_left(
    ledger: Ledger,
    left: RunState,
    decisions: Mapping[tuple[int, int], Decision],
    inputs: InputsSeen | None,
    *,
    covered: Coverage | None = None,
) -> None:
    """Store ``left`` (what ``settle`` gave), its rollouts decided in ``decisions``."""
    kept = {
        (task, index): decisions[task, index]
        for task, by_rollout in left.rollouts.items()
        for index in by_rollout
    }
    at_head = AtHead(
        covered or coverage(left, kept),
        metrics_of(left, kept),
        [(t, r, d) for (t, r), d in kept.items() if d.value == "held"],
    )
    try:
        raw = msgspec.Raw(_ENCODER.encode(at_head))
        encoded = _ENCODER.encode(OpenSnapshot(left, inputs, raw))
    except OverflowError:  # a number over 64 bits from an old log: none (EV-14)
        return
    # One per run: the policy it was folded under is in the state (the key's
    # policy digest is left empty, as for the writer's index).
    ledger.save_snapshot(
        left.as_of_seq, bytes.fromhex(left.head_hash), OPEN_VERSION, "", encoded
    )


#: Kinds that change nothing any decision reads (the head, the identity, the
#: counters of resumes and repairs, the release bookkeeping).
_NEUTRAL = frozenset(
    {
        "resume_started",
        "attempts_released",
        "tail_repaired",
        "drift_accepted",
        "identity_adopted",
        "identity_overridden",
        "legacy_imported",
    }
)
#: The events that change one rollout, named in their body.
_NAMED = (
    ev.AttemptReserved,
    ev.ResultSaved,
    ev.FailureSaved,
    ev.OmissionSaved,
    ev.JudgeAdmitted,
    ev.RerunApproved,
)


def tail_is_open(state: RunState, events: Iterable[ev.StoredEvent]) -> bool:
    """Whether every event of ``events`` leaves ``state``'s settled rollouts be.

    An event naming a rollout ``state`` left out (or none it knows), or one
    that changes what every decision reads (the cap, the policy, the failure
    budget, a new run), means the caller must replay in full.
    """
    return _open_tail(state, events) is not None


def _open_tail(state: RunState, events: Iterable[ev.StoredEvent]) -> int | None:
    """The last seq of ``events`` when ``tail_is_open`` (else ``None``)."""
    rollouts = state.rollouts
    admissions = dict(state.open_admissions)
    last = state.as_of_seq
    for event in events:
        last = event.seq
        kind, body = event.kind, event.body
        if kind in _NEUTRAL:
            continue
        if isinstance(body, _NAMED):
            task, index = body.task, body.rollout
            if index not in rollouts.get(task, {}):
                return None
            if isinstance(body, ev.JudgeAdmitted):
                admissions[body.admission_id] = (task, index, body.attempt)
            continue
        if isinstance(body, ev.JudgeOutcomeSaved):
            key = admissions.pop(body.admission_id, None)
            if key is None or key[1] not in rollouts.get(key[0], {}):
                return None
            continue
        return None
    return last


class Opened(msgspec.Struct):
    """What the snapshot of what is left gave: the state at the head, if usable."""

    state: RunState | None  # None: replay in full (the tail touches a settled one)
    inputs: InputsSeen | None
    #: When no event followed the snapshot: what status shows, still encoded.
    head_figures: msgspec.Raw | None = None

    @property
    def at_head(self) -> AtHead | None:
        """What ``status`` shows as of the head, when the snapshot is at it."""
        if self.head_figures is None:
            return None
        try:
            return _AT_HEAD.decode(self.head_figures)
        except (msgspec.DecodeError, RecursionError):
            return None  # EV-14: an optimization only


def load_open(ledger: Ledger) -> Opened | None:
    """The snapshot of what is left, brought to the head when it can be.

    The snapshot must be this code's and still in the log (its head hash at
    its seq). The events after it are read, checked as a chain, and folded
    when ``tail_is_open``, under the policy the snapshot was folded under (a
    change of policy after it is not an open tail). No event before it is
    read: not even the run's first, whose index holds one entry per rollout.
    """
    found = ledger.load_snapshot(OPEN_VERSION, "")
    if found is None:
        return None
    try:
        with gc_paused():
            snapshot = _DECODER.decode(found[2])
    except (msgspec.DecodeError, RecursionError):
        return None  # EV-14: an optimization only; a full refold is always right
    state = snapshot.state
    if state.as_of_seq != found[0] or state.settled is None:
        return None
    start = state.as_of_seq
    # Checked, then folded, each as read: the tail is never held (P-8). The
    # fold stops at the last event checked: a writer may append meanwhile.
    last = _open_tail(state, ledger.events(start + 1))
    if last is None:
        return Opened(None, snapshot.inputs)
    if last == start:
        return Opened(state, snapshot.inputs, snapshot.at_head)
    checked = itertools.takewhile(lambda e: e.seq <= last, ledger.events(start + 1))
    fold_into(state, checked, policy_from_json(state.policy))
    return Opened(state, snapshot.inputs)


def open_problems(
    ledger: Ledger, inputs_path: Path | None, digest: str | None
) -> list[tuple[str, int]]:
    """EV-14 for the snapshot of what is left: what ``verify`` finds wrong in it.

    It must equal what the events it covers settle to, and what it says of
    the inputs' file must hold: while the file shows the times it recorded,
    ``digest`` (the file's sha256 as ``verify`` just read it) must be the one
    it recorded. A difference there is a change no time shows (under the file
    system): resume and status trust the record until the file is touched.
    """
    found = ledger.load_snapshot(OPEN_VERSION, "")
    if found is None:
        return []
    seq = found[0]
    try:
        snapshot = _DECODER.decode(found[2])
    except (msgspec.DecodeError, RecursionError):
        return [("the stored snapshot of what is left does not decode", seq)]
    problems = []
    prefix = replay([e for e in ledger.events() if e.seq <= seq])
    expected = settle(prefix, decide_all(prefix))
    if _ENCODER.encode(expected) != _ENCODER.encode(snapshot.state):
        problems.append(
            (
                "the stored snapshot of what is left differs from a refold of the "
                "events it covers (resume and status ignore it only if stale)",
                seq,
            )
        )
    seen = snapshot.inputs
    if (
        seen is not None
        and digest is not None
        and seen.digest != digest
        and same_file(seen, inputs_path)
    ):
        problems.append(
            (
                "the materialized inputs changed without their file's times "
                "changing (a write under the file system): resume and status "
                "took the sha256 recorded when they were last read whole",
                seq,
            )
        )
    return problems
