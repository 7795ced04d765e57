"""Configuration values as plain JSON-like data (ID-2).

OmegaConf containers (also nested inside a pydantic model's Python dump) are
converted without resolving interpolations and without failing on ``???``,
pydantic models are dumped (Python mode, every field), dataclasses become
mappings of their fields, tuples become lists, paths become strings and enums
their values. A set becomes a list in a fixed order (that of its elements'
canonical JSON), so nothing depends on ``PYTHONHASHSEED``. A mapping key that is
not a string becomes its JSON text (``1`` is ``"1"``, ``True`` is ``"true"``).
Anything else (bytes, arbitrary objects) is a :class:`~ledger.errors.ConfigError`
naming its dotted key, since an identity holds JSON values only.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

import msgspec
from omegaconf import DictConfig, ListConfig, OmegaConf
from pydantic import BaseModel

from ledger.errors import ConfigError
from ledger.identity.key_words import join_key

__all__ = ["to_plain"]

_SCALARS = (str, int, float, bool, type(None))


def _key_text(key: Any, path: tuple[str, ...]) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, enum.Enum):
        key = key.value
    if isinstance(key, _SCALARS):
        return msgspec.json.encode(key).decode()
    raise ConfigError(
        f"the configuration key {key!r} at {join_key(path) or 'the top level'} "
        "is not a string or a number",
        key=join_key(path),
    )


def _plain_mapping(value: Mapping[Any, Any], path: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        text = _key_text(key, path)
        if text in out:
            raise ConfigError(
                f"the keys at {join_key((*path, text))} collide once written as "
                "JSON strings; rename one of them",
                key=join_key((*path, text)),
            )
        out[text] = _plain(item, (*path, text))
    return out


def _plain_set(value: set[Any] | frozenset[Any], path: tuple[str, ...]) -> list[Any]:
    items = [_plain(item, path) for item in value]
    return sorted(items, key=lambda item: msgspec.json.encode(item, order="sorted"))


def _plain_object(value: Any, path: tuple[str, ...]) -> Any:
    if isinstance(value, DictConfig | ListConfig):
        container = OmegaConf.to_container(value, resolve=False, throw_on_missing=False)
        return _plain(container, path)
    if isinstance(value, BaseModel):
        return _plain(value.model_dump(mode="python"), path)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return _plain_mapping(fields, path)
    if isinstance(value, enum.Enum):
        return _plain(value.value, path)
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, set | frozenset):
        return _plain_set(value, path)
    raise ConfigError(
        f"the configuration value at {join_key(path) or 'the top level'} is a "
        f"{type(value).__name__}, which a configuration identity cannot hold; "
        "use a JSON value (string, number, boolean, null, list or mapping)",
        key=join_key(path),
    )


def _plain(value: Any, path: tuple[str, ...]) -> Any:
    if isinstance(value, _SCALARS) and not isinstance(value, enum.Enum):
        return value
    # DictConfig is a Mapping whose items() would resolve interpolations.
    if isinstance(value, DictConfig | ListConfig):
        return _plain_object(value, path)
    if isinstance(value, Mapping):
        return _plain_mapping(value, path)
    if isinstance(value, list | tuple):
        return [_plain(item, path) for item in value]
    return _plain_object(value, path)


def to_plain(value: Any) -> Any:
    """A configuration value as plain dicts, lists and JSON scalars (ID-2)."""
    return _plain(value, ())
