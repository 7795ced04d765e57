"""architecture.md: imports go one way only, cli -> projections -> ledger.

And each layer uses the one below through its exported names (api.md): ``cli``
imports only the ``ledger`` and ``projections`` packages and names in their
``__all__``; ``projections`` imports from ``ledger`` only exported names, plus
the short list of internals below, each with the reason it is not exported.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import ledger
import projections

ROOT = Path(__file__).parents[1]
FORBIDDEN = {
    "ledger": {"projections", "cli"},
    "projections": {"cli"},
    "cli": set(),
}
# Folds and decisions are pure (house style): no I/O libraries in projections,
# except the modules that talk to the store through ledger's public API.
PURE_FORBIDDEN = {"sqlite3", "pydantic", "sqlite_utils", "time", "random"}
#: Operations that wait on processes or files (the run loop times its rounds).
PURE_EXEMPT = {
    "checks.py",
    "coordinator.py",
    "publishing.py",
    "kept.py",
    "results.py",
    "resuming.py",
    "run_loop.py",
    "work.py",
}


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


# -- exported names only ---------------------------------------------------------

#: ledger's internals that projections may import, by module; why each is not
#: exported. Keep it short: a name that callers of the library need belongs in
#: ``ledger.__all__`` instead.
LEDGER_INTERNALS: dict[str, tuple[frozenset[str], str]] = {
    "ledger.store.port": (
        frozenset({"EventRow", "RowReader", "RunFiles"}),
        "replay and replan read stored rows before any event is built (the fast "
        "path); results and verify read recorded rows through Ledger.files, "
        "wherever the run's home keeps them",
    ),
    "ledger.event_views": (
        frozenset(
            {
                "FailureSavedLocation",
                "FailureSavedRawFacts",
                "JudgeOutcomeLocation",
                "ResultSavedLocation",
                "ResultSavedRawFacts",
                "RunCreatedPolicy",
                "RunCreatedRawIndex",
            }
        ),
        "the partial decoders replay's fast path reads events with, each a "
        "tested subset of its event",
    ),
    "ledger.store.decode": (
        frozenset({"decode_row"}),
        "the fold decodes stored rows itself, only the kinds it folds",
    ),
    "ledger.store.run_files": (
        frozenset({"ChunkReader"}),
        "verify reads the materialized inputs in chunks, wherever they are kept",
    ),
    "ledger.store.chain": (
        frozenset({"first_chain_break"}),
        "verify recomputes the chain in the same pass that reads each event for "
        "its row's place (issue 30)",
    ),
    "ledger.collector_files.rows_seen": (
        frozenset({"RACY_NS", "file_shape"}),
        "the report keeps its model only for files written longer ago than a "
        "clock tick could hide, as the writer's note of them; verify and the "
        "report know a file by its identity and times as that note does",
    ),
    "ledger.store.materialize": (
        frozenset({"index_entry"}),
        "verify compares each materialized line with the index entry run_created "
        "recorded for it (R-7)",
    ),
    "ledger.collector_files.inputs_seen": (
        frozenset({"InputsSeen", "before_read", "same_file", "seen_now", "still_seen"}),
        "a resume trusts the inputs' digest while their file is untouched (P-8); "
        "the proof is the snapshot's, of no use to a caller",
    ),
    "ledger.run.index_keeper": (
        frozenset({"ENDS_VERSION", "encode_ends"}),
        "verify compares the stored file ends with a refold of their events, "
        "encoded as the writer stores them",
    ),
    "ledger.run.write_index": (
        frozenset({"END_KINDS", "INDEX_CODE_VERSION", "INDEX_KINDS", "WriteIndex"}),
        "verify rebuilds the write index and compares it with the saved snapshot",
    ),
    "ledger.policy.log": (
        frozenset(
            {
                "apply_changes",
                "policy_changes",
                "policy_from_events",
                "policy_from_json",
            }
        ),
        "how policy_changed events change the policy in force (REC-60), which "
        "replay, resume, verify and the operator actions fold",
    ),
    "ledger.policy.approvals": (
        frozenset({"read_approvals"}),
        "resume reads an approvals file (REC-25)",
    ),
    "ledger.identity.normalize": (
        frozenset({"get_path", "has_path"}),
        "the gate and diff-config read dotted keys of a saved identity (REC-53)",
    ),
    "ledger.identity.forms": (
        frozenset({"added_at_default"}),
        "the gate lets a key added at its default pass as unchanged (REC-53)",
    ),
    "ledger.identity.key_words": (
        frozenset({"split_key"}),
        "the gate tells a whole server from one of its settings, for a run whose "
        "identity was taken before environment servers counted (ID-41)",
    ),
    "ledger.files": (
        frozenset({"canonical_json", "open_regular"}),
        "the bytes of a published JSON file (EV-31), which publish writes and "
        "verify compares; verify's proof hashes each collector file whole, "
        "refusing a pipe or a folder in its place as every reader does",
    ),
    "ledger.rows": (
        frozenset({"failure_kinds"}),
        "the snapshot's code version hashes the failure-kind table's module",
    ),
    "ledger.rows.failure_kinds": (
        frozenset({"kind_info"}),
        "classify reads a kind's lifecycle and deadline from the one kind table",
    ),
    "ledger": (
        frozenset({"event_views"}),
        "the snapshot's code version hashes the partial decoders' module",
    ),
}


def _from_imports(path: Path, root: str) -> Iterator[tuple[str, str, int]]:
    """``(module, name, line)`` of each ``from <root>... import name``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == root:
                    yield alias.name, "", node.lineno
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module
            and node.module.split(".")[0] == root
        ):
            for alias in node.names:
                yield node.module, alias.name, node.lineno


def _exported(package: ModuleType, module: str, name: str) -> bool:
    """Whether ``from module import name`` names an object ``package`` exports.

    ``from ledger import X`` with X in ``__all__``; ``from ledger.errors import
    ConfigError`` too, the object ``ledger.ConfigError`` is; and any public name
    of an exported module (``from ledger.events import RerunApproved``).
    """
    public = {n: getattr(package, n) for n in package.__all__}
    if module == package.__name__:
        return name in public
    source = importlib.import_module(module)
    if any(source is value for value in public.values()):
        return not name.startswith("_")
    return name in public and getattr(source, name, None) is public[name]


def _cli_offences(path: Path) -> list[str]:
    found = []
    for package in (ledger, projections):
        root = package.__name__
        for module, name, line in _from_imports(path, root):
            ok = module == root and (not name or name in package.__all__)
            if not ok:
                found.append(f"{path.name}:{line}: {module} {name}".rstrip())
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [
            f"{path.name}:{node.lineno}: {root}.{node.attr}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == root
            and node.attr not in package.__all__
        ]
    return found


def test_cli_uses_only_the_exported_names_of_the_library() -> None:
    offending = [f for path in modules("cli") for f in _cli_offences(path)]
    assert offending == []


def _internal(module: str, name: str) -> bool:
    names = LEDGER_INTERNALS.get(module, (frozenset(), ""))[0]
    return name in names


def test_projections_uses_ledger_s_exported_names_and_the_listed_internals() -> None:
    offending = [
        f"{path.name}:{line}: {module} {name}"
        for path in modules("projections")
        for module, name, line in _from_imports(path, "ledger")
        if not name  # `import ledger.x`: reach it through ledger's names
        or not (_exported(ledger, module, name) or _internal(module, name))
    ]
    assert offending == []


def test_every_listed_internal_is_still_needed() -> None:
    used = {
        (module, name)
        for path in modules("projections")
        for module, name, _ in _from_imports(path, "ledger")
    }
    listed = {(m, n) for m, (names, _) in LEDGER_INTERNALS.items() for n in names}
    assert listed - used == set()


def test_the_export_checks_see_what_they_refuse(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import ledger\n"
        "from ledger.run.ledger import Ledger\n"
        "from projections import replay\n"
        "from projections.operations.operator import append_operator_events\n"
        "ledger.Ledger, ledger.run\n"
    )
    assert _cli_offences(bad) == [
        "bad.py:2: ledger.run.ledger Ledger",
        "bad.py:5: ledger.run",
        "bad.py:4: projections.operations.operator append_operator_events",
    ]
    assert _exported(ledger, "ledger.errors", "ConfigError")
    assert _exported(ledger, "ledger.events", "RerunApproved")
    assert not _exported(ledger, "ledger.events", "_DECODER")
    assert not _exported(ledger, "ledger.run.write_index", "WriteIndex")
