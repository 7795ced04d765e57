"""The registries configuration identity reads at call time (ID-17).

They are module-level data, read anew on every call, so a test may replace one
with ``monkeypatch.setattr(registries, "NULL_DEFAULTS", {...})``.

A *scope* names where a server-side entry applies: ``"collection"`` for the
collection settings, a server kind (``"resources_servers"``: every server of that
kind), or ``"<kind>.<implementation>"`` (every server of that implementation).
Settings are dotted keys inside the scope's settings (``responses_create_params.seed``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "ADDED_COLLECTION_SETTINGS",
    "COLLECTION",
    "NULL_DEFAULTS",
    "REMOVED_NULL_DEFAULTS",
    "scope_settings",
]

#: The scope of the collection settings.
COLLECTION = "collection"

#: ID-6: settings whose default is ``null``; there an explicit ``null`` and an
#: absent setting are the same, so a ``null`` one is dropped from the identity.
NULL_DEFAULTS: Mapping[str, frozenset[str]] = {
    COLLECTION: frozenset(
        {"prompt_config", "skills", "limit", "responses_create_params.seed"}
    ),
    "resources_servers": frozenset({"judge_model_server"}),
}

#: ID-35: collection settings added over time, with their defaults. A collector
#: from before a setting existed recorded an identity without it.
ADDED_COLLECTION_SETTINGS: Mapping[str, Any] = {
    "num_repeats_add_seed": False,
    "prompt_config": None,
    "skills": None,
}

#: ID-36: settings an earlier collector wrote as explicit ``null`` defaults and
#: that are now absent, by scope. None yet.
REMOVED_NULL_DEFAULTS: Mapping[str, frozenset[str]] = {}


def scope_settings(
    registry: Mapping[str, frozenset[str]], kind: str, implementation: str
) -> frozenset[str]:
    """The settings a registry lists for one server (its kind and implementation)."""
    return registry.get(kind, frozenset()) | registry.get(
        f"{kind}.{implementation}", frozenset()
    )
