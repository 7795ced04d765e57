"""The incumbent's resume planning, re-implemented for P-4's baseline.

NeMo Gym's August resume (``nemo_gym_formats.md``, section 4, steps 2-9): parse
the materialized, results and sidecar JSONL files line by line, count sidecar
rows per key, gate done, terminal and capped keys, and keep the rows to run
plus every result row (the incumbent aggregates over them at the end, step 14).
It parses with ``orjson`` as NeMo Gym does; without it, with msgspec's untyped
decoder, which is as fast. Only ``msgspec`` and the stdlib are imported here,
so the measuring child holds nothing of the ledger (its peak RSS is its own).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

__all__ = ["CAP_ENV", "PARSER", "IncumbentPlan", "max_attempts", "plan_resume"]


def _parser() -> tuple[Callable[[bytes], Any], str]:
    try:
        module = importlib.import_module("orjson")
    except ImportError:  # not a dependency of this project
        return msgspec.json.decode, "msgspec.json.decode (orjson is not installed)"
    return module.loads, "orjson.loads"


loads, PARSER = _parser()

TASK, ROLLOUT, ATTEMPT = "_ng_task_index", "_ng_rollout_index", "_ng_attempt_index"
TERMINAL = "_ng_failure_terminal"
CAP_ENV = "NEMO_GYM_MAX_ROLLOUT_ATTEMPTS"
DEFAULT_CAP = 3

Key = tuple[Any, Any]


@dataclass
class IncumbentPlan:
    """The rows to run (stamped) and the result rows the incumbent keeps."""

    to_run: list[dict[str, Any]]
    main_rows: list[dict[str, Any]]
    matched: list[tuple[dict[str, Any], dict[str, Any]]]
    gated: set[Key] = field(default_factory=set)


def _stem_paths(out: Path) -> tuple[Path, Path]:
    materialized = out.with_name(f"{out.stem}_materialized_inputs.jsonl")
    return materialized, out.with_name(f"{out.stem}_failures.jsonl")


def max_attempts() -> int:
    """Step 6: the cap, read from the environment at resume time."""
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


def _lines(path: Path) -> Iterator[bytes]:
    with path.open("rb") as handle:
        yield from handle


def read_materialized(path: Path) -> list[dict[str, Any]]:
    """Step 3: every line must be JSON (a blank or torn line crashes)."""
    return [loads(line) for line in _lines(path)]


def read_main(path: Path) -> tuple[list[dict[str, Any]], set[Key]]:
    """Step 4: every result row counts its key as done, whatever it holds."""
    rows = [loads(line) for line in _lines(path)]
    return rows, {(row[TASK], row[ROLLOUT]) for row in rows}


def count_sidecar(path: Path) -> tuple[dict[Key, int], set[Key]]:
    """Step 5: sidecar rows per key, and keys with a truthy terminal flag (HEAD)."""
    counts: dict[Key, int] = {}
    terminal: set[Key] = set()
    if not path.exists():
        return counts, terminal
    for line in _lines(path):
        if not line.strip():
            continue
        row = loads(line)
        if TASK not in row or ROLLOUT not in row:
            continue
        key = (row[TASK], row[ROLLOUT])
        counts[key] = counts.get(key, 0) + 1
        if row.get(TERMINAL):
            terminal.add(key)
    return counts, terminal


def _rows_to_run(
    materialized: list[dict[str, Any]], gated: set[Key], counts: dict[Key, int]
) -> list[dict[str, Any]]:
    # Steps 7 and 8: materialized order; the attempt index is the sidecar count.
    to_run = []
    for row in materialized:
        key = (row[TASK], row[ROLLOUT])
        if key in gated:
            continue
        if counts.get(key, 0) > 0:
            row[ATTEMPT] = counts[key]
        to_run.append(row)
    return to_run


def plan_resume(out: Path) -> IncumbentPlan | None:
    """Steps 2-9 on the run whose results file is ``out``; ``None``: start fresh."""
    materialized_path, sidecar = _stem_paths(out)
    if not (materialized_path.exists() and out.exists()):
        return None  # step 2: re-materialize and start over
    materialized = read_materialized(materialized_path)
    main_rows, done = read_main(out)
    counts, terminal = count_sidecar(sidecar)
    cap = max_attempts()
    gated = done | terminal | {key for key, n in counts.items() if n >= cap}
    to_run = _rows_to_run(materialized, gated, counts)
    by_key = {(row[TASK], row[ROLLOUT]): row for row in materialized}
    # Step 9: a result row whose key is not materialized crashes (KeyError).
    matched = [(row, by_key[row[TASK], row[ROLLOUT]]) for row in main_rows]
    return IncumbentPlan(to_run, main_rows, matched, gated)
