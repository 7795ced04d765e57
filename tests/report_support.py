"""Helpers of the report tests: a demo run and its report, read back.

The demo (CLI-15) makes a real run with held rollouts, a settled zero, a
re-judgment and a settings change accepted; ``report`` is run on it through
the CLI's main entry, as a user would. ``planted_run`` is a small run whose
rows and approval carry what could break the page (issue 27): ``<!--<script>``
in a failure class and in an approval reason, a long answer with a credential.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from cli import main
from tests.test_cli_support import CliRun, by_key, failed, graded

__all__ = [
    "LONG_ANSWER",
    "PLANT",
    "SECRET",
    "TRAILS",
    "demo_run",
    "invoke",
    "planted_run",
    "report_of",
    "text_of",
    "trails",
]

#: What an adversarial row or operator may write: it must stay text.
PLANT = "<!--<script>"
#: A credential in a model's answer: the page never shows it.
SECRET = "sk-proj-" + "Q7d9" * 8
#: An answer longer than the trail shows at first, with the credential in it.
LONG_ANSWER = "The answer is 42. " * 40 + f"My key is {SECRET}. " + "</script>" * 3

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


def planted_run(folder: Path) -> Path:
    """A run of 3 tasks x 2 rollouts with ``PLANT`` in a failure class, a
    failure message and an approval reason, and ``LONG_ANSWER`` answered; its OUT.

    Rollout (0, 0) failed with class ``PLANT`` (to run again), (0, 1) is held
    and approved with reason ``PLANT``, (1, 0) answered ``LONG_ANSWER``.
    """
    folder.mkdir(parents=True, exist_ok=True)
    run = CliRun(folder)
    run.create()
    long = graded()
    long["response"]["output"][0]["content"][0]["text"] = LONG_ANSWER
    planted = failed(PLANT)
    planted["_ng_failure_message"] = f"{PLANT} failed {PLANT}"
    outcomes = {
        (0, 0): planted,
        (0, 1): failed("session_lost", answer=True),  # held: it kept an answer
        (1, 0): long,
    }
    run.collect(by_key(outcomes))
    approve = ("approve", run.out, "--task", 0, "--rollout", 1, "--attempt", 0)
    run.ok(*approve, "--reason", PLANT)
    return run.out


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
    value: dict[str, Any] = json.loads(found.group(1))
    return value
