"""The published files as the log projects them (events.md): bytes, not writes.

``manifest.json`` and ``identity.json`` (ID-32), ``coverage.json`` (REC-41, with
its ``as_of_seq``), ``resume_drift.log`` (REC-53) and ``failure_budget.log``
(REC-17), each a pure rendering of a ``RunState``; ``verify`` compares them and
``status --publish --dry-run`` names the stale ones. Writing them is an
operation's (``projections.operations.publishing``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ledger import Ledger
from ledger.files import canonical_json
from projections.decisions.completion import Coverage, coverage
from projections.decisions.rules import Decision
from projections.fold.state import RunState

__all__ = ["budget_log", "drift_log", "rendered_files", "stale_files"]


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
