"""A run in files needs neither optional extra: every reader works without
psycopg (``rollout-ledger[postgres]``) and pyarrow (``[parquet]``).

The real-collector harness installs the product without extras; issue 29's
workers view once imported psycopg for every ``status`` and crashed there.
Each command runs in a process where importing either package fails.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_cli_support import CliRun, by_key, failed

ROOT = Path(__file__).resolve().parents[1]
_BLOCK = (
    "import sys; sys.modules['psycopg'] = None; sys.modules['pyarrow'] = None; "
    "from cli.main import main; main(sys.argv[1:], prog_name='rollout-ledger')"
)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> CliRun:
    made = CliRun(tmp_path_factory.mktemp("plain"), tasks=3, rollouts=2)
    made.create()
    made.collect(by_key({(0, 0): failed("transient")}))
    return made


@pytest.mark.parametrize(
    "args",
    [
        ("status",),
        ("status", "--json"),
        ("check",),
        ("verify",),
        ("report", "-o", "{folder}/page.html"),
        ("history",),
        ("results",),
        ("head",),
    ],
    ids=lambda a: " ".join(a),
)
def test_a_file_run_is_read_without_psycopg_or_pyarrow(
    run: CliRun, args: tuple[str, ...]
) -> None:
    argv = [a.format(folder=run.folder) for a in args]
    done = subprocess.run(
        [sys.executable, "-c", _BLOCK, argv[0], str(run.out), *argv[1:]],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode in (0, 75, 76), done.stderr  # check: unfinished
