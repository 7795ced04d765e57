"""architecture.md: imports go one way only, cli -> projections -> ledger."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
FORBIDDEN = {
    "ledger": {"projections", "cli"},
    "projections": {"cli"},
    "cli": set(),
}
# Folds and decisions are pure (house style): no I/O libraries in projections,
# except the modules that talk to the store through ledger's public API.
PURE_FORBIDDEN = {"sqlite3", "pydantic", "sqlite_utils", "time", "random"}
PURE_EXEMPT = {"resume.py", "publish.py", "verify.py", "results.py"}


def modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_follow_the_layer_direction(package: str) -> None:
    offending = {
        str(path.relative_to(ROOT)): sorted(imported_roots(path) & FORBIDDEN[package])
        for path in modules(package)
        if imported_roots(path) & FORBIDDEN[package]
    }
    assert offending == {}


def test_projections_folds_do_no_io() -> None:
    offending = {
        str(path.relative_to(ROOT)): sorted(imported_roots(path) & PURE_FORBIDDEN)
        for path in modules("projections")
        if path.name not in PURE_EXEMPT and imported_roots(path) & PURE_FORBIDDEN
    }
    assert offending == {}


def test_the_layer_check_sees_a_backward_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from projections import replay\nimport cli.main\n")
    assert imported_roots(bad) >= {"projections", "cli"}
