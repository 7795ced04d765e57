"""CLI-2: ``projections.create_run`` starts every run, the command's and the demo's.

The demo once created its runs with ``Ledger.create`` alone: its new run had
``manifest.json`` and ``identity.json`` but none of the files ``create``
publishes from the log (coverage and the two logs), took no launcher policy
and no ``agent_ref`` default. Both now go through one library function.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from omegaconf import OmegaConf

from cli import main
from ledger import Ledger
from projections import create_run, replay
from tests.internals import demo_module

STEM = "rollouts"


class _Stop(Exception):
    """Raised in place of the demo's first collector round."""


def _files(folder: Path) -> set[str]:
    # SQLite's own -wal/-shm files come and go with its connections.
    return {
        str(path.relative_to(folder))
        for path in folder.rglob("*")
        if path.is_file() and not path.name.endswith(("-wal", "-shm"))
    }


def _created_by_demo(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    def stop(*args: object, **kwargs: object) -> list[str]:
        raise _Stop

    monkeypatch.setattr(demo_module, "_job", stop)
    with pytest.raises(_Stop):
        CliRunner().invoke(
            demo_module.demo, [str(folder), "--rollouts", "8"], catch_exceptions=False
        )
    return folder / f"{STEM}.jsonl"


def _created_by_command(folder: Path) -> Path:
    folder.mkdir()
    demo_module._write_config(folder, parallel=32)
    rows = folder / "rows.jsonl"
    rows.write_text("".join(json.dumps(row) + "\n" for row in demo_module._inputs(8)))
    out = folder / f"{STEM}.jsonl"
    result = CliRunner().invoke(
        main,
        [
            *("create", str(out), "--inputs", str(rows), "--max-attempts", "3"),
            *("--config", str(folder / "collection.yaml")),
            *("--global-config", str(folder / "servers.yaml")),
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    (folder / "rows.jsonl").unlink()  # the command's input, not the run's
    # create's note of the files it was given, for the hints (issue 28)
    (folder / f"{STEM}_ledger" / "commands.json").unlink()
    return out


def test_cli_2_demo_and_create_publish_the_same_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    by_demo = _created_by_demo(tmp_path / "demo", monkeypatch)
    by_command = _created_by_command(tmp_path / "create")
    published = _files(by_demo.parent)
    assert published == _files(by_command.parent)
    assert {
        f"{STEM}_ledger/{name}"
        for name in (
            "manifest.json",
            "identity.json",
            "coverage.json",
            "resume_drift.log",
            "failure_budget.log",
        )
    } <= published
    demo_created = (by_demo.parent / f"{STEM}_ledger" / "coverage.json").read_text()
    command_created = (
        by_command.parent / f"{STEM}_ledger" / "coverage.json"
    ).read_text()
    assert json.loads(demo_created) == json.loads(command_created)


def test_cli_2_create_run_returns_what_the_run_holds(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    demo_module._write_config(folder, parallel=32)
    # A row without agent_ref takes the collection's agent_name; the caller's
    # rows are not modified.
    rows = demo_module._inputs(8)
    del rows[0]["agent_ref"]
    created = create_run(
        folder / f"{STEM}.jsonl",
        rows,
        _plain(folder / "collection.yaml"),
        _plain(folder / "servers.yaml"),
        max_attempts=2,
        journal_mode="delete",
    )
    assert "agent_ref" not in rows[0]
    materialized = (folder / f"{STEM}_materialized_inputs.jsonl").read_text()
    first = json.loads(materialized.splitlines()[0])
    assert first["agent_ref"] == {"name": "math_agent"}
    with Ledger.open(folder / f"{STEM}.jsonl") as led:
        state = replay(led)
        assert led.journal_mode == "delete"
    assert (created.run_id, created.rollouts, created.tasks, created.cap) == (
        state.run_id,
        8,
        2,
        2,
    )
    assert created.config_digest == state.manifest["config_digest"]


def _plain(path: Path) -> dict[str, Any]:
    data = OmegaConf.to_container(OmegaConf.load(path))
    assert isinstance(data, dict)
    return {str(key): value for key, value in data.items()}
