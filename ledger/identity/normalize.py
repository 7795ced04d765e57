"""The normalization steps of configuration identity (ID-5, ID-6, ID-7, ID-8, ID-9).

Each step is a pure function of plain data, except :func:`file_values`, which
reads the files that semantic file-valued settings name.

ID-5 names ``${NAME}`` and ``${oc.env:NAME...}``; ``${oc.select:NAME,...}`` is a
connection reference on the same terms (real configurations write
``${oc.select:judge_base_url,${policy_base_url}}``), since resolving it would
put a launch-time address into the identity.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ledger.errors import ConfigError
from ledger.identity import key_tables
from ledger.identity.interpolations import Interpolation, replace_interpolations
from ledger.identity.key_tables import FILE_SUFFIXES, RUNTIME_NAMES, RUNTIME_SUFFIXES
from ledger.identity.key_words import join_key, split_key

__all__ = [
    "delete_path",
    "drop_nulls",
    "file_values",
    "get_path",
    "refuse_directives",
    "runtime_references",
    "set_path",
]

#: NeMo Gym's loader directives; its loader expands them before we see a config.
_DIRECTIVES = frozenset({"_inherit_from", "_copy"})
_MISSING = object()


def _map_strings(value: Any, change: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {key: _map_strings(item, change) for key, item in value.items()}
    if isinstance(value, list):
        return [_map_strings(item, change) for item in value]
    return value


def _runtime_name(name: str) -> bool:
    last = name.strip().rsplit(".", 1)[-1].lower()
    return last in RUNTIME_NAMES or last.endswith(RUNTIME_SUFFIXES)


def _runtime_marker(one: Interpolation) -> str | None:
    # ID-5: a plain reference, or oc.env/oc.select of a runtime setting, is a
    # connection reference; its value moves on every launch.
    if one.resolver not in (None, "oc.env", "oc.select"):
        return None
    return f"<runtime:{one.name}>" if _runtime_name(one.name) else None


def runtime_references(value: Any) -> Any:
    """Interpolations of runtime settings rewritten as ``<runtime:NAME>`` (ID-5)."""
    return _map_strings(
        value, lambda text: replace_interpolations(text, _runtime_marker)
    )


def refuse_directives(value: Any, *, where: str) -> None:
    """Refuse NeMo Gym loader directives its loader should have expanded (ID-8)."""
    path = next(iter(_directive_paths(value, ())), None)
    if path is not None:
        raise ConfigError(
            f"the {where} holds the unexpanded directive {join_key(path)}; load it "
            "through NeMo Gym's configuration loader, which expands _inherit_from "
            "and _copy",
            key=join_key(path),
        )


def _directive_paths(value: Any, path: tuple[str, ...]) -> Iterable[tuple[str, ...]]:
    if isinstance(value, dict):
        for key, item in value.items():
            if key in _DIRECTIVES:
                yield (*path, key)
            yield from _directive_paths(item, (*path, key))
    elif isinstance(value, list):
        for item in value:
            yield from _directive_paths(item, path)


def get_path(mapping: Mapping[str, Any], dotted: str) -> Any:
    """The value at a dotted key, or a private sentinel when absent."""
    node: Any = mapping
    for segment in split_key(dotted):
        if not isinstance(node, Mapping) or segment not in node:
            return _MISSING
        node = node[segment]
    return node


def has_path(mapping: Mapping[str, Any], dotted: str) -> bool:
    """Whether a dotted key is present."""
    return get_path(mapping, dotted) is not _MISSING


def set_path(mapping: dict[str, Any], dotted: str, value: Any) -> None:
    """Set the value at a dotted key, creating mappings on the way."""
    *parents, last = split_key(dotted)
    node = mapping
    for segment in parents:
        child = node.get(segment)
        if not isinstance(child, dict):
            child = node[segment] = {}
        node = child
    node[last] = value


def delete_path(mapping: dict[str, Any], dotted: str) -> None:
    """Remove the setting at a dotted key, if present."""
    *parents, last = split_key(dotted)
    node: Any = mapping
    for segment in parents:
        node = node.get(segment) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(last, None)


def drop_nulls(settings: dict[str, Any], null_defaults: Iterable[str]) -> None:
    """Drop the settings whose registered default and value are both null (ID-6)."""
    for dotted in sorted(null_defaults):
        if has_path(settings, dotted) and get_path(settings, dotted) is None:
            delete_path(settings, dotted)


def _file_value(value: str, key: str) -> Any:
    try:
        info = os.stat(value)
    except (OSError, ValueError):
        return value  # ID-9: a path that names no file stays a string
    if not stat.S_ISREG(info.st_mode):
        return value
    if info.st_size > key_tables.FILE_VALUE_MAX_BYTES:
        return {"path": value, "size": info.st_size}
    try:
        with open(value, "rb") as handle:
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError as exc:
        raise ConfigError(
            f"{key} names the file {value!r}, which cannot be read "
            f"({exc.strerror or exc}); make it readable or fix the setting",
            key=key,
            path=value,
        ) from None
    return {"path": value, "sha256": digest}


def file_values(
    settings: dict[str, Any],
    prefix: tuple[str, ...],
    is_semantic: Callable[[str], bool],
) -> None:
    """Replace semantic file-valued settings by path and content digest (ID-9).

    Only mappings are walked: a list is one value (ID-20), so a path inside a
    list element stays a string. A regular file that exists but cannot be read
    is a :class:`ConfigError` rather than a silent path-only identity.
    """
    for key, value in settings.items():
        path = (*prefix, key)
        if isinstance(value, dict):
            file_values(value, path, is_semantic)
        elif (
            isinstance(value, str)
            and key.endswith(FILE_SUFFIXES)
            and is_semantic(join_key(path))
        ):
            settings[key] = _file_value(value, join_key(path))
