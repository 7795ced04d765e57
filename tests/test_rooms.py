"""Issue 26: the read side in rooms, and pure means pure.

``projections`` holds the read rooms (the fold and its snapshots, decisions,
the views, the reward figures, the words, the report's model) and one room
of operations, the only code of ``projections`` that changes a run. The
layers are ``cli -> operations -> read rooms -> ledger``, one way. No module
of a read room appends an event, saves a snapshot or writes a file, directly
or through what it imports: it imports no operation, no write helper of
``ledger``, and calls no write method. Every folder of product code holds at
most 15 modules, and every room says what it holds in a short docstring and
exports its names in a sorted ``__all__``.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
READ_ROOMS = ("browse", "decisions", "figures", "fold", "report", "views", "words")
OPERATIONS = "projections.operations"

#: Methods that change a run or a file, on any receiver.
WRITE_METHODS = frozenset(
    {
        "admit_judgment",
        "append_many",
        "direct_recorder",
        "mkdir",
        "record_many",
        "rename",
        "reserve",
        "reserve_many",
        "rmdir",
        "save_judgment",
        "save_snapshot",
        "touch",
        "unlink",
        "write_bytes",
        "write_text",
    }
)
#: Methods whose names lists and strings share: a write on a run's ledger,
#: store or files.
RUN_WRITES = frozenset({"append", "publish", "record", "write"})
RUN_RECEIVERS = frozenset(
    {"files", "led", "ledger", "log", "reader", "source", "store", "writer"}
)
#: ``ledger``'s names that write (its read helpers are allowed).
LEDGER_WRITERS = frozenset(
    {
        "forget_rows_seen",
        "materialize",
        "publish_json",
        "record_plan_rows",
        "repair",
        "save_ends",
        "save_rows_seen",
        "write_atomic",
    }
)
OS_WRITES = frozenset({"remove", "rename", "replace", "rmdir", "unlink", "makedirs"})


def read_modules() -> list[Path]:
    base = ROOT / "projections"
    found = [p for room in READ_ROOMS for p in (base / room).rglob("*.py")]
    assert len(found) > 30  # the rooms are where this test looks
    return sorted(found)


def _receiver(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _mode(call: ast.Call) -> str:
    args = [*call.args[1:2], *(k.value for k in call.keywords if k.arg == "mode")]
    modes = [a.value for a in args if isinstance(a, ast.Constant)]
    return next((m for m in modes if isinstance(m, str)), "r")


def _call_write(call: ast.Call) -> str:
    """What a call writes, in a few words; empty when it writes nothing."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else _receiver(func)
    owner = _receiver(func.value) if isinstance(func, ast.Attribute) else ""
    if name == "open" and set(_mode(call)) & set("wax+"):
        return "opens for writing"
    if isinstance(func, ast.Attribute) and name in WRITE_METHODS:
        return f"calls {name}"
    run_write = name in RUN_WRITES and owner in RUN_RECEIVERS
    os_write = owner == "shutil" or (owner == "os" and name in OS_WRITES)
    return f"calls {owner}.{name}" if run_write or os_write else ""


def writes(path: Path) -> Iterator[str]:
    """Each write a module makes or imports, as ``file:line: what``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    where = path.name
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith(OPERATIONS):
                yield f"{where}:{node.lineno}: imports {node.module}"
            if node.module.split(".")[0] == "ledger":
                for alias in node.names:
                    if alias.name in LEDGER_WRITERS:
                        yield f"{where}:{node.lineno}: imports {alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(OPERATIONS):
                    yield f"{where}:{node.lineno}: imports {alias.name}"
        elif isinstance(node, ast.Call):
            found = _call_write(node)
            if found:
                yield f"{where}:{node.lineno}: {found}"


def test_no_read_room_writes_or_imports_an_operation() -> None:
    offending = [w for path in read_modules() for w in writes(path)]
    assert offending == []


def test_the_purity_check_sees_a_planted_write(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        "from pathlib import Path\n"
        "from ledger import save_rows_seen\n"
        "from projections.operations.keep import save_snapshot\n"
        "def view(ledger, event, rows):\n"
        "    rows.append(1)\n"  # a list: not a write
        "    ledger.append(event)\n"
        "    Path('x').write_text('')\n"
        "    with open('y', 'a') as out:\n"
        "        out.write('z')\n"
        "    import os; os.replace('a', 'b')\n"
    )
    assert sorted(writes(planted), key=lambda w: int(w.split(":")[1])) == [
        "planted.py:2: imports save_rows_seen",
        "planted.py:3: imports projections.operations.keep",
        "planted.py:6: calls ledger.append",
        "planted.py:7: calls write_text",
        "planted.py:8: opens for writing",
        "planted.py:10: calls os.replace",
    ]


def _rooms() -> list[Path]:
    return sorted(
        p.parent
        for package in ("ledger", "projections", "cli")
        for p in (ROOT / package).rglob("__init__.py")
    )


def test_no_folder_of_product_code_holds_more_than_15_modules() -> None:
    rooms = _rooms()
    assert len(rooms) > 20
    crowded = {
        str(room.relative_to(ROOT)): n
        for room in rooms
        if (n := sum(1 for p in room.glob("*.py") if p.name != "__init__.py")) > 15
    }
    assert crowded == {}


@pytest.mark.parametrize(
    "room", [str(r.relative_to(ROOT)).replace("/", ".") for r in _rooms()]
)
def test_each_room_has_a_short_docstring_and_a_sorted_export_list(room: str) -> None:
    module = importlib.import_module(room)
    doc = module.__doc__ or ""
    assert doc.strip(), room
    if room not in ("ledger", "projections"):  # the two packages' API pages
        assert len(doc.strip().splitlines()) <= 5, room
    exported = list(module.__all__)
    assert exported == sorted(exported, key=lambda n: (not n.isupper(), n)) or (
        exported == sorted(exported)
    )
    modules = {p.stem for p in Path(str(module.__file__)).parent.glob("*.py")}
    if room not in ("ledger", "projections", "cli"):  # ledger.events is a module
        assert set(exported) & modules == set()  # an attribute: a name or a module
    for name in exported:
        assert getattr(module, name) is not None, (room, name)


def test_no_two_modules_of_a_room_differ_only_by_a_suffix() -> None:
    pairs = []
    for room in _rooms():
        names = sorted(p.stem for p in room.glob("*.py") if p.stem != "__init__")
        pairs += [
            f"{room.relative_to(ROOT)}: {a} / {b}"
            for a in names
            for b in names
            if a != b and b.startswith(a + "_")
        ]
    assert pairs == []


def test_how_it_is_built_names_only_rooms_and_modules_that_exist() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## How it is built", 1)[1].split("\n## ", 1)[0]
    named = re.findall(r"`((?:ledger|projections|cli)/[\w/.]*)`", section)
    assert len(named) > 15
    missing = [path for path in named if not (ROOT / path).exists()]
    assert missing == []
