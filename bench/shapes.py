"""Collector files of a run without a ledger, in NeMo Gym 0.7.0's shapes or older ones.

Issue 15's case (``NG07``): the same plan (``bench.scenario``: outcomes per
rollout, the crash near the end) written twice as a collector leaves it, with
no ledger: once with 0.7.0's rows, templated from every run of
``../shared/fixtures/nemo-gym-0.7`` (results, masked results, sidecar failures
with ``_ng_failure_stage``, tau2/harbor placeholders, stirrup ids, terminal
stamps, multistage ``stage_index`` rows, ``_ng_environment_server`` on task
rows), and once with the older rows P-4's run is made of (the
``../shared/fixtures/nemo-gym`` pool, trimmed as the replay log's). Rows are
plain JSON written here (no ledger code), so the files stay what a collector
writes whatever the row rules become.
"""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import msgspec

from bench.rowpool import REPO_ROOT, RowPool
from bench.scenario import FAIL, KILLED, MASKED, TERMINAL, Plan

__all__ = [
    "FIXTURES_070_ENV",
    "Shapes",
    "Written",
    "fixtures_070_dir",
    "older_shapes",
    "shapes_070",
    "write_run",
]

FIXTURES_070_ENV = "ROLLOUT_LEDGER_NEMO_GYM_070_FIXTURES"
#: Keys a collector stamps per rollout and attempt; every template drops them.
_STAMPED = ("_ng_task_index", "_ng_rollout_index", "_ng_attempt_index", "_ng_run_id")
#: One rollout in this many is multistage, when the fixtures hold stage rows.
MULTISTAGE_EVERY = 20
#: The failure classes older rows cycle over (as P-4's run, bench/mirror.py).
_OLDER_CLASSES = ("agent_run_error", "timeout_exceeded", "judge_failed")

Row = dict[str, Any]


@dataclass(frozen=True)
class Shapes:
    """Row templates by what an attempt leaves, without their stamped keys."""

    inputs: tuple[Row, ...]  # materialized input rows
    results: tuple[Row, ...]  # main-file rows of a finished attempt
    masked: tuple[Row, ...]  # main-file rows with ``mask_sample``
    failures: tuple[Row, ...]  # sidecar rows, not terminal
    terminal: tuple[Row, ...]  # sidecar rows stamped terminal
    stages: tuple[tuple[Row, ...], ...]  # each a full multistage attempt
    source: str


def fixtures_070_dir() -> Path:
    """The NeMo Gym 0.7.0 runs (env override, else beside the repository)."""
    default = REPO_ROOT / ".." / "shared" / "fixtures" / "nemo-gym-0.7"
    return Path(os.environ.get(FIXTURES_070_ENV) or default).resolve()


def _rows(path: Path) -> Iterator[Row]:
    if not path.is_file():
        return
    for line in path.read_bytes().splitlines():
        try:
            row = msgspec.json.decode(line)
        except msgspec.DecodeError:
            continue  # torn and blank lines are not rows
        keyed = isinstance(row, dict) and all(k in row for k in _STAMPED[:2])
        # A row marked no-persist is one its collector never writes.
        if keyed and row.get("_ng_no_persist") is not True:
            yield row


def _template(row: Row) -> Row:
    return {k: v for k, v in row.items() if k not in _STAMPED}


def shapes_070(folder: Path | None = None) -> Shapes:
    """Every row shape of the 0.7.0 runs, sorted into what an attempt leaves.

    Raises:
        FileNotFoundError: the folder holds no 0.7.0 run.
    """
    folder = folder or fixtures_070_dir()
    runs = sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    inputs: list[Row] = []
    results: list[Row] = []
    masked: list[Row] = []
    failures: list[Row] = []
    terminal: list[Row] = []
    stages: dict[tuple[str, int, int], list[Row]] = {}
    for run in runs:
        inputs += [
            _template(r) for r in _rows(run / "rollouts_materialized_inputs.jsonl")
        ]
        for row in _rows(run / "rollouts.jsonl"):
            if "stage_index" in row:
                key = (run.name, row["_ng_task_index"], row["_ng_rollout_index"])
                stages.setdefault(key, []).append(_template(row))
            else:
                (masked if row.get("mask_sample") is True else results).append(
                    _template(row)
                )
        for row in _rows(run / "rollouts_failures.jsonl"):
            stamped = row.get("_ng_failure_terminal") is True
            (terminal if stamped else failures).append(_template(row))
    if not (inputs and results and failures):
        raise FileNotFoundError(f"no NeMo Gym 0.7.0 runs at {folder}")
    finished = tuple(
        tuple(group)
        for group in stages.values()
        if any(
            r.get("stage_index") == r.get("expected_final_stage_index") for r in group
        )
    )
    return Shapes(
        tuple(inputs),
        tuple(results),
        tuple(masked),
        tuple(failures),
        tuple(terminal),
        finished,
        f"{len(results) + len(masked) + len(failures) + len(terminal)} rows and "
        f"{len(finished)} multistage attempts of {len(runs)} runs in {folder.name}",
    )


def older_shapes(pool: RowPool) -> Shapes:
    """The older rows of P-4's run: failures and masks stamped on result rows."""
    results = pool.templates
    failures = tuple(
        t | {"_ng_failure_class": _OLDER_CLASSES[i % 3], "reward": 0.0}
        for i, t in enumerate(results)
    )
    return Shapes(
        inputs=tuple(pool.input_of(i) for i in range(len(results))),
        results=results,
        masked=tuple(t | {"mask_sample": True, "reward": 0.0} for t in results),
        failures=failures,
        terminal=tuple(t | {"_ng_failure_terminal": True} for t in failures),
        stages=(),
        source=pool.source,
    )


@dataclass(frozen=True)
class Written:
    """A run's collector files: OUT, and what went into them."""

    out: Path
    rollouts: int
    main_rows: int
    sidecar_rows: int
    bytes: int


class _Files:
    def __init__(self, out: Path) -> None:
        out.parent.mkdir(parents=True, exist_ok=True)
        stem = out.with_suffix("")
        self.paths = {
            "main": out,
            "sidecar": stem.with_name(f"{stem.name}_failures.jsonl"),
            "inputs": stem.with_name(f"{stem.name}_materialized_inputs.jsonl"),
        }
        self.handles: dict[str, IO[bytes]] = {}
        self.lines = dict.fromkeys(self.paths, 0)

    def write(self, name: str, row: Row) -> None:
        if name not in self.handles:
            self.handles[name] = open(self.paths[name], "wb")  # noqa: SIM115
        self.handles[name].write(msgspec.json.encode(row) + b"\n")
        self.lines[name] += 1

    def close(self) -> int:
        for handle in self.handles.values():
            handle.close()
        return sum(p.stat().st_size for p in self.paths.values() if p.exists())


def _attempt_rows(
    shapes: Shapes, rng: random.Random, outcome: str, multistage: bool
) -> tuple[str, list[Row]]:
    """The file an attempt's rows go to (as the collector routes them), and the rows."""
    if outcome == KILLED:
        return "main", []  # a killed attempt leaves no row
    if outcome == FAIL:
        return "sidecar", [rng.choice(shapes.failures)]
    if outcome == TERMINAL:
        return "sidecar", [rng.choice(shapes.terminal or shapes.failures)]
    if outcome == MASKED and shapes.masked:
        return "main", [rng.choice(shapes.masked)]
    if multistage and shapes.stages:
        return "main", list(rng.choice(shapes.stages))
    return "main", [rng.choice(shapes.results)]


def write_run(out: Path, plan: Plan, shapes: Shapes, *, seed: int) -> Written:
    """The files a collector without a ledger leaves for ``plan`` (cut at its crash).

    Rows are routed as a collector routes them: failures to the sidecar,
    anything else to ``OUT``; each stamped with its task, rollout and attempt.
    """
    rng = random.Random(seed)
    files = _Files(out)
    rollouts = len(plan.outcomes)
    for index in range(rollouts):
        task, rollout = plan.key(index)
        row = rng.choice(shapes.inputs)
        files.write(
            "inputs", row | {"_ng_task_index": task, "_ng_rollout_index": rollout}
        )
    recorded = 0
    for attempts in plan.hops():
        for item in attempts:
            if recorded >= plan.recorded:
                break
            recorded += 1
            task, rollout = plan.key(item.rollout)
            multistage = item.rollout % MULTISTAGE_EVERY == 0
            stamp = {
                "_ng_task_index": task,
                "_ng_rollout_index": rollout,
                "_ng_attempt_index": item.attempt,
            }
            name, rows = _attempt_rows(shapes, rng, item.outcome, multistage)
            for template in rows:
                files.write(name, template | stamp)
    size = files.close()
    return Written(out, rollouts, files.lines["main"], files.lines["sidecar"], size)
