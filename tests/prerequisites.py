"""What some tests need from outside the repository, and what they do without it.

The real NeMo Gym files (``../shared/fixtures/nemo-gym`` and
``../shared/fixtures/nemo-gym-configs``, or the folders
``ROLLOUT_LEDGER_NEMO_GYM_FIXTURES`` and ``ROLLOUT_LEDGER_NEMO_GYM_CONFIGS``
name) and a PostgreSQL server (``tests/pg_server.py``). Without one, a test is
skipped on a developer's machine, with the reason; under ``CI=true`` it fails,
since a CI run that skipped it would pass without checking anything.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import NoReturn

import pytest

__all__ = [
    "CONFIGS_ENV",
    "FIXTURES_ENV",
    "nemo_gym_configs",
    "nemo_gym_fixtures",
    "require_folder",
    "unavailable",
]

FIXTURES_ENV = "ROLLOUT_LEDGER_NEMO_GYM_FIXTURES"
CONFIGS_ENV = "ROLLOUT_LEDGER_NEMO_GYM_CONFIGS"
_SHARED = Path(__file__).resolve().parents[2] / "shared" / "fixtures"


def nemo_gym_fixtures() -> Path:
    """The folder of real NeMo Gym runs (rollouts, inputs, sidecars)."""
    return Path(os.environ.get(FIXTURES_ENV, _SHARED / "nemo-gym")).resolve()


def nemo_gym_configs() -> Path:
    """The folder of real NeMo Gym configuration files."""
    return Path(os.environ.get(CONFIGS_ENV, _SHARED / "nemo-gym-configs")).resolve()


def unavailable(reason: str, *, environ: Mapping[str, str] = os.environ) -> NoReturn:
    """Skip the test (or, at import, its module); under ``CI=true``, fail it.

    At import a failure is a collection error naming the reason: CI stops
    there rather than pass without the module's tests.
    """
    if environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: required, not skipped)", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


def require_folder(folder: Path, pattern: str, env: str) -> None:
    """Go on if ``folder`` holds a file matching ``pattern``; else ``unavailable``."""
    if folder.is_dir() and next(folder.rglob(pattern), None) is not None:
        return
    unavailable(f"no {pattern} files at {folder}; point {env} at them")
