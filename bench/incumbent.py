"""NeMo Gym 0.7.0's resume planning, re-implemented: the baseline that runs everywhere.

``nemo_gym/rollout_collection.py`` of the 0.7.0 wheel (``nemo_gym_0_7.md``,
section 1.1), steps 2 and 3 and the pre-dispatch counts, with its per-row
checks: the torn-tail check of OUT and of the sidecar (``_drop_truncated_tail``,
here read-only: a torn last line that does not parse is left out as 0.7.0
would cut it, a complete one is kept), then ``_load_from_cache``: every
materialized line must be JSON; OUT's blank lines are skipped and every other
row marks its key done, whatever it holds; the sidecar's blank lines and rows
missing an index are skipped, and each key counts its rows, is terminal when
any row is (``is_terminal_failure``), keeps ``reuse_cached_deliverable`` and
the longest ``observed_elapsed``; the cap is read from the environment; the
rows to run are the materialized rows not gated, stamped with the attempt
index and ``reuse_cached_deliverable``; with ``longest_first`` the rows with a
known duration go first. As shipped (``retain_results_in_memory=true``) every
result row is kept, with its bytes and its materialized row; lean (``false``)
keeps none. What 0.7.0 imports (16-70 s) is not imitated: the real one is
``bench/ng070.py``'s.

It parses with ``orjson`` as NeMo Gym does; without it, with msgspec's untyped
decoder, which is as fast. Only ``msgspec`` and the stdlib are imported here,
so the measuring child holds nothing of the ledger (its peak RSS is its own).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

__all__ = [
    "CAP_ENV",
    "PARSER",
    "IncumbentPlan",
    "dispatch_keys",
    "max_attempts",
    "plan_resume",
]


def _parser() -> tuple[Callable[[bytes], Any], str]:
    try:
        module = importlib.import_module("orjson")
    except ImportError:  # not a dependency of this project
        return msgspec.json.decode, "msgspec.json.decode (orjson is not installed)"
    return module.loads, "orjson.loads"


loads, PARSER = _parser()

TASK, ROLLOUT, ATTEMPT = "_ng_task_index", "_ng_rollout_index", "_ng_attempt_index"
TERMINAL, CLASS = "_ng_failure_terminal", "_ng_failure_class"
REUSE, ELAPSED = "reuse_cached_deliverable", "elapsed_seconds"
CAP_ENV = "NEMO_GYM_MAX_ROLLOUT_ATTEMPTS"
DEFAULT_CAP = 3
#: Environment faults ``retry_terminal_timeouts`` re-validates (is_terminal_failure).
_ENV_FAULTS = ("reference_missing", "eval_missing", "transport_ineligible")

Key = tuple[Any, Any]


@dataclass
class IncumbentPlan:
    """The rows to run (stamped) and, as shipped, the result rows 0.7.0 keeps."""

    to_run: list[dict[str, Any]]
    main_rows: list[dict[str, Any]]  # empty when lean
    matched: list[tuple[dict[str, Any], dict[str, Any]]]  # empty when lean
    gated: set[Key] = field(default_factory=set)
    per_agent: Counter[str] = field(default_factory=Counter)


def _stem_paths(out: Path) -> tuple[Path, Path]:
    materialized = out.with_name(f"{out.stem}_materialized_inputs.jsonl")
    return materialized, out.with_name(f"{out.stem}_failures.jsonl")


def max_attempts() -> int:
    """The cap, read from the environment at every resume (never saved)."""
    raw = os.environ.get(CAP_ENV, "")
    if not raw:
        return DEFAULT_CAP
    try:
        cap = int(raw)
    except ValueError:
        cap = 0
    if cap < 1:
        print(
            f"warning: {CAP_ENV}={raw!r} is not an integer >= 1; using 3",
            file=sys.stderr,
        )
        return DEFAULT_CAP
    return cap


def _kept_size(path: Path) -> int:
    """Bytes of ``path`` a resume reads: a torn last line that is not JSON is cut."""
    with path.open("rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return 0
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return size
        start, end = 0, size
        while end > 0:  # back in 1 MiB chunks, as 0.7.0 scans
            chunk = max(0, end - (1 << 20))
            handle.seek(chunk)
            newline = handle.read(end - chunk).rfind(b"\n")
            if newline >= 0:
                start = chunk + newline + 1
                break
            end = chunk
        handle.seek(start)
        try:
            loads(handle.read())
        except (ValueError, msgspec.DecodeError):
            return start
        return size


def _lines(path: Path, limit: int | None = None) -> Iterator[bytes]:
    left = limit
    with path.open("rb") as handle:
        for line in handle:
            if left is not None:
                if left <= 0:
                    return
                line = line[:left]
                left -= len(line)
            yield line


def read_materialized(path: Path) -> list[dict[str, Any]]:
    """Every materialized line must be JSON (a blank or torn line raises)."""
    return [loads(line) for line in _lines(path)]


def read_main(
    path: Path, *, retain: bool
) -> tuple[list[dict[str, Any]], list[bytes], set[Key]]:
    """OUT's rows: each marks its key done; as shipped, rows and bytes are kept."""
    rows: list[dict[str, Any]] = []
    strs: list[bytes] = []
    done: set[Key] = set()
    for line in _lines(path, _kept_size(path)):
        stripped = line.strip()
        if not stripped:
            continue
        row = loads(stripped)
        done.add((row[TASK], row[ROLLOUT]))  # no index: KeyError, as 0.7.0
        if retain:
            rows.append(row)
            strs.append(stripped)
    return rows, strs, done


def is_terminal(row: dict[str, Any], *, retry_terminal_timeouts: bool) -> bool:
    """``is_terminal_failure``: the stamp, unless the opt-in reopens the class."""
    if not retry_terminal_timeouts:
        return bool(row.get(TERMINAL))
    kind = row.get(CLASS)
    if kind == "timeout_exceeded" or kind in _ENV_FAULTS:
        return False
    return kind == "skipped" or bool(row.get(TERMINAL))


def _elapsed(row: dict[str, Any]) -> float | None:
    # observed_elapsed: the row's own seconds, else its response's metadata's.
    response = row.get("response") or {}
    metadata = response.get("metadata") if isinstance(response, dict) else None
    for candidate in (row.get(ELAPSED), (metadata or {}).get(ELAPSED)):
        try:
            if candidate is not None and float(candidate) > 0:
                return float(candidate)
        except (TypeError, ValueError):
            continue
    return None


@dataclass
class Sidecar:
    """What the sidecar tells a resume, per key."""

    counts: Counter[Key] = field(default_factory=Counter)
    terminal: set[Key] = field(default_factory=set)
    reuse: set[Key] = field(default_factory=set)
    elapsed: dict[Key, float] = field(default_factory=dict)


def read_sidecar(path: Path, *, retry_terminal_timeouts: bool = False) -> Sidecar:
    """Sidecar rows per key; blank lines and rows missing an index are skipped."""
    seen = Sidecar()
    if not path.exists():
        return seen
    for line in _lines(path, _kept_size(path)):
        stripped = line.strip()
        if not stripped:
            continue
        row = loads(stripped)
        if TASK not in row or ROLLOUT not in row:
            continue
        key = (row[TASK], row[ROLLOUT])
        seen.counts[key] += 1
        if is_terminal(row, retry_terminal_timeouts=retry_terminal_timeouts):
            seen.terminal.add(key)
        if row.get(REUSE):
            seen.reuse.add(key)
        elapsed = _elapsed(row)
        if elapsed is not None:
            seen.elapsed[key] = max(seen.elapsed.get(key, 0.0), elapsed)
    return seen


def _rows_to_run(
    materialized: list[dict[str, Any]], gated: set[Key], seen: Sidecar
) -> list[dict[str, Any]]:
    # Materialized order; the attempt index is the key's sidecar count.
    to_run = []
    for row in materialized:
        key = (row[TASK], row[ROLLOUT])
        if key in gated:
            continue
        if seen.counts.get(key, 0) > 0:
            row[ATTEMPT] = seen.counts[key]
        if key in seen.reuse:
            row[REUSE] = True
        to_run.append(row)
    return to_run


def _longest_first(rows: list[dict[str, Any]], seen: Sidecar) -> list[dict[str, Any]]:
    known = [r for r in rows if (r[TASK], r[ROLLOUT]) in seen.elapsed]
    unknown = [r for r in rows if (r[TASK], r[ROLLOUT]) not in seen.elapsed]
    known.sort(key=lambda r: seen.elapsed[r[TASK], r[ROLLOUT]], reverse=True)
    return known + unknown


def _agent(row: dict[str, Any]) -> str:
    ref = row.get("agent_ref")
    return str(ref.get("name")) if isinstance(ref, dict) else ""


def plan_resume(
    out: Path,
    *,
    retain: bool = True,
    retry_terminal_timeouts: bool = False,
    longest_first: bool = False,
) -> IncumbentPlan | None:
    """0.7.0's resume of the run whose results file is ``out``; ``None``: fresh.

    ``retain`` is ``retain_results_in_memory`` (``True`` as shipped).
    """
    materialized_path, sidecar = _stem_paths(out)
    if not (materialized_path.exists() and out.exists()):
        return None  # re-materialize and start over
    materialized = read_materialized(materialized_path)
    main_rows, _strs, done = read_main(out, retain=retain)
    seen = read_sidecar(sidecar, retry_terminal_timeouts=retry_terminal_timeouts)
    cap = max_attempts()
    capped = {key for key, n in seen.counts.items() if n >= cap}
    gated = done | seen.terminal | capped
    to_run = _rows_to_run(materialized, gated, seen)
    if longest_first and seen.elapsed:
        to_run = _longest_first(to_run, seen)
    matched = []
    if retain:
        by_key = {(row[TASK], row[ROLLOUT]): row for row in materialized}
        # A result row whose key is not materialized raises (KeyError).
        matched = [(row, by_key[row[TASK], row[ROLLOUT]]) for row in main_rows]
    per_agent = Counter(_agent(row) for row in to_run)  # counts_left per agent
    return IncumbentPlan(to_run, main_rows, matched, gated, per_agent)


def dispatch_keys(plan: IncumbentPlan) -> list[tuple[int, int, int]]:
    """``(task, rollout, attempt)`` of every row to run, in dispatch order."""
    return [(r[TASK], r[ROLLOUT], r.get(ATTEMPT, 0)) for r in plan.to_run]
