"""Helpers of the report tests: a demo run and its report, read back.

The demo (CLI-15) makes a real run with held rollouts, a settled zero, a
re-judgment and a settings change accepted; ``report`` is run on it through
the CLI's main entry, as a user would.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from cli import main

__all__ = ["TRAILS", "demo_run", "invoke", "report_of", "text_of", "trails"]

#: The trails' JSON block: the one place a rule id may appear (for auditors).
TRAILS = re.compile(
    r'<script type="application/json" id="trails-data">(.*?)</script>', re.S
)


def invoke(*args: str) -> Any:
    """The CLI's result for ``args`` (a failure shows its output)."""
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def demo_run(folder: Path, rollouts: int = 120) -> Path:
    """A finished demo run in ``folder``; returns its OUT."""
    invoke("demo", str(folder), "--rollouts", str(rollouts), "--seed", "7")
    return folder / "rollouts.jsonl"


def report_of(out: Path, target: Path, *extra: str) -> str:
    """The report of ``out`` written to ``target`` by the CLI; its text."""
    invoke("report", str(out), "-o", str(target), *extra)
    return target.read_text(encoding="utf-8")


def text_of(page: str, name: str) -> str:
    """The text of the element marked ``data-testid="name"``."""
    found = re.search(rf'data-testid="{name}"[^>]*>([^<]*)<', page)
    assert found is not None, f"no {name} in the report"
    return found.group(1)


def trails(page: str) -> dict[str, Any]:
    """The trails the page carries, by ``"task-rollout"``."""
    found = TRAILS.search(page)
    assert found is not None
    value: dict[str, Any] = json.loads(found.group(1).replace("<\\/", "</"))
    return value
