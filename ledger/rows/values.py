"""Type-tolerant readers of JSON values, shared by the row rules (ROW-24).

A row's content is never an error: a value of the wrong type is treated as
absent. Every reader here returns ``None`` (or an empty value) instead of
raising, whatever JSON value it is given, including huge integers and
non-finite floats.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Final, TypeGuard

from ledger.bounds import MAX_INDEX
from ledger.identity.secrets.patterns import redact_secrets

__all__ = [
    "MAX_COUNT",
    "as_count",
    "as_float",
    "as_int",
    "as_list",
    "as_mapping",
    "as_str",
    "as_timestamp",
    "brief",
    "dig",
    "is_mapping",
    "is_true",
]

_EMPTY: Mapping[str, Any] = MappingProxyType({})


#: Exact types of JSON values that are never a mapping.
_NOT_MAPPINGS: Final = frozenset({str, int, float, bool, list, tuple, type(None)})


def is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    """``isinstance(value, Mapping)``, answered without the ABC for JSON's types.

    Rows are dicts of JSON values; the ABC check costs more than the rest of
    a row rule (P-7: ``row_facts`` runs once per recorded row).
    """
    kind = type(value)
    if kind is dict or kind is MappingProxyType:  # a row's, or _EMPTY
        return True
    if kind in _NOT_MAPPINGS:
        return False
    return isinstance(value, Mapping)


def as_mapping(value: object) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else an empty one."""
    return value if is_mapping(value) else _EMPTY


def as_list(value: object) -> Sequence[Any] | None:
    """``value`` when it is a JSON array (list or tuple), else ``None``."""
    return value if isinstance(value, list | tuple) else None


def as_str(value: object) -> str | None:
    """``value`` when it is a non-empty string of valid Unicode, else ``None``.

    A string with a lone surrogate (which ``json.loads`` lets through from a
    ``"\\ud800"`` escape) cannot be encoded as UTF-8, so it is no text: absent.
    """
    if type(value) is str and value.isascii():  # the common case first (P-7)
        return value or None
    if not isinstance(value, str) or not value:
        return None
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return None
    return value


def as_float(value: object) -> float | None:
    """A finite float from a JSON number (never a bool), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer beyond the float range
        return None
    return number if math.isfinite(number) else None


def as_int(value: object) -> int | None:
    """An integer from a JSON integer or an integral float (never a bool)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    number = as_float(value)
    return int(number) if number is not None and number.is_integer() else None


#: The largest index or count a row may hold: a signed 64-bit integer, as
#: SQLite and every JSON reader of the events can store it.
MAX_COUNT: Final = MAX_INDEX  # the bound every stored index has (ledger/bounds.py)


def as_count(value: object) -> int | None:
    """A JSON integer (never a bool or float) from 0 to ``MAX_COUNT``, else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value <= MAX_COUNT else None


def is_true(value: object) -> bool:
    """Whether a flag is set: JSON ``true`` or the string ``"true"`` (any case)."""
    return value is True or (isinstance(value, str) and value.lower() == "true")


def as_timestamp(value: object) -> float | None:
    """Unix seconds from a JSON number or an ISO 8601 string (naive means UTC)."""
    if isinstance(value, str):
        return _iso_seconds(value)
    return as_float(value)


def _iso_seconds(text: str) -> float | None:
    try:
        moment = datetime.fromisoformat(text)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        seconds = moment.timestamp()
    except (ValueError, OverflowError, OSError):
        return None
    return seconds if math.isfinite(seconds) else None


def dig(value: object, *keys: str) -> object:
    """The value under ``keys`` in nested mappings, ``None`` where a step is missing."""
    for key in keys:
        if type(value) is dict:  # the common cases without a call (P-7)
            value = value.get(key)
        elif value is None or not is_mapping(value):
            return None
        else:
            value = value.get(key)
    return value


def brief(value: object, *, limit: int = 40) -> str:
    """A short, safe ``repr`` of a row's value for an error message.

    Safe: credential-shaped values are redacted before the text is cut short,
    so no prefix of a credential is ever shown (ID-13).
    """
    if value is None or isinstance(value, bool | int | float | str):
        try:
            text = redact_secrets(repr(value))
        except ValueError:  # an integer too long to print
            text = "<a very large integer>"
    else:
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."
