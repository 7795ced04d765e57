"""Credential redaction (ID-10..ID-15).

:func:`credential_safe` replaces every credential by the fixed marker
``"<redacted>"``. It runs before any interpolation is resolved, so a credential
is never read from the environment, and what it returns is what a run may
persist. Over-redaction of an ambiguous name is accepted where the alternative
is a leak (ID-11): an HTTP ``Basic`` followed by a word in prose loses that
word, for example.

Beyond the forms ID-12 lists, the same rules catch a credential written as
``name: value`` inside a string (a header line, a JSON or YAML fragment), a
credential-named command-line flag followed by its value (``--api-key abc``, in
one string or as two items of a list), and ``{key: X, value: ...}`` entries.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ledger.identity.interpolations import Interpolation, replace_interpolations
from ledger.identity.key_tables import CREDENTIAL_FRAGMENTS, REDACTED, TOKEN_QUALIFIERS
from ledger.identity.key_words import key_words
from ledger.identity.plain_data import to_plain

__all__ = [
    "REDACTED",
    "credential_interpolation",
    "credential_named",
    "credential_safe",
    "redact_text",
]


def credential_named(key: str) -> bool:
    """Whether a key (or variable) name names a credential (ID-11)."""
    words = key_words(key)
    normalized = "".join(words)
    if any(fragment in normalized for fragment in CREDENTIAL_FRAGMENTS):
        return True
    # ID-11: a last word "token" is a credential unless it is a vocabulary
    # token or a rate ("eos_token", "input_cost_per_token"); "tokens" counts.
    return (
        bool(words)
        and words[-1] == "token"
        and (len(words) < 2 or words[-2] not in TOKEN_QUALIFIERS)
    )


def credential_interpolation(one: Interpolation) -> bool:
    """Whether an interpolation reads a credential-named variable or setting (ID-12)."""
    names = [one.name] if one.resolver is None else [one.resolver, one.name]
    # A name built by another interpolation (${oc.env:${b}}) cannot be judged
    # before resolving, so it is treated as a credential (ID-11: no leak).
    if any(credential_named(name) or "${" in name for name in names if name):
        return True
    return any(credential_interpolation(inner) for inner in one.nested)


# ID-12: "Bearer <token>" / "Basic <token>" anywhere in a string. Lowercase
# "basic" is everyday prose, so only the header spellings of Basic count.
_AUTH_SCHEME = r"(?:[Bb][Ee][Aa][Rr][Ee][Rr]|Basic|BASIC)"
_BEARER = re.compile(rf"(?<![A-Za-z0-9_]){_AUTH_SCHEME}(\s+)([^\s\"']+)")
# ID-12: the password of a URL, up to the last "@" before the host. The scheme
# is bounded: unbounded, a long run of letters made the search quadratic (a
# 40,000-character value took 4 s); a longer scheme still matches its tail.
_URL_PASSWORD = re.compile(
    r"([A-Za-z][A-Za-z0-9+.\-]{0,63}://[^\s/?#@:]*:)([^\s/?#]*)@"
)
# ID-12: NAME=value, NAME: value and --NAME value, for a credential-named NAME.
# Only a credential-named name consumes what follows it, so a harmless
# "Note: api_key=..." still has its assignment found.
_NAME = re.compile(r"(?<![A-Za-z0-9_.\-])(-{1,2})?([A-Za-z_][A-Za-z0-9_.\-]*)")
_VALUE = rf"(?P<value>{_AUTH_SCHEME}\s+[^\s\"']+|\"[^\"]*\"?|'[^']*'?|[^\s&;,\"']+)"
_ASSIGNED = re.compile(rf"(?P<sep>[\"']?\s*[=:]\s*){_VALUE}")
_FLAG_VALUE = re.compile(rf"(?P<sep>\s+){_VALUE}")


def _redacted_value(value: str) -> str:
    if value[:1] in "\"'":
        closing = value[0] if len(value) > 1 and value[-1] == value[0] else ""
        return f"{value[0]}{REDACTED}{closing}"
    return REDACTED


def _redact_assignments(text: str) -> str:
    parts: list[str] = []
    last = pos = 0
    while (name := _NAME.search(text, pos)) is not None:
        pos = name.end()
        if not credential_named(name.group(2)):
            continue
        rest = _ASSIGNED.match(text, pos)
        if rest is None and name.group(1):
            rest = _FLAG_VALUE.match(text, pos)
        if rest is not None:
            parts.extend(
                (text[last : rest.start("value")], _redacted_value(rest["value"]))
            )
            last = pos = rest.end()
    parts.append(text[last:])
    return "".join(parts)


def _free_marker(text: str) -> str:
    # A private-use character the text does not hold, to stand in for the
    # interpolations left while the patterns run (so they stay atomic).
    return next(chr(c) for c in range(0xE000, 0xF900) if chr(c) not in text)


def _redact_patterns(text: str) -> str:
    text = _redact_assignments(text)
    text = _BEARER.sub(lambda m: f"{m.group(0)[: -len(m.group(2))]}{REDACTED}", text)
    if "://" not in text:
        return text
    return _URL_PASSWORD.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)


def redact_text(text: str) -> str:
    """A string with every credential of ID-12 replaced by the marker."""
    text = replace_interpolations(
        text, lambda one: REDACTED if credential_interpolation(one) else None
    )
    if "${" not in text:
        return _redact_patterns(text)
    # Interpolations still present stand in as one marker character each, so a
    # pattern never splits one (a password "${oc.env:PW}" is removed whole).
    kept: list[str] = []
    marker = _free_marker(text)

    def hold(one: Interpolation) -> str:
        kept.append(text[one.start : one.end])
        return f"{marker}{len(kept) - 1}{marker}"

    held = _redact_patterns(replace_interpolations(text, hold))
    return re.sub(rf"{marker}(\d+){marker}", lambda m: kept[int(m.group(1))], held)


def _credential_flag(item: Any) -> bool:
    return (
        isinstance(item, str)
        and item.startswith("-")
        and credential_named(item.lstrip("-"))
        and "=" not in item
    )


def _safe_list(items: list[Any]) -> list[Any]:
    out: list[Any] = []
    for index, item in enumerate(items):
        after_flag = index > 0 and _credential_flag(items[index - 1])
        out.append(REDACTED if after_flag else _safe(item))
    return out


def _named_entry(mapping: Mapping[str, Any]) -> bool:
    # ID-12: {name: HF_TOKEN, value: ...} (environment-variable lists).
    names = (mapping.get("name"), mapping.get("key"))
    return "value" in mapping and any(
        isinstance(name, str) and credential_named(name) for name in names
    )


def _safe_mapping(mapping: Mapping[str, Any]) -> dict[str, Any]:
    entry = _named_entry(mapping)
    return {
        key: REDACTED
        if credential_named(key) or (entry and key == "value")
        else _safe(value)
        for key, value in mapping.items()
    }


def _safe(value: Any) -> Any:
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return _safe_mapping(value)
    if isinstance(value, list):
        return _safe_list(value)
    return value


def credential_safe(value: Any) -> Any:
    """The value as plain data with every credential replaced by ``"<redacted>"``.

    A credential-named key keeps its name and loses its whole value (``null``
    included, so the identity never tells whether a credential was set).
    Interpolations are not resolved: a credential-named one is replaced whole.
    """
    return _safe(to_plain(value))
