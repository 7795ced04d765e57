"""The published files, rewritten whole and atomically from the log (events.md).

``manifest.json`` and ``identity.json`` (ID-32), ``coverage.json`` (REC-41, with
its ``as_of_seq``), ``resume_drift.log`` (REC-53) and ``failure_budget.log``
(REC-17). Each is a pure rendering of a ``RunState``; ``publish`` writes them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ledger import Ledger, Refused, RunLock
from ledger.files import canonical_json
from projections.coverage import Coverage, coverage
from projections.decide import Decision
from projections.state import RunState

__all__ = ["publish", "rendered_files", "stale_files"]


def _clean(text: str) -> str:
    # One line per entry: a reason never breaks the log's format.
    return " ".join(text.split())


def drift_log(state: RunState) -> bytes:
    """REC-53: ``<UTC time>\\t<from>\\t<to>\\t<keys>`` per resume across drift."""
    lines = [
        f"{d.at}\t{d.from_digest}\t{d.to_digest}\t{','.join(d.keys)}\n"
        for d in state.drift
    ]
    return "".join(lines).encode()


def budget_log(state: RunState) -> bytes:
    """REC-17: ``<excluded_lines>\\t<before_seq>\\t<UTC time>\\t<reason>`` per reset."""
    lines = [
        f"{r.excluded_lines}\t{r.before_seq}\t{r.at}\t{_clean(r.reason)}\n"
        for r in state.budget_resets
    ]
    return "".join(lines).encode()


def rendered_files(
    state: RunState,
    decisions: Mapping[tuple[int, int], Decision] | None = None,
    *,
    cover: Coverage | None = None,
) -> dict[str, bytes | None]:
    """Every published file's bytes as the state projects them (``None``: absent).

    ``cover``: the state's coverage when the caller has it already.
    """
    identity: Any = state.identity
    cover = coverage(state, decisions) if cover is None else cover
    return {
        "identity.json": None if identity is None else canonical_json(identity),
        "manifest.json": canonical_json(state.manifest),
        "coverage.json": canonical_json(cover.to_dict()),
        "resume_drift.log": drift_log(state),
        "failure_budget.log": budget_log(state),
    }


def publish(
    ledger: Ledger,
    state: RunState,
    decisions: Mapping[tuple[int, int], Decision] | None = None,
    *,
    lock: RunLock | None = None,
    cover: Coverage | None = None,
) -> None:
    """Rewrite the published files from ``state`` (a writer's job, never a reader's).

    ``lock`` lets a caller that holds the run lock publish through a reader
    ledger (an import must not run a writer's EV-12 repair, REC-70); ``cover``
    is the state's coverage when the caller has it already.
    """
    held = lock is not None and lock.held and lock.target == ledger.target
    if not ledger.writable and not held:
        raise Refused("publishing needs the run lock; a reader never writes")
    # ID-32: the identity first, so a crash between the two leaves a pair whose
    # digests disagree, which ID-33 ignores.
    # The JSON files are canonical_json, the bytes publish_json writes (EV-31).
    for name, data in rendered_files(state, decisions, cover=cover).items():
        if data is not None:
            ledger.files.publish(name, data)


def stale_files(
    ledger: Ledger,
    state: RunState,
    decisions: Mapping[tuple[int, int], Decision] | None = None,
) -> tuple[str, ...]:
    """The published files ``publish`` would change: missing or other bytes.

    A reader's question (``status --publish --dry-run``): nothing is written.
    """
    return tuple(
        name
        for name, data in rendered_files(state, decisions).items()
        if data is not None and ledger.files.read_published(name) != data
    )
