"""A NeMo Gym run manifest found beside a run saved without a ledger (REC-73).

NeMo Gym's ``<stem>_manifest.json`` (schema 1 or 2) is another tool's file: it
is read, kept whole in ``legacy_imported``, and never written. Its ``run_id``
and ``config_digest`` become the imported run's. A manifest that cannot be
read, or of another schema, is unknown saved work and refuses the import
(REC-51), since its rows may carry that run's id. So is one whose
``selection_policy`` is anything but ``latest_allocated`` (REC-85): its rows
would mean another attempt than the one the ledger selects.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Final, NamedTuple

import msgspec

from ledger.errors import CorruptLedger
from ledger.files import read_regular
from ledger.paths import RunPaths
from ledger.rows.values import brief

__all__ = ["ForeignManifest", "foreign_manifest_path", "read_foreign_manifest"]

#: Read as data with a size limit (quality.md, "Security"); a schema-2
#: manifest holds one counter per rollout, so it may be a few MiB.
MAX_FOREIGN_MANIFEST_BYTES: Final = 64 * 1024 * 1024
_SCHEMAS: Final = (1, 2)
#: The one selection the importer reads rows with (REC-85): a rollout's
#: outcome is its latest allocated attempt.
_SELECTION: Final = "latest_allocated"
_V1_SELECTION: Final = "latest_dispatched"
_DIGEST: Final = re.compile(r"[0-9a-f]{64}|unverified")
_RUN_ID_LIMIT: Final = 128


class ForeignManifest(NamedTuple):
    """The manifest as found (the parsed object and its bytes), and its two ids."""

    value: dict[str, Any]
    data: bytes
    run_id: str
    config_digest: str


def foreign_manifest_path(paths: RunPaths) -> Path:
    """``<stem>_manifest.json`` beside ``OUT``: NeMo Gym's name for its manifest."""
    return paths.folder / f"{paths.stem}_manifest.json"


def _refuse(path: Path, problem: str) -> CorruptLedger:
    return CorruptLedger(
        f"the NeMo Gym manifest {path} {problem}; the import cannot tell which run "
        "its rows belong to (move the file aside to import the run without it)",
        path=path,
    )


def _read(path: Path) -> bytes:
    try:
        size = path.stat().st_size
        if size > MAX_FOREIGN_MANIFEST_BYTES:
            raise _refuse(path, f"is {size} bytes, over the limit")
        return read_regular(path)
    except OSError as exc:
        raise _refuse(path, f"cannot be read ({exc.strerror or exc})") from None


def _decoded(path: Path, data: bytes) -> dict[str, Any]:
    try:
        value = msgspec.json.decode(data)
    except (msgspec.DecodeError, RecursionError):
        raise _refuse(path, "is not JSON") from None
    if not isinstance(value, dict):
        raise _refuse(path, "is not a JSON object")
    return value


def _field(path: Path, value: dict[str, Any], name: str) -> str:
    found = value.get(name)
    if name == "run_id":
        valid = isinstance(found, str) and 0 < len(found) <= _RUN_ID_LIMIT
    else:
        valid = isinstance(found, str) and _DIGEST.fullmatch(found) is not None
    if not valid:
        raise _refuse(path, f"has no usable {name}")
    return str(found)


def _unsupported(
    path: Path, field: str, value: object, supported: str
) -> CorruptLedger:
    # REC-85: named field and value, and never imported with another meaning.
    return CorruptLedger(
        f"the NeMo Gym manifest {path} has {field} {brief(value)}, which the "
        f"import does not support (it reads {supported}); nothing was imported, "
        "since its rows would be imported with another meaning than they have",
        path=path,
    )


def _check_supported(path: Path, value: dict[str, Any]) -> None:
    # NeMo Gym's manifest models default the version to 1 when it is absent.
    schema = value.get("schema_version", 1)
    if type(schema) is not int or schema not in _SCHEMAS:
        raise _unsupported(path, "schema_version", schema, "schema_version 1 and 2")
    # Absent, the selection is NeMo Gym's default, the latest allocated attempt.
    # Decision: schema 1's only selection, "latest_dispatched", is accepted
    # with it (REC-73 imports schema 1; its v1 code dispatched each attempt as
    # it allocated it, so both select the latest attempt); in schema 2 it, and
    # any other name ("any_success"), would mean another attempt (REC-85).
    selection = value.get("selection_policy", _SELECTION)
    if selection != _SELECTION and not (schema == 1 and selection == _V1_SELECTION):
        raise _unsupported(
            path,
            "selection_policy",
            selection,
            f"only {_SELECTION}: the latest attempt allocated to each rollout",
        )


def read_foreign_manifest(path: Path) -> ForeignManifest | None:
    """The NeMo Gym manifest at ``path``, or ``None`` when there is none.

    Raises:
        CorruptLedger: the file cannot be read, is not a JSON object, is of a
            schema other than 1 or 2, selects rows by another policy than
            ``latest_allocated`` (REC-85), or lacks a usable ``run_id`` or
            ``config_digest``.
    """
    if not path.exists():
        return None
    data = _read(path)
    value = _decoded(path, data)
    _check_supported(path, value)
    return ForeignManifest(
        value=value,
        data=data,
        run_id=_field(path, value, "run_id"),
        config_digest=_field(path, value, "config_digest"),
    )
