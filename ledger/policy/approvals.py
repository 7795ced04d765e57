"""Approval files (REC-26): one ``{"task", "rollout", "attempt"}`` or ``T R A`` a line.

Blank lines and ``#`` comments are ignored. A line that cannot be read approves
nothing and is reported with its number: by default a saved answer is never
sampled again.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

import msgspec

from ledger.bounds import MAX_ATTEMPT_INDEX, MAX_INDEX, out_of_bounds
from ledger.errors import ConfigError
from ledger.files import json_problem, read_regular

__all__ = ["Approval", "ApprovalProblem", "parse_approvals", "read_approvals"]

#: Approval files are read as data with a size limit (quality.md, "Security").
MAX_APPROVAL_BYTES = 64 * 1024 * 1024


class Approval(NamedTuple):
    """One approved attempt and the line it came from."""

    task: int
    rollout: int
    attempt: int
    line: int


class ApprovalProblem(NamedTuple):
    """A line that approves nothing, and why."""

    line: int
    reason: str


#: What a line that names numbers out of bounds is told.
_BOUNDS = (
    f"task and rollout must be integers from 0 to {MAX_INDEX}, "
    f"and attempt from 0 to {MAX_ATTEMPT_INDEX}"
)


def _out_of_bounds(values: list[object]) -> bool:
    task, rollout, attempt = values
    return (
        out_of_bounds(task, 0, MAX_INDEX)
        or out_of_bounds(rollout, 0, MAX_INDEX)
        or out_of_bounds(attempt, 0, MAX_ATTEMPT_INDEX)
    )


def _parse_line(text: str) -> tuple[int, int, int] | str:
    if text.startswith("{"):
        try:
            entry = msgspec.json.decode(text)
        except (msgspec.DecodeError, RecursionError) as exc:
            return f"not JSON ({json_problem(exc)})"
        if not isinstance(entry, dict) or set(entry) != {"task", "rollout", "attempt"}:
            return 'expected {"task": T, "rollout": R, "attempt": A}'
        values: list[object] = [entry[name] for name in ("task", "rollout", "attempt")]
    else:
        words = text.split()
        if len(words) != 3 or not all(w.isascii() and w.isdigit() for w in words):
            return "expected three non-negative integers: TASK ROLLOUT ATTEMPT"
        if any(len(w) > 20 for w in words):  # longer than any 64-bit integer
            return f"{_BOUNDS}; got {' '.join(w[:24] for w in words)}"
        values = [int(w) for w in words]
    if _out_of_bounds(values):
        return f"{_BOUNDS}; got {' '.join(repr(v)[:24] for v in values)}"
    task, rollout, attempt = (int(v) for v in values)  # type: ignore[call-overload]
    return task, rollout, attempt


def parse_approvals(
    lines: Iterable[str],
) -> tuple[list[Approval], list[ApprovalProblem]]:
    """The approvals a file's lines name, and the lines that approve nothing."""
    approvals, problems = [], []
    for number, raw in enumerate(lines, start=1):
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        parsed = _parse_line(text)
        if isinstance(parsed, str):
            problems.append(ApprovalProblem(number, parsed))
        else:
            approvals.append(Approval(*parsed, number))
    return approvals, problems


def read_approvals(path: Path | str) -> tuple[list[Approval], list[ApprovalProblem]]:
    """Read an approvals file (REC-26); an unreadable or huge one is ``ConfigError``."""
    target = Path(path)
    try:
        size = target.stat().st_size
        if size > MAX_APPROVAL_BYTES:
            raise ConfigError(
                f"{target} is {size} bytes, over the approval file limit", path=target
            )
        text = read_regular(target, given=True).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"cannot read the approvals file {target}: {exc}", path=target
        ) from exc
    return parse_approvals(text.splitlines())
