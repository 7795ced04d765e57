"""The error tree: misuse is a refusal, a failing disk a storage error (house style).

No product module raises the root ``LedgerError`` itself: each error says what
kind of failure it is, so a caller can catch it by type and the CLI maps it to
its exit code (3 for a refusal, 5 for storage).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ledger import (
    Ledger,
    LedgerError,
    Refused,
    RunLock,
    StorageError,
    atomic_replace,
    events,
)
from tests.conftest import RunFactory

ROOT = Path(__file__).parents[1]


def test_no_product_module_raises_the_root_error_itself() -> None:
    modules = [
        path
        for package in ("ledger", "projections", "cli")
        for path in sorted((ROOT / package).rglob("*.py"))
        if path != ROOT / "ledger" / "errors.py"
    ]
    assert modules  # the scan below reads each
    bare = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in modules
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Call)
        and (
            (isinstance(node.func, ast.Name) and node.func.id == "LedgerError")
            or (
                isinstance(node.func, ast.Attribute) and node.func.attr == "LedgerError"
            )
        )
    ]
    assert bare == []


def test_a_reader_asked_to_write_is_refused_with_exit_3(make_run: RunFactory) -> None:
    led = make_run()
    with Ledger.open(led.target) as reader, pytest.raises(Refused) as caught:
        reader.append(events.RerunApproved(task=0, rollout=0, attempt=0, reason="r"))
    assert caught.value.exit_code == 3
    assert "read-only" in str(caught.value)


def test_a_lock_not_held_is_refused_with_exit_3(tmp_path: Path) -> None:
    with pytest.raises(Refused, match="not held") as caught:
        Ledger.open(tmp_path / "rollouts.jsonl", lock=RunLock(tmp_path / "r.jsonl"))
    assert caught.value.exit_code == 3


def test_an_os_error_on_a_run_file_is_a_storage_error_with_exit_5(
    tmp_path: Path,
) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    with pytest.raises(StorageError) as caught:
        atomic_replace(blocker / "manifest.json", b"{}")
    assert caught.value.exit_code == 5
    assert isinstance(caught.value, LedgerError)
    assert caught.value.path == str(blocker / "manifest.json")
