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
one string or as two items of a list), ``{key: X, value: ...}`` entries, a
mapping key that holds a credential (a URL with a password used as a key), the
token formats providers issue (``sk-...``, ``hf_...``, ...), and a value found
below a credential-named key wherever else it occurs (a YAML alias repeats it
under another key). The text patterns are the one set of
:mod:`ledger.identity.secrets.patterns`, which every other redaction uses too.

Redaction runs twice for an identity (:class:`Redactor`): before resolving, on
the configuration as written (so a credential-named interpolation is never
read), and after, on the resolved values (a value an ``${oc.env:...}`` of an
innocent name, a default, ``oc.select``, ``oc.decode`` or ``oc.create`` brought
in); both with the same known credential values, so rotating one changes
nothing (ID-15).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from ledger.identity.interpolations import Interpolation, replace_interpolations
from ledger.identity.key_tables import REDACTED
from ledger.identity.plain_data import to_plain
from ledger.identity.secrets.patterns import (
    MIN_KNOWN_LENGTH,
    credential_named,
    redact_secrets,
)

__all__ = [
    "REDACTED",
    "Redactor",
    "credential_interpolation",
    "credential_named",
    "credential_safe",
    "redact_secrets",
    "redact_text",
]


#: Resolvers whose first argument is a value, not the name of a variable or a
#: setting: what they make is judged by its value once resolved.
_VALUE_RESOLVERS = frozenset({"oc.decode", "oc.create"})


def credential_interpolation(one: Interpolation) -> bool:
    """Whether an interpolation reads a credential-named variable or setting (ID-12)."""
    if one.resolver in _VALUE_RESOLVERS:
        # Its text is data ("{hdr: 'Bearer ...'}"): a word in it names nothing,
        # and judging it by name would make the identity depend on the secret.
        return any(credential_interpolation(inner) for inner in one.nested)
    names = [one.name] if one.resolver is None else [one.resolver, one.name]
    # A name built by another interpolation (${oc.env:${b}}) cannot be judged
    # before resolving, so it is treated as a credential (ID-11: no leak).
    if any(credential_named(name) or "${" in name for name in names if name):
        return True
    return any(credential_interpolation(inner) for inner in one.nested)


def _free_marker(text: str) -> str:
    # A private-use character the text does not hold, to stand in for the
    # interpolations left while the patterns run (so they stay atomic).
    return next(chr(c) for c in range(0xE000, 0xF900) if chr(c) not in text)


def redact_text(text: str, known: Iterable[str] = ()) -> str:
    """A configuration string with every credential of ID-12 replaced by the marker.

    A credential-named interpolation is replaced whole; the other interpolations
    stay as written (they are resolved later, and what they resolve to is
    redacted then), each held as one unit while the patterns of
    :func:`~ledger.identity.secrets.patterns.redact_secrets` run on the text around
    them, so a pattern never splits one (a password ``${oc.env:PW}`` is removed
    whole, ``${oc.env:X,default}`` is never cut into).
    """
    text = replace_interpolations(
        text, lambda one: REDACTED if credential_interpolation(one) else None
    )
    if "${" not in text:
        return redact_secrets(text, known)
    kept: list[str] = []
    marker = _free_marker(text)

    def hold(one: Interpolation) -> str:
        kept.append(text[one.start : one.end])
        return f"{marker}{len(kept) - 1}{marker}"

    held = redact_secrets(replace_interpolations(text, hold), known)
    return re.sub(rf"{marker}(\d+){marker}", lambda m: kept[int(m.group(1))], held)


def _credential_flag(item: Any) -> bool:
    return (
        isinstance(item, str)
        and item.startswith("-")
        and credential_named(item.lstrip("-"))
        and "=" not in item
    )


def _named_entry(mapping: Mapping[str, Any]) -> bool:
    # ID-12: {name: HF_TOKEN, value: ...} (environment-variable lists).
    names = (mapping.get("name"), mapping.get("key"))
    return "value" in mapping and any(
        isinstance(name, str) and credential_named(name) for name in names
    )


# An environment variable's name below a credential-named key
# ("api_key_name: OPENAI_API_KEY") names where a secret is; it is none.
_VARIABLE_NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")
# A lowercase word ("password", "changeme") or a phrase ("insert model api
# key") below a credential-named key is a placeholder; searched for elsewhere
# it would redact ordinary words.
_PLACEHOLDER = re.compile(r"[a-z]+|.*\s.*", re.DOTALL)


def _memorable(value: str) -> bool:
    """Whether a credential value is worth searching for elsewhere."""
    if len(value) < MIN_KNOWN_LENGTH or "${" in value or REDACTED in value:
        return False
    return not (_VARIABLE_NAME.fullmatch(value) or _PLACEHOLDER.fullmatch(value))


def _gather(value: Any, found: set[str], *, inside: bool) -> None:
    """The string values of ``value`` that sit at a credential's place (ID-12)."""
    if isinstance(value, str):
        if inside and _memorable(value):
            found.add(value)
    elif isinstance(value, Mapping):
        entry = _named_entry(value)
        for key, item in value.items():
            name = redact_secrets(key) if isinstance(key, str) else str(key)
            below = credential_named(name) or (entry and key == "value")
            _gather(item, found, inside=inside or below)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            after_flag = index > 0 and _credential_flag(value[index - 1])
            _gather(item, found, inside=inside or after_flag)


class Redactor:
    """One redaction of credentials, with the credential values a configuration holds.

    ``Redactor.of(*configs)`` remembers every string found below a
    credential-named key (and the other places of ID-12 that make a whole value
    a credential) that is long enough to search for; :meth:`safe` then replaces
    those values wherever else they occur too (a YAML anchor and alias repeat
    an ``api_key`` under an innocent key), besides every form of ID-12. The
    values are held in memory only; ``repr`` shows how many.
    """

    __slots__ = ("_known",)

    def __init__(self, known: Iterable[str] = ()) -> None:
        self._known = tuple(sorted(set(known), key=lambda s: (-len(s), s)))

    @classmethod
    def of(cls, *values: Any) -> Redactor:
        """A redactor knowing the credential values of plain ``values``."""
        found: set[str] = set()
        for value in values:
            _gather(value, found, inside=False)
        return cls(found)

    def __repr__(self) -> str:
        return f"Redactor(<{len(self._known)} known values, in memory>)"

    def text(self, text: str, *, resolved: bool = False, key: bool = False) -> str:
        """One string redacted: a configuration's (interpolations kept whole) or,
        ``resolved``, a final value or any other text (patterns everywhere).

        A mapping ``key`` gets the patterns only: a known value is searched for
        among values (a YAML alias repeats a value, never a key), and a key
        such as ``client_password`` keeps its name whatever its value is.
        """
        known = () if key else self._known
        if resolved:
            return redact_secrets(text, known)
        return redact_text(text, known)

    def safe(self, value: Any, *, resolved: bool = False) -> Any:
        """Plain ``value`` with every credential replaced by ``"<redacted>"``.

        Mapping keys are redacted like values (a URL with a password used as a
        key keeps its shape, not its password); a credential-named key keeps its
        name and loses its whole value.
        """
        if isinstance(value, str):
            return self.text(value, resolved=resolved)
        if isinstance(value, Mapping):
            entry = _named_entry(value)
            out: dict[str, Any] = {}
            for key, item in value.items():
                name = (
                    self.text(key, resolved=resolved, key=True)
                    if isinstance(key, str)
                    else key
                )
                # Judged on the redacted name, so a rotated secret inside a key
                # never changes whether its value counts as a credential.
                whole = credential_named(str(name)) or (entry and key == "value")
                out[name] = REDACTED if whole else self.safe(item, resolved=resolved)
            return out
        if isinstance(value, list):
            return [
                REDACTED
                if index > 0 and _credential_flag(value[index - 1])
                else self.safe(item, resolved=resolved)
                for index, item in enumerate(value)
            ]
        return value


def credential_safe(value: Any, *, resolved: bool = False) -> Any:
    """The value as plain data with every credential replaced by ``"<redacted>"``.

    A credential-named key keeps its name and loses its whole value (``null``
    included, so the identity never tells whether a credential was set).
    Interpolations are not resolved: a credential-named one is replaced whole.
    A value found below a credential-named key is replaced wherever else it
    occurs in ``value`` too. ``resolved=True`` takes ``value`` as final values
    (an identity, a message): a ``${...}`` in it is text, and the patterns apply
    to it like to any other text.
    """
    plain = to_plain(value)
    return Redactor.of(plain).safe(plain, resolved=resolved)
