"""Without the real NeMo Gym files a test is skipped, and fails under CI=true."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.prerequisites import FIXTURES_ENV, require_folder, unavailable

ROOT = Path(__file__).resolve().parents[1]
MODULE = "tests/test_fixture_rows.py"


def test_unavailable_skips_locally_and_fails_under_ci() -> None:
    with pytest.raises(pytest.skip.Exception, match="no server"):
        unavailable("no server", environ={})
    with pytest.raises(pytest.fail.Exception, match=r"no server \(CI=true"):
        unavailable("no server", environ={"CI": "true"})


def test_a_folder_without_the_files_is_unavailable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "notes.txt").write_text("not a result file\n")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=FIXTURES_ENV):
        require_folder(tmp_path, "*.jsonl", FIXTURES_ENV)
    with pytest.raises(pytest.skip.Exception, match="missing"):
        require_folder(tmp_path / "missing", "*.jsonl", FIXTURES_ENV)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true"):
        require_folder(tmp_path, "*.jsonl", FIXTURES_ENV)
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "rollouts.jsonl").write_text("{}\n")
    require_folder(tmp_path, "*.jsonl", FIXTURES_ENV)  # found: nothing raised


ONE_PROCESS = ("-q", "-rs", "-n", "0", "-p", "no:cacheprovider")


# pytest's exit codes: 5 when no test ran (all skipped), 2 after a collection error.
@pytest.mark.parametrize(
    ("ci", "outcome", "code"), [("", "skipped", 5), ("true", "error", 2)]
)
def test_a_fixture_module_without_its_folder(
    tmp_path: Path, ci: str, outcome: str, code: int
) -> None:
    """The whole module: skipped with the reason, or a collection error in CI."""
    env = {**os.environ, FIXTURES_ENV: str(tmp_path / "nowhere"), "CI": ci}
    done = subprocess.run(
        # One process (-n 0): the outcome lines are the module's own.
        [sys.executable, "-m", "pytest", *ONE_PROCESS, MODULE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert str(tmp_path / "nowhere") in done.stdout
    assert f"1 {outcome}" in done.stdout, done.stdout
    assert done.returncode == code, done.stdout
