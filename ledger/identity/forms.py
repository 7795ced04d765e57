"""The identity as earlier collectors recorded it (ID-35, ID-36).

A run saved by an earlier collector carries a digest of an identity taken before
some collection settings existed (ID-35), or with null defaults written out that
are absent now (ID-36). These forms let ``RunManifest.matches_config`` recognize
such a digest. The registries are read from
:mod:`ledger.identity.registries` at call time.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator, Mapping
from typing import Any

from ledger.identity import registries
from ledger.identity.drift import diff_keys
from ledger.identity.key_words import join_key, split_key
from ledger.identity.normalize import delete_path, get_path, has_path, set_path

__all__ = [
    "added_at_default",
    "earlier_collection_forms",
    "earlier_forms",
    "restored_null_defaults",
]

_ABSENT = object()


def _choices(collection: Mapping[str, Any], setting: str, default: Any) -> list[Any]:
    # ID-35: before the setting existed (absent), restored at its default, and
    # at the value this configuration sets.
    choices: list[Any] = [_ABSENT, default]
    if has_path(collection, setting):
        choices.append(get_path(collection, setting))
    return choices


def earlier_collection_forms(identity: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every combination of the added collection settings' earlier forms (ID-35)."""
    added = dict(sorted(registries.ADDED_COLLECTION_SETTINGS.items()))
    collection = identity.get("collection", {})
    options = [_choices(collection, name, default) for name, default in added.items()]
    for combination in itertools.product(*options):
        form = copy.deepcopy(dict(identity))
        for name, value in zip(added, combination, strict=True):
            if value is _ABSENT:
                delete_path(form["collection"], name)
            else:
                set_path(form["collection"], name, copy.deepcopy(value))
        yield form


def restored_null_defaults(identity: Mapping[str, Any]) -> dict[str, Any]:
    """The identity with every removed null default restored where absent (ID-36).

    Restoration is per concrete server path: a setting is added only to a server
    that lacks it, never over a value another server of the same implementation sets.
    """
    form = copy.deepcopy(dict(identity))
    for kinds in form.get("servers", {}).values():
        for kind, impls in kinds.items():
            for impl, settings in impls.items():
                removed = registries.scope_settings(
                    registries.REMOVED_NULL_DEFAULTS, kind, impl
                )
                for setting in sorted(removed):
                    if not has_path(settings, setting):
                        set_path(settings, setting, None)
    return form


def earlier_forms(identity: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every earlier form of ID-35, alone and with ID-36's null defaults restored."""
    yield from earlier_collection_forms(identity)
    restored = restored_null_defaults(identity)
    if diff_keys(restored, identity):
        yield from earlier_collection_forms(restored)


def added_at_default(
    saved: Mapping[str, Any], current: Mapping[str, Any]
) -> frozenset[str]:
    """Keys only the current identity has that are added settings at their default.

    REC-53 ignores them when comparing a saved identity with the current one.
    """
    now, then = current.get("collection", {}), saved.get("collection", {})
    return frozenset(
        join_key(("collection", *split_key(name)))
        for name, default in registries.ADDED_COLLECTION_SETTINGS.items()
        if has_path(now, name)
        and not has_path(then, name)
        and not diff_keys({"v": get_path(now, name)}, {"v": default})
    )
