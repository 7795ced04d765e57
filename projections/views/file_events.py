"""History's words for rows and repaired tails, each located by file and line.

A person reads where a row is as ``rollouts.jsonl line 12``, never as a byte
offset (issue 16): ``row_text`` names an outcome's row and a repaired tail
through :class:`RowLines`.
"""

from __future__ import annotations

from collections.abc import Callable

from ledger import events as ev
from ledger import plural
from projections.views.row_lines import RowLines

__all__ = ["row_text", "score_text"]


def score_text(value: float | None) -> str:
    """A reward as history prints it (``none`` when there is none)."""
    return "none" if value is None else f"{value:g}"


def _outcome(body: ev.ResultSaved | ev.FailureSaved, lines: RowLines) -> str:
    # A row is named by its file and line, never by its byte offset.
    facts, file = body.facts, body.location.file
    stage = _stage(body)
    if isinstance(body, ev.ResultSaved):
        masked = ", masked" if facts.masked else ""
        where = lines.where(file, body.location.offset)
        return f"result{stage}, reward {score_text(facts.reward)}{masked} ({where})"
    kind = facts.selected_kind or "unclassified"
    terminal = ", terminal" if facts.terminal else ""
    return f"failure {kind}{stage}{terminal} ({file} line {body.sidecar_line + 1})"


def _stage(body: ev.ResultSaved | ev.FailureSaved) -> str:
    # ROW-64: a multistage row names its stage and its rollout's final stage.
    if body.stage_index is None:
        return ""
    return f" at stage {body.stage_index} of {body.final_stage_index}"


def _cut_text(b: ev.TailRepaired, where: str) -> str:
    kind = "blank" if b.saved_as.rpartition("/")[2].startswith("blank-") else "torn"
    return (
        f"{kind} tail of {where} cut ({plural(b.length, 'byte')}, saved "
        f"as {b.saved_as})"
    )


#: REC-83: a kept last row's newline, appended or found.
_TAIL_TEXT: dict[str, Callable[[ev.TailRepaired, str], str]] = {
    ev.NEWLINE_APPENDED: lambda b, where: (
        f"newline appended to the last row, at the end of {where} "
        "(a complete row; kept)"
    ),
    ev.NEWLINE_RECORDED: lambda b, where: (
        f"newline another writer appended to the last row, at the end of {where}, "
        "recorded"
    ),
}


def row_text(
    body: ev.ResultSaved | ev.FailureSaved | ev.TailRepaired, lines: RowLines
) -> str:
    """An outcome's row, or a repaired tail, in words with its file and line."""
    if isinstance(body, ev.TailRepaired):
        where = lines.where(body.file, body.offset)
        return _TAIL_TEXT.get(body.action, _cut_text)(body, where)
    return _outcome(body, lines)
