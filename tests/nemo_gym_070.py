"""Helpers of the NeMo Gym 0.7.0 row-shape tests: a fixture run, imported.

Each fixture run (``../shared/fixtures/nemo-gym-0.7/<run>/``) holds task 0
with rollout 1 a plain success and rollout 0 the shape under test. A test
copies the run to its temporary folder (optionally editing rollout 0's row
first), imports it through the public API and decides through ``decide``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from cli import main
from ledger import Clock, Ledger, open_run
from projections import (
    Decision,
    Plan,
    decide,
    import_run,
    replan,
    replay,
    set_policy,
)
from tests.prerequisites import unavailable

FIXTURES_070 = Path(__file__).resolve().parents[2] / "shared" / "fixtures"
FIXTURES_070 /= "nemo-gym-0.7"
if not (FIXTURES_070 / "a01_tau2_agent_error").is_dir():
    unavailable(f"no NeMo Gym 0.7.0 fixture runs at {FIXTURES_070}")

ACTOR = "operator:tester"
SIDECAR = "rollouts_failures.jsonl"
OUT = "rollouts.jsonl"
Row = dict[str, Any]


def runs() -> list[str]:
    """Every fixture run's name, sorted."""
    return sorted(p.name for p in FIXTURES_070.iterdir() if p.is_dir())


def run_named(prefix: str) -> str:
    """The fixture run whose name starts with ``prefix`` (``"a06"``)."""
    (name,) = (name for name in runs() if name.startswith(f"{prefix}_"))
    return name


def copy_fixture(prefix: str, folder: Path) -> Path:
    """A copy of the fixture run in ``folder``; returns its OUT."""
    target = folder / run_named(prefix)
    shutil.copytree(FIXTURES_070 / run_named(prefix), target)
    return target / OUT


def edit_rollout_0(out: Path, file: str, edit: Callable[[Row], Row]) -> None:
    """Rewrite rollout 0's row of ``file`` beside ``out`` with ``edit``."""
    path = out.with_name(file)
    rows = [json.loads(line) for line in path.read_text().splitlines() if line]
    rows = [edit(row) if row["_ng_rollout_index"] == 0 else row for row in rows]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def imported(
    prefix: str, folder: Path, *, edit: Callable[[Row], Row] | None = None
) -> Path:
    """The fixture run, rollout 0's sidecar row edited, imported; returns OUT."""
    out = copy_fixture(prefix, folder)
    if edit is not None:
        edit_rollout_0(out, SIDECAR, edit)
    import_run(out, clock=Clock(seed=1))
    return out


def decision(out: Path, rollout: int = 0) -> Decision:
    """``decide`` on task 0's ``rollout`` of the run at ``out``."""
    with Ledger.open(out) as reader:
        return decide(replay(reader), 0, rollout)


def change_policy(out: Path, settings: Mapping[str, Any]) -> None:
    """One ``policy`` change through the public API."""
    with open_run(out, write=True, clock=Clock(seed=2)) as led:
        set_policy(led, settings, reason="test", actor=ACTOR)


def released_plan(out: Path) -> Plan:
    """What the run's decisions release, as a collector's API plan."""
    with open_run(out, write=True, clock=Clock(seed=3)) as led:
        return replan(led)


def cli(*args: Any) -> Result:
    """``rollout-ledger ARGS`` in process; errors raise (no traceback)."""
    return CliRunner().invoke(
        main,
        [str(arg) for arg in args],
        obj={"clock": Clock(seed=4), "actor": ACTOR},
        catch_exceptions=False,
    )
