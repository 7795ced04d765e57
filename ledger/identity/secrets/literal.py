"""Where a value meant to be copied into rows holds a credential (issue 25).

``create --dataset`` copies the collection's ``responses_create_params`` into
every materialized row, and from there into every plan, ``OUT`` and export.
The identity redacts a credential (ID-10..ID-15), but a row is data, written
as it is: a literal ``api_key`` or ``Authorization`` header there would be
written a million times. ``credential_paths`` names each place that holds one,
so the command can refuse before anything is written:

- a key named as a credential (ID-11: ``api_key``, ``Authorization``,
  ``x-api-key``, ``access_token``, ...) holding any value but ``null`` or an
  empty one;
- a string whose text is credential-shaped (ID-12: ``Bearer <token>``, a URL
  password, a provider token format such as ``sk-...`` or ``hf_...``), except
  inside the prompt (``input``, ``instructions``), where words like
  "password: ..." are an ordinary task, not a secret of the run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from ledger.identity.secrets.patterns import credential_named, redact_secrets

__all__ = ["PROMPT_KEYS", "credential_paths"]

#: Keys of ``responses_create_params`` that hold the task itself.
PROMPT_KEYS = frozenset({"input", "instructions", "messages", "prompt"})


def credential_paths(value: Any, *, where: str = "") -> Iterator[str]:
    """The dotted paths below ``value`` that hold a credential (see above)."""
    yield from _walk(value, where, prompt=False)


def _walk(value: Any, where: str, *, prompt: bool) -> Iterator[str]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            path = f"{where}.{key}" if where else str(key)
            if credential_named(str(key)) and item not in (None, "", {}, []):
                yield path
                continue
            inside = prompt or (not where.count(".") and key in PROMPT_KEYS)
            yield from _walk(item, path, prompt=inside)
    elif isinstance(value, list | tuple):
        for number, item in enumerate(value):
            yield from _walk(item, f"{where}[{number}]", prompt=prompt)
    elif isinstance(value, str) and not prompt and redact_secrets(value) != value:
        yield where
