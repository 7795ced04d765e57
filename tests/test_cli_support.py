"""Shared helpers of the CLI tests: a run made through the command line.

A :class:`CliRun` writes a NeMo Gym shaped configuration (``nemo_configuration``
of ``tests/test_identity.py``) to YAML, creates the run with ``create`` and
drives it as a plan-file collector would: ``resume --plan-out``, outcome rows
built from the plan, ``record``. Every invocation uses a seeded clock and a
fixed operator, so outputs are exact.
"""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from omegaconf import OmegaConf

from cli import main
from ledger import Clock
from tests.test_identity import nemo_configuration

Row = dict[str, Any]
Outcome = Callable[[Row], Row | None]

ACTOR = "operator:tester"
#: A Responses-API answer (ROW-2).
ANSWER: Mapping[str, Any] = {
    "id": "resp-1",
    "object": "response",
    "status": "completed",
    "output": [
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "42"}],
        }
    ],
}


def graded(reward: float = 1.0) -> Row:
    """A result row's outcome fields (REC-20.4e)."""
    return {"reward": reward, "response": copy.deepcopy(dict(ANSWER))}


def failed(kind: str, *, answer: bool = False, terminal: bool = False) -> Row:
    """A failure row's outcome fields, as an older collector writes them."""
    row: Row = {"_ng_failure_class": kind, "_ng_failure_message": f"{kind} here"}
    if answer:
        row["response"] = copy.deepcopy(dict(ANSWER))
    if terminal:
        row["_ng_failure_terminal"] = True
    return row


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    """``rows`` as JSON Lines at ``path``."""
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[Any]:
    """The JSON Lines at ``path``."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


class CliRun:
    """One run in ``folder``, created and driven through the command line."""

    def __init__(self, folder: Path, *, tasks: int = 3, rollouts: int = 2) -> None:
        self.folder = folder
        self.clock = Clock(seed=11)
        config, servers, rows = nemo_configuration()
        self.config_data, self.servers_data = config, servers
        self.config = self.write_config("collection.yaml", config)
        self.servers = self.write_config("servers.yaml", servers)
        self.inputs = write_jsonl(
            folder / "rows.jsonl",
            [
                {k: v for k, v in row.items() if k != "agent_ref"}
                for row in _rows(rows, tasks, rollouts)
            ],
        )
        self.out = folder / "results" / "rollouts.jsonl"
        self.plans = 0

    def write_config(self, name: str, data: Mapping[str, Any]) -> Path:
        path = self.folder / name
        OmegaConf.save(OmegaConf.create(dict(data)), path)
        return path

    @property
    def ledger_dir(self) -> Path:
        return self.out.parent / "rollouts_ledger"

    def invoke(self, *args: Any, input: str | None = None) -> Result:
        """``rollout-ledger ARGS`` in process, seeded; errors raise (no traceback)."""
        runner = CliRunner()
        return runner.invoke(
            main,
            [str(arg) for arg in args],
            obj={"clock": self.clock, "actor": ACTOR},
            catch_exceptions=False,
            input=input,
        )

    def ok(self, *args: Any) -> Result:
        """Invoke and require exit 0."""
        result = self.invoke(*args)
        assert result.exit_code == 0, (result.stdout, result.stderr)
        return result

    def config_args(self) -> list[Any]:
        return ["--config", self.config, "--global-config", self.servers]

    def create(self, *extra: Any) -> Result:
        return self.ok(
            "create", self.out, "--inputs", self.inputs, *self.config_args(), *extra
        )

    def resume(self, *extra: Any) -> tuple[Result, list[Row]]:
        """``resume --plan-out``; the plan file's lines."""
        self.plans += 1
        plan = self.folder / f"plan{self.plans}.jsonl"
        result = self.ok(
            "resume", self.out, *self.config_args(), "--plan-out", plan, *extra
        )
        return result, read_jsonl(plan)

    def record(self, rows: list[Row]) -> Result:
        return self.ok("record", self.out, write_jsonl(self.folder / "out.jsonl", rows))

    def collect(self, outcome: Outcome) -> list[Row]:
        """One resume, and ``outcome(row)`` recorded for each dispatch row."""
        _, plan = self.resume()
        rows = []
        for line in plan:
            if "rejudge" in line:
                continue
            fields = outcome(line)
            if fields is not None:
                rows.append({**line, **fields})
        if rows:
            self.record(rows)
        return rows


def _rows(rows: list[Row], tasks: int, rollouts: int) -> list[Row]:
    base = rows[0]
    return [
        {**copy.deepcopy(base), "_ng_task_index": t, "_ng_rollout_index": r}
        for t in range(tasks)
        for r in range(rollouts)
    ]


def by_key(outcomes: Mapping[tuple[int, int], Row]) -> Outcome:
    """An outcome chooser: the fields for ``(task, rollout)``, else graded 1.0."""

    def choose(row: Row) -> Row | None:
        key = (row["_ng_task_index"], row["_ng_rollout_index"])
        return outcomes.get(key, graded())

    return choose


Build = Callable[[CliRun], object]
Templates = Callable[..., CliRun]


@pytest.fixture(scope="session")
def templates(tmp_path_factory: pytest.TempPathFactory) -> Templates:
    """Runs built once per session, copied for each test (the clock state too).

    ``templates(name, folder, build, **shape)`` returns a run in ``folder`` whose
    files are a copy of the run ``build`` made once, so a test pays for copying
    files rather than for the fsyncs of creating and recording.
    """
    built: dict[str, CliRun] = {}

    def copy_of(name: str, folder: Path, build: Build, **shape: int) -> CliRun:
        if name not in built:
            template = CliRun(tmp_path_factory.mktemp(name), **shape)
            build(template)
            built[name] = template
        template = built[name]
        run = CliRun(folder, **shape)
        shutil.copytree(template.out.parent, run.out.parent)
        run.clock = copy.deepcopy(template.clock)
        run.plans = template.plans
        return run

    return copy_of


@pytest.fixture
def cli_run(tmp_path: Path, templates: Templates) -> CliRun:
    """A created run of 3 tasks x 2 rollouts (nothing dispatched yet)."""
    return templates("created", tmp_path, CliRun.create)


def test_cli_out_a_folder_holding_one_run_names_it(cli_run: CliRun) -> None:
    """``verify DIR`` on what ``export --files DIR`` wrote; several runs are refused."""
    folder = cli_run.out.parent
    assert cli_run.ok("head", folder).stdout == cli_run.ok("head", cli_run.out).stdout
    (folder / "other_ledger").mkdir()
    (folder / "other_ledger" / "ledger.db").write_bytes(b"")
    result = cli_run.invoke("head", folder)
    assert result.exit_code == 2
    assert "holds the runs other, rollouts" in result.stderr
