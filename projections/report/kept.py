"""The report's model, kept for the next report of the same log (issue 30).

A report is a pure function of the log and the files it reads (R-3): the
same head, the same collector files, the same code give the same page. So the
report keeps what it computed (every value of ``report_context`` but the
integrity verdict) beside the log, ``report_model.msgpack`` in the ledger
folder, keyed by

- the log's seq and head hash (a reader checks the head as it opens),
- the code that folds, decides and sums (every module of ``projections`` and
  ``ledger``: a new version never reuses an old page's values),
- each file the page reads besides the log (``OUT``, the sidecar, the
  materialized inputs, the manifest, the noted commands) by device, inode,
  size and change times, and the name the run was given (its commands
  print it).

A report of a log that did not move since then reads the kept values instead of
replaying the run: only its integrity is checked afresh (what came after the
last verify, or everything). Anything else (one more event, a file touched,
a newer version) computes the page whole and keeps it again, once its
files were last written two seconds or more before it looked at them. A run in
PostgreSQL keeps nothing (its rows are in the store), and a folder that cannot
be written costs only the keeping. The kept file carries its own digest: a
damaged one is computed again, never trusted.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from functools import cache
from pathlib import Path
from typing import Any

import msgspec

from ledger import Ledger, LedgerError, atomic_replace
from ledger.collector_files.rows_seen import RACY_NS, file_shape
from ledger.events import StoredEvent
from ledger.store.decode import decode_row
from projections.decisions.rules import decide_all
from projections.figures.metrics import reward_metrics
from projections.fold.reading import replay
from projections.report.context import report_context, report_verdict
from projections.views.checks import Verification, verify_run
from projections.views.next_steps import COMMANDS_FILE
from projections.views.proof import integrity, last_proof_words

__all__ = ["KEPT_REPORT", "ReportModel", "report_model"]

#: The kept model's file in the ledger folder.
KEPT_REPORT = "report_model.msgpack"
_ENCODER = msgspec.msgpack.Encoder()

#: What a step of the work is shown as (a spinner's context), given its words.
Step = Callable[[str], AbstractContextManager[Any]]


class ReportModel(msgspec.Struct, frozen=True, kw_only=True):
    """Everything the report page shows, and how it was come by."""

    #: ``report_context``'s values, the integrity verdict (``verify``) with them.
    context: dict[str, Any]
    #: The rollouts the run expects.
    rollouts: int
    #: Read from the model kept by an earlier report of the same log, not
    #: replayed.
    kept: bool = False


class _Kept(msgspec.Struct, frozen=True, kw_only=True):
    key: str
    rollouts: int
    context: bytes  # msgpack of the context without its verdict
    sha256: str  # of ``context``


def _no_step(_words: str) -> AbstractContextManager[Any]:
    return nullcontext()


def report_model(
    ledger: Ledger, *, out: str, verify: bool = True, step: Step = _no_step
) -> ReportModel:
    """The report page's values for the run ``ledger`` opened at ``out``.

    With ``verify``, what came after the last verify's proof is checked, or,
    with no proof, every check of ``verify``; without it nothing is checked
    and the last proof is said in words. A log that has not moved since an
    earlier report reads that report's kept values (see the module).
    """
    key, settled = _key(ledger, out)
    verification: Verification | None = None
    if verify:
        with step("checking what came after the last verify"):
            verification, _ = integrity(ledger, out=out)
        if verification is None:
            with step("verifying"):
                verification = verify_run(ledger)
    sound = verification is None or not verification.findings
    proof = last_proof_words(ledger, out=out)
    seq, head = ledger.head()
    kept = _read(ledger, key) if sound and key is not None else None
    if kept is not None:
        context, rollouts = kept
        context["verify"] = report_verdict(verification, seq, head.hex(), proof)
        return ReportModel(context=context, rollouts=rollouts, kept=True)
    with step("reading the run"):
        state = replay(ledger)
        decisions = decide_all(state)
    with step("writing the report"):
        metrics = reward_metrics(ledger, state, decisions=decisions)
        context = report_context(
            state,
            functools.partial(_listed_events, ledger),
            decisions,
            out=out,
            verification=verification,
            metrics=metrics.to_dict(),
            ledger=ledger,
            proof=proof,
        )
    if sound and key is not None and settled and state.as_of_seq == seq:
        _keep(ledger, key, context, state.expected)
    return ReportModel(context=context, rollouts=state.expected)


class _Keyed(msgspec.Struct):
    task: int
    rollout: int


_KEYED = msgspec.json.Decoder(_Keyed)
#: Events the report's trails read only for a rollout given a trail: the
#: bulk of a large log (a reservation and an outcome per attempt).
_PER_ROLLOUT = frozenset({"result_saved", "attempt_reserved"})


def _listed_events(ledger: Ledger, keys: set[tuple[int, int]]) -> Iterator[StoredEvent]:
    """Every event, but a result or a reservation of a rollout not in ``keys``
    left undecoded (issue 30: the trails take nothing from it). The log's last
    event is always given (the page says when the run last moved)."""
    where = ledger.where
    last = None
    for row in ledger.raw_events(1):
        if row.kind in _PER_ROLLOUT:
            try:
                found = _KEYED.decode(row.body)
            except msgspec.DecodeError:  # decoded whole, for the error that names it
                found = None
            if found is not None and (found.task, found.rollout) not in keys:
                last = row
                continue
        last = None
        yield decode_row(row, path=where)
    if last is not None:
        yield decode_row(last, path=where)


def _key(ledger: Ledger, out: str) -> tuple[str | None, bool]:
    """What the kept model must have been made of, as one digest (``None``
    for a run in a store: nothing is kept), and whether its files were last
    written long enough ago to be kept under it (``RACY_NS``: a write in the
    same clock tick as this look could keep their times)."""
    if ledger.folder is None:
        return None, False
    now = time.time_ns()
    paths = ledger.paths
    looked = [
        file_shape(p)
        for p in (
            paths.out,
            paths.sidecar,
            paths.materialized,
            paths.manifest,
            paths.ledger_dir / COMMANDS_FILE,
        )
    ]
    seq, head = ledger.head()
    what = [1, seq, head.hex(), _code(), out, looked]
    newest = max((max(s[3], s[4]) for s in looked if s is not None), default=0)
    digest = hashlib.sha256(msgspec.json.encode(what)).hexdigest()
    return digest, newest + RACY_NS <= now


@cache
def _code() -> str:
    """The digest of the code a page's values come from."""
    digest = hashlib.sha256()
    for package in ("projections", "ledger"):
        root = Path(__file__).resolve().parents[2] / package
        for source in sorted(root.rglob("*.py")):
            digest.update(source.relative_to(root).as_posix().encode())
            digest.update(source.read_bytes())
    return digest.hexdigest()


def _place(ledger: Ledger) -> Path:
    return ledger.paths.ledger_dir / KEPT_REPORT


def _read(ledger: Ledger, key: str) -> tuple[dict[str, Any], int] | None:
    try:
        kept = msgspec.msgpack.decode(_place(ledger).read_bytes(), type=_Kept)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None
    if kept.key != key or hashlib.sha256(kept.context).hexdigest() != kept.sha256:
        return None
    try:
        context = msgspec.msgpack.decode(kept.context, type=dict[str, Any])
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
    return context, kept.rollouts


def _keep(ledger: Ledger, key: str, context: dict[str, Any], rollouts: int) -> None:
    values = {name: value for name, value in context.items() if name != "verify"}
    try:
        encoded = _ENCODER.encode(values)
    except (TypeError, OverflowError):  # a value msgpack cannot hold: keep nothing
        return
    digest = hashlib.sha256(encoded).hexdigest()
    kept = _Kept(key=key, rollouts=rollouts, context=encoded, sha256=digest)
    with contextlib.suppress(LedgerError):  # a note only: the next report computes
        atomic_replace(_place(ledger), _ENCODER.encode(kept))
