"""Tests reach private modules only through ``tests/internals.py``.

Tests of behaviour import the public names (``ledger``, ``ledger.events``,
``projections``, ``cli``); tests of an internal unit take its private names
from ``tests/internals.py``. So moving a private module breaks one file of the
tests, not fifty. Imports in scripts a test runs in a child process count too.
"""

from __future__ import annotations

import re
from pathlib import Path

import tests.internals

TESTS = Path(__file__).parent
PUBLIC = {"ledger", "ledger.events", "projections", "cli"}
# ``from ledger.run.ledger import Ledger`` or ``import cli.main``, in code or in a
# script string; ``ledger.db`` and prose never start a line with from/import.
IMPORT = re.compile(
    r"^\s*(?:from|import)\s+((?:ledger|projections|cli)(?:\.\w+)*)", re.MULTILINE
)


def test_only_internals_imports_private_modules() -> None:
    files = sorted(TESTS.rglob("*.py"))
    assert files  # the loop below checks each
    private = [
        f"{path.relative_to(TESTS)}: {module}"
        for path in files
        if path != TESTS / "internals.py"
        for module in IMPORT.findall(path.read_text(encoding="utf-8"))
        if module not in PUBLIC
    ]
    assert private == [], "import these names from tests/internals.py instead"


def test_internals_exports_what_it_imports() -> None:
    names = tests.internals.__all__
    assert names  # the check below looks at each
    assert [name for name in names if not hasattr(tests.internals, name)] == []
