"""EV-30, EV-31: atomic replacement and canonical published JSON."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from ledger import LedgerError, atomic_replace, publish_json
from tests.internals import canonical_json


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_ev_30_replaces_the_whole_file(tmp_path: Path) -> None:
    target = tmp_path / "f.json"
    target.write_bytes(b"old")
    atomic_replace(target, b"new bytes")
    assert target.read_bytes() == b"new bytes"
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("failing", ["fsync", "replace", "write"])
def test_ev_30_a_failed_write_keeps_the_old_file_and_removes_the_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    target = tmp_path / "f.json"
    target.write_bytes(b"old")

    def boom(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, failing, boom)
    with pytest.raises(LedgerError, match="No space left"):
        atomic_replace(target, b"new")
    monkeypatch.undo()
    assert target.read_bytes() == b"old"
    assert leftovers(tmp_path) == []


def test_ev_30_keeps_the_mode_of_the_replaced_file(tmp_path: Path) -> None:
    target = tmp_path / "f.json"
    target.write_bytes(b"old")
    target.chmod(0o640)
    atomic_replace(target, b"new")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_ev_30_an_explicit_mode_wins(tmp_path: Path) -> None:
    target = tmp_path / "f.json"
    atomic_replace(target, b"new", mode=0o600)
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_ev_30_a_new_file_gets_the_process_umask(tmp_path: Path) -> None:
    previous = os.umask(0o027)
    try:
        atomic_replace(tmp_path / "new.json", b"x")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o640


def test_ev_31_publish_json_is_canonical(tmp_path: Path) -> None:
    target = tmp_path / "m.json"
    publish_json(target, {"b": [1, {"d": None, "c": 2}], "a": "é"})
    assert target.read_text(encoding="utf-8") == (
        '{\n  "a": "é",\n  "b": [\n    1,\n    {\n      "c": 2,\n      "d": null\n'
        "    }\n  ]\n}\n"
    )


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), {"x": [float("-inf")]}])
def test_ev_31_nan_and_infinity_are_refused(tmp_path: Path, bad: object) -> None:
    target = tmp_path / "m.json"
    target.write_text("{}\n")
    with pytest.raises(ValueError, match="NaN"):
        publish_json(target, {"value": bad})
    assert target.read_text() == "{}\n"


def test_ev_31_same_value_same_bytes() -> None:
    assert canonical_json({"x": 1, "a": {"z": 1, "b": 2}}) == canonical_json(
        {"a": {"b": 2, "z": 1}, "x": 1}
    )
