"""The README's two commands stay true: CI runs the test command it shows."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).parents[1]
DEMO_COMMAND = " && ".join(
    [
        "python3 -m venv .venv",
        ".venv/bin/pip install -e .",
        ".venv/bin/rollout-ledger demo",
    ]
)
TEST_COMMAND = (
    "python3 -m venv .venv && .venv/bin/pip install -e '.[dev]' && .venv/bin/pytest"
)


def test_readme_shows_the_test_command_that_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert TEST_COMMAND in readme
    assert f"# README: {TEST_COMMAND}" in ci
    assert "\n.venv/bin/pytest\n" in ci
    assert "pip install --quiet -e '.[dev]'" in ci


def test_readme_first_screen_says_what_it_is_for_and_how_to_run_it() -> None:
    first_screen = "\n".join(
        (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:25]
    )
    assert "resumable and" in first_screen
    assert DEMO_COMMAND in first_screen
    assert TEST_COMMAND in first_screen
