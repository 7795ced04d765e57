"""The snapshot of what is left (P-8): a resume in proportion to the work left.

A full snapshot (``projections.fold.snapshot``) restores every rollout; at a
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
read of the materialized inputs found (``ledger.collector_files.inputs_seen``), so a
resume need not hash the whole file again while the file is untouched.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from ledger import Ledger
from ledger import events as ev
from ledger.collector_files.inputs_seen import InputsSeen, same_file
from projections.decisions.completion import Coverage, coverage
from projections.decisions.rules import Decision, decide_all
from projections.figures.metrics import RewardMetrics, metrics_of
from projections.fold.bulk import gc_paused
from projections.fold.reading import fold_after, replay
from projections.fold.settled import settle
from projections.fold.snapshot import CODE_VERSION
from projections.fold.state import RunState

__all__ = [
    "OPEN_VERSION",
    "AtHead",
    "OpenSnapshot",
    "Opened",
    "left_bytes",
    "load_open",
    "open_problems",
    "tail_is_open",
]


def _versioned() -> tuple[str, ...]:
    import projections.decisions.completion as coverage_module
    import projections.decisions.rules as decide_module
    import projections.figures.metrics as metrics_module
    import projections.figures.sums as sums_module
    import projections.fold.settled as settle_module

    modules = (
        decide_module,
        coverage_module,
        metrics_module,
        sums_module,
        settle_module,
    )
    return (*(str(m.__file__) for m in modules), __file__)


_VERSIONED = _versioned()


def _open_version() -> str:
    # The fold's code, and the code that decides and sums what is left out.
    digest = hashlib.sha256(CODE_VERSION.encode())
    for path in _VERSIONED:
        digest.update(Path(path).read_bytes())
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


def left_bytes(
    left: RunState,
    decisions: Mapping[tuple[int, int], Decision],
    inputs: InputsSeen | None,
    *,
    covered: Coverage | None = None,
) -> bytes | None:
    """The snapshot of ``left`` (what ``settle`` gave) as stored; ``None``: none.

    With what ``status`` shows as of it: a status at its seq reads them, and
    decides nothing. ``covered``: ``left``'s coverage, when already made. A
    writer stores it (``operations``).
    """
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
        return _ENCODER.encode(OpenSnapshot(left, inputs, raw))
    except OverflowError:  # a number over 64 bits from an old log: none (EV-14)
        return None


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
        "row_refused",
    }
)
#: The kinds of events that change one rollout, named in their body.
_NAMED = frozenset(
    {
        "attempt_reserved",
        "result_saved",
        "failure_saved",
        "omission_saved",
        "judge_admitted",
        "rerun_approved",
    }
)


class _Reopened(Exception):
    """An event of the tail touches what the snapshot left out: replay in full."""


class _OpenGuard:
    """Admits each event of a tail while it leaves the settled rollouts be.

    It reads the body as either decoder gives it (``Ledger.events``, or the
    replay's fast path, whose outcomes keep their facts as bytes): only the
    kind, the rollout it names and a judge's admission id.
    """

    def __init__(self, state: RunState) -> None:
        self.rollouts = state.rollouts
        self.admissions = dict(state.open_admissions)

    def admit(self, kind: str, body: Any) -> None:
        """Return when the event leaves the settled rollouts be, else raise."""
        if kind in _NEUTRAL:
            return
        if kind in _NAMED:
            task, index = body.task, body.rollout
            if index not in self.rollouts.get(task, {}):
                raise _Reopened
            if kind == "judge_admitted":
                self.admissions[body.admission_id] = (task, index, body.attempt)
            return
        if kind == "judge_outcome_saved":
            key = self.admissions.pop(body.admission_id, None)
            if key is None or key[1] not in self.rollouts.get(key[0], {}):
                raise _Reopened
            return
        raise _Reopened


def tail_is_open(state: RunState, events: Iterable[ev.StoredEvent]) -> bool:
    """Whether every event of ``events`` leaves ``state``'s settled rollouts be.

    An event naming a rollout ``state`` left out (or none it knows), or one
    that changes what every decision reads (the cap, the policy, the failure
    budget, a new run), means the caller must replay in full.
    """
    guard = _OpenGuard(state)
    try:
        for event in events:
            guard.admit(event.kind, event.body)
    except _Reopened:
        return False
    return True


class Opened(msgspec.Struct):
    """What the snapshot of what is left gave: the state at the head, if usable."""

    #: None: replay in full (the tail touches a settled one, or not ``usable``).
    state: RunState | None
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


def load_open(
    ledger: Ledger, *, usable: Callable[[RunState], bool] | None = None
) -> Opened | None:
    """The snapshot of what is left, brought to the head when it can be.

    The snapshot must be this code's and still in the log (its head hash at
    its seq). The events after it are read, checked as a chain, and folded
    when ``tail_is_open``, under the policy the snapshot was folded under (a
    change of policy after it is not an open tail). No event before it is
    read: not even the run's first, whose index holds one entry per rollout.
    ``usable(state)``, given, is asked of the snapshot before any of its tail
    is read (a caller that must replay in full anyway reads none of it).
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
    if usable is not None and not usable(state):  # nothing of the tail read
        return Opened(None, snapshot.inputs)
    # One pass: each event checked as a link of the chain, admitted, then
    # folded (replay's fast path), never held (P-8). An event that reopens a
    # settled rollout stops it: the state, the snapshot's own copy, is then
    # dropped for a full replay. A writer appending meanwhile is not waited for.
    guard = _OpenGuard(state)
    try:
        last = fold_after(ledger, state, admit=guard.admit)
    except _Reopened:
        return Opened(None, snapshot.inputs)
    if last is None:
        return Opened(state, snapshot.inputs, snapshot.at_head)
    return Opened(state, snapshot.inputs)


def open_problems(
    ledger: Ledger,
    inputs_path: Path | None,
    digest: str | None,
    state: RunState | None = None,
    decisions: Mapping[tuple[int, int], Decision] | None = None,
) -> list[tuple[str, int]]:
    """EV-14 for the snapshot of what is left: what ``verify`` finds wrong in it.

    It must equal what the events it covers settle to, and what it says of
    the inputs' file must hold: while the file shows the times it recorded,
    ``digest`` (the file's sha256 as ``verify`` just read it) must be the one
    it recorded. A difference there is a change no time shows (under the file
    system): resume and status trust the record until the file is touched.
    ``state``: a refold from seq 1 already made (used when it ends where the
    snapshot does, instead of folding the same events again), and
    ``decisions``, its rollouts decided, when the caller has them.
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
    if state is not None and state.as_of_seq == seq:
        prefix = state  # ``verify``'s refold from seq 1 covers exactly these
    else:
        prefix, decisions = replay([e for e in ledger.events() if e.seq <= seq]), None
    expected = settle(prefix, decide_all(prefix) if decisions is None else decisions)
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
