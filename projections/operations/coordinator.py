"""``rollout-ledger run URL``: the coordinator of a run on PostgreSQL (SC-4, issue 29).

The process that holds the run lock resumes (replay, gate, plan: REC-56, as
``resume`` does), releases the plan in the log and offers every released
attempt and re-judgment to the workers (``ledger.WorkBoard``). Then, every
``POLL_SECONDS`` while workers record:

- a worker whose advisory lock is gone (its process, node or session died:
  the server released the lock) has its claimed work without an outcome
  offered again. Nothing of that work was reserved (a worker reserves an
  attempt with its outcome, in one transaction, as ``run`` does for a file
  run's collector), so it is released as the file ``run`` re-releases what a
  killed collector did not write: the same attempt, no retry spent (REC-3,
  REC-4); its rows, if its collector wrote any, stay in that worker's round
  files, adopted by its next start or refused by name, never recorded twice;
- once new outcomes landed, it releases what the decisions allow and nothing
  in flight (``replan``'s rule, REC-3), only what is not released already, and
  offers it;
- it stops as ``check`` answers (CLI-7): complete (exit 0), unfinished with
  nothing retryable (76); on a signal (75); or when no worker has been alive
  for ``wait`` seconds while work remains (75: start workers, or requeue).

A coordinator that starts while workers work (a requeued one) keeps their
claims: the work it offers anew in its own release carries over the claims of
the workers alive.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import msgspec

from ledger import ConcurrencyConflict, Ledger, WorkBoard, plural
from ledger.events import AttemptsReleased
from projections.decisions.plan import plan_keys
from projections.decisions.rules import decide_all
from projections.operations.keep import replay_kept
from projections.operations.publishing import publish
from projections.operations.resuming import resume
from projections.operations.run_loop import RunCheck, check_outcome

__all__ = ["CoordinatorReport", "Reaped", "coordinate", "replan_pass"]

#: Seconds between two looks at the run and its workers.
POLL_SECONDS = 1.0


class Reaped(msgspec.Struct, frozen=True):
    """A worker found dead, and how much of its claimed work was offered again."""

    worker: str
    host: str
    pid: int
    offered_again: int


class CoordinatorReport(msgspec.Struct):
    """What the coordinator did; the last one carries ``stop`` and ``exit_code``."""

    released: int = 0  # attempts and re-judgments offered to the workers
    reaped: list[Reaped] = msgspec.field(default_factory=list)
    check: RunCheck | None = None
    workers_seen: int = 0
    stop: str | None = None
    exit_code: int | None = None
    why: str | None = None


#: What the coordinator is told as it goes (a line of text each).
OnNote = Callable[[str], None]


def _reap(ledger: Ledger, board: WorkBoard) -> list[Reaped]:
    """Dead workers' claimed work without an outcome, offered again."""
    dead = board.dead()
    if not dead:
        return []
    known = {w.worker: w for w in board.workers()}
    index = ledger.write_index()
    reaped = []
    for name in dead:
        claims = board.claims(name)
        finished = {
            "dispatch": claims["dispatch"] & index.reserved,
            "rejudge": claims["rejudge"] & index.admitted_since_release,
        }
        unfinished = {kind: claims[kind] - finished[kind] for kind in claims}
        board.settle(name, finished=finished, unfinished=unfinished, state="gone")
        info = known.get(name)
        reaped.append(
            Reaped(
                name,
                "" if info is None else info.host,
                0 if info is None else info.pid,
                sum(len(keys) for keys in unfinished.values()),
            )
        )
    return reaped


def _offer(ledger: Ledger, board: WorkBoard) -> int:
    """Offer what is released and neither taken nor offered yet."""
    index = ledger.write_index()
    offered = board.offered()
    dispatch = index.released - index.reserved - offered["dispatch"]
    rejudge = index.released_rejudge - index.admitted_since_release - offered["rejudge"]
    if not dispatch and not rejudge:
        return 0
    live = [w.worker for w in board.workers() if w.alive]
    return board.offer(dispatch, rejudge, keep=live)


def _release_more(ledger: Ledger) -> tuple[int, int]:
    """REC-3: release what the decisions allow, never what is in flight or
    released; returns how many, and the seq the decisions were made as of."""
    state = replay_kept(ledger)
    keys = plan_keys(state, decide_all(state), skip_in_flight=True)
    index = ledger.write_index()
    dispatch = tuple(k for k in keys.dispatch if k not in index.released)
    rejudge = tuple(k for k in keys.rejudge if k not in index.released_rejudge)
    if dispatch or rejudge:
        ledger.append(
            AttemptsReleased(dispatch=dispatch, rejudge=rejudge), actor="coordinator"
        )
    return len(dispatch) + len(rejudge), state.as_of_seq


def replan_pass(ledger: Ledger, board: WorkBoard) -> tuple[int, int, int]:
    """One replan of the coordinator once outcomes arrived (SC-4): release what
    the decisions allow and offer it. Returns the attempts and re-judgments
    released, those offered, and the seq the decisions were made as of (an
    outcome appended after it is replanned by the next pass).

    ``ConcurrencyConflict``: a worker appended between its replay and its
    release; nothing was released, and the next pass tries again.
    """
    released, as_of = _release_more(ledger)
    return released, _offer(ledger, board), as_of


def coordinate(
    ledger: Ledger,
    config: Any,
    global_config: Any,
    *,
    interrupted: Callable[[], bool],
    wait: float,
    on_note: OnNote | None = None,
    poll: float = POLL_SECONDS,
    **options: Any,
) -> CoordinatorReport:
    """Coordinate the run until ``check`` says stop, a signal, or no workers.

    ``ledger`` is the run opened with its lock (a run on PostgreSQL);
    ``options`` are ``resume``'s. ``wait``: seconds without any live worker
    before it stops (exit 75) while work remains.
    """
    board = WorkBoard.of(ledger)
    report = CoordinatorReport()

    def note(text: str) -> None:
        if on_note is not None:
            on_note(text)

    def reap() -> None:
        for dead in _reap(ledger, board):
            report.reaped.append(dead)
            note(
                f"worker {dead.worker} (pid {dead.pid} on {dead.host}) is gone: its "
                f"session ended; {plural(dead.offered_again, 'claimed item')} "
                "without an outcome offered to the other workers again"
            )

    reap()
    found = resume(ledger, config, global_config, **options)
    counts = found.plan.counts
    offered = _offer(ledger, board)
    report.released += offered
    note(
        f"released {plural(counts.get('dispatch', 0), 'attempt')} to dispatch and "
        f"{plural(len(found.plan.rejudge), 're-judgment')} to the workers "
        f"({offered} offered anew)"
    )
    seen = found.state.as_of_seq  # what came after resume's replay: replanned
    check = check_outcome(ledger)
    lonely_since = time.monotonic()
    seen_workers: set[str] = set()
    while True:
        report.check = check
        if check.complete:
            report.stop, report.exit_code = "complete", 0
            break
        if check.exit_code == 76:
            report.stop, report.exit_code = "nothing_retryable", 76
            break
        if interrupted():
            report.stop, report.exit_code = "interrupted", 75
            break
        reap()
        live = [w for w in board.workers() if w.alive]
        for worker in live:
            if worker.worker not in seen_workers:
                seen_workers.add(worker.worker)
                note(
                    f"worker {worker.worker} joined (pid {worker.pid} on {worker.host})"
                )
        report.workers_seen = len(seen_workers)
        now = time.monotonic()
        if live:
            lonely_since = now
        elif now - lonely_since >= wait:
            report.stop, report.exit_code = "no_workers", 75
            report.why = (
                f"no worker was working on the run for {wait:g} seconds while work "
                "remains; start workers (rollout-ledger run URL --config ... "
                "--worker -- COMMAND), then run the coordinator again"
            )
            break
        head = ledger.head()[0]
        if head != seen:
            try:
                released, more, as_of = replan_pass(ledger, board)
            except ConcurrencyConflict:
                time.sleep(poll)  # a worker appended meanwhile: replay, try again
                continue
            report.released += more
            if released:
                note(
                    f"released {plural(released, 'more attempt')} as outcomes "
                    f"arrived ({more} offered)"
                )
            # What came after the replay is replanned next pass (its own
            # release, too: that pass then releases nothing and settles).
            seen = as_of
            check = check_outcome(ledger)
            continue
        time.sleep(poll)
    for _ in range(_PUBLISH_TRIES):
        try:
            publish(ledger, replay_kept(ledger))
            break
        except ConcurrencyConflict:  # a worker recorded its last rows meanwhile
            time.sleep(poll)
    return report


#: How often the coordinator's last publish is tried while workers still append.
_PUBLISH_TRIES = 20
