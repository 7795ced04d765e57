"""Credential-shaped values inside text: the one set of patterns (ID-11, ID-12).

Every redaction of the ledger uses these patterns: the identity's
(:mod:`ledger.identity.secrets.redact`, which keeps ``${...}`` interpolations
whole around them), the strings a row brings into the log (omission reasons,
failure kinds and messages), the messages a user reads, and what the commands
print. :func:`redact_secrets` replaces, in any text:

- the password of a URL (``scheme://user:pw@host``, ``scheme+driver://`` too);
- the credential of ``Bearer ...`` (any case) and ``Basic ...``;
- ``NAME=value``, ``NAME: value`` and ``--NAME value`` for a credential-named
  ``NAME`` (ID-11): ``HF_TOKEN=...``, ``?api_key=...&``, ``--api-key X``,
  ``--token=X``, ``Authorization: basic ...``, ``"password": "..."``;
- the token formats providers issue, recognizable without a name: OpenAI and
  Anthropic ``sk-...``, Hugging Face ``hf_...``, GitHub ``ghp_``/``gho_``/
  ``ghu_``/``ghs_``/``ghr_``/``github_pat_...``, GitLab ``glpat-...``, Slack
  ``xox[abposr]-...``, AWS access key ids ``AKIA``/``ASIA...``, Google
  ``AIza...``, NVIDIA ``nvapi-...``, JSON Web Tokens ``eyJ....eyJ...`` and PEM
  private keys;
- and the exact values a caller already knows to be credentials (``known``: the
  values found below credential-named keys, so a YAML alias that repeats one
  under another key is caught), as whole tokens.

Each credential becomes the fixed marker ``<redacted>`` (ID-10), so a
redacted text does not change when only a credential value rotates (ID-15).
Over-redaction of an ambiguous name is accepted where the alternative is a
leak (ID-11): an HTTP ``Basic`` followed by a word in prose loses that word.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ledger.identity.key_tables import CREDENTIAL_FRAGMENTS, REDACTED, TOKEN_QUALIFIERS
from ledger.identity.key_words import key_words

__all__ = [
    "MIN_KNOWN_LENGTH",
    "credential_named",
    "redact_secrets",
]

#: A value found below a credential-named key is searched for elsewhere only
#: when it is at least this long: shorter ones ("EMPTY", "dummy") are
#: placeholders, and replacing them everywhere would redact ordinary words.
MIN_KNOWN_LENGTH = 8


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


# ID-12: "Bearer <token>" / "Basic <token>" anywhere in a string. Lowercase
# "basic" is everyday prose, so only the header spellings of Basic count here;
# after a credential-named name ("Authorization: basic ...") any case does.
_AUTH_SCHEME = r"(?:[Bb][Ee][Aa][Rr][Ee][Rr]|Basic|BASIC)"
_BEARER = re.compile(rf"(?<![A-Za-z0-9_]){_AUTH_SCHEME}(\s+)([^\s\"']+)")
_NAMED_SCHEME = r"(?i:bearer|basic|token|digest)"
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
_VALUE = rf"(?P<value>{_NAMED_SCHEME}\s+[^\s\"']+|\"[^\"]*\"?|'[^']*'?|[^\s&;,\"']+)"
_ASSIGNED = re.compile(rf"(?P<sep>[\"']?\s*[=:]\s*){_VALUE}")
_FLAG_VALUE = re.compile(rf"(?P<sep>\s+){_VALUE}")
# Token formats providers issue, each whole (the prefix included).
_TOKENS = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"sk-[A-Za-z0-9_\-]{16,}"
    r"|hf_[A-Za-z0-9]{20,}"
    r"|gh[pousr]_[A-Za-z0-9]{20,}"
    r"|github_pat_[A-Za-z0-9_]{20,}"
    r"|glpat-[A-Za-z0-9_\-]{20,}"
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}(?![0-9A-Z])"
    r"|AIza[0-9A-Za-z_\-]{35}"
    r"|nvapi-[A-Za-z0-9_\-]{20,}"
    r"|eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}(?:\.[A-Za-z0-9_\-]*)?"
    r")"
)
_PEM = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)",
    re.DOTALL,
)
# A text none of whose characters could start a credential needs no pattern:
# the fast path for the short strings rows carry ("timeout", "http_error").
_TRIGGER = re.compile(
    r"[=:\-]|[Bb][Ee][Aa][Rr][Ee][Rr]|Basic|BASIC|hf_|gh[pousr]_|github_pat_|"
    r"AKIA|ASIA|AIza|eyJ"
)


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


def _redact_known(text: str, known: Iterable[str]) -> str:
    for secret in known:  # longest first, so a longer one is never split
        if secret in text:
            # Whole tokens only: never the middle of a longer word or name.
            bounded = rf"(?<![A-Za-z0-9]){re.escape(secret)}(?![A-Za-z0-9])"
            text = re.sub(bounded, REDACTED, text)
    return text


def redact_secrets(text: str, known: Iterable[str] = ()) -> str:
    """``text`` with every credential-shaped value replaced by ``<redacted>``.

    The patterns apply to the whole text, ``${...}`` included (for values and
    messages; the identity keeps interpolations whole, see
    :func:`ledger.identity.secrets.redact.redact_text`). ``known`` are exact
    credential values to replace wherever they occur, longest first.
    """
    text = _redact_known(text, known)
    if _TRIGGER.search(text) is None:
        return text
    text = _PEM.sub(REDACTED, text)
    text = _redact_assignments(text)
    text = _BEARER.sub(lambda m: f"{m.group(0)[: -len(m.group(2))]}{REDACTED}", text)
    text = _URL_PASSWORD.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)
    return _TOKENS.sub(REDACTED, text)
