"""Server blocks of a global configuration and the ones a run can reach (ID-3, ID-4).

A top-level key is a server when its value maps a server kind to implementations
(ID-4). The servers a run reaches are the agents its rows name, then, walking
breadth-first, every server a selected server's resolved settings reference:
``{type: <kind>, name: <server>}`` mappings anywhere in them, and the mappings
with a ``name`` under the reference settings (``model_server``, ...) (ID-3).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from ledger.errors import ConfigError
from ledger.identity.key_tables import REFERENCE_KEYS, SERVER_KINDS
from ledger.identity.key_words import join_key

__all__ = ["Reference", "ServerBlocks", "reachable_servers", "server_blocks"]

#: ``{server: {kind: {implementation: settings}}}``, settings still unresolved.
ServerBlocks = dict[str, dict[str, dict[str, Any]]]
#: A referenced server: its name, the kind it must have (or None), and where.
Reference = tuple[str, str | None, str]
#: Resolves one server's ``(server, kind, implementation)`` settings (ID-8).
Resolve = Callable[[tuple[str, str, str]], Any]


def _kinds(value: Any) -> dict[str, dict[str, Any]] | None:
    if not isinstance(value, Mapping):
        return None
    kinds = {
        kind: dict(impls)
        for kind, impls in value.items()
        if kind in SERVER_KINDS and isinstance(impls, Mapping) and impls
    }
    return kinds or None


def server_blocks(global_config: Mapping[str, Any]) -> ServerBlocks:
    """The server blocks of a plain global configuration (ID-4)."""
    blocks: ServerBlocks = {}
    for name, value in global_config.items():
        kinds = _kinds(value)
        if kinds is not None:
            blocks[name] = kinds
    return blocks


def _references(value: Any, path: tuple[str, ...]) -> Iterator[Reference]:
    if isinstance(value, list):
        for item in value:
            yield from _references(item, path)
        return
    if not isinstance(value, Mapping):
        return
    name, kind = value.get("name"), value.get("type")
    if isinstance(name, str) and kind in SERVER_KINDS:
        yield name, kind, join_key(path)
    for key, item in value.items():
        # A reference setting's mapping counts even without a (known) type.
        target = item.get("name") if isinstance(item, Mapping) else None
        typed = isinstance(item, Mapping) and item.get("type") in SERVER_KINDS
        if key in REFERENCE_KEYS and isinstance(target, str) and not typed:
            yield target, None, join_key((*path, key))
        yield from _references(item, (*path, key))


def _check(blocks: ServerBlocks, reference: Reference) -> str:
    name, kind, where = reference
    if name not in blocks:
        raise ConfigError(
            f"server {name!r} (named at {where}) is not in the configuration; add "
            "its block (for example through config_paths) or fix the reference",
            key=where,
        )
    if kind is not None and kind not in blocks[name]:
        raise ConfigError(
            f"server {name!r} (named at {where} as {kind}) has no {kind} block; "
            f"it configures {', '.join(sorted(blocks[name]))}",
            key=where,
        )
    return name


def _resolved_server(
    blocks: ServerBlocks, name: str, resolve: Resolve
) -> dict[str, dict[str, Any]]:
    resolved: dict[str, dict[str, Any]] = {}
    for kind, impls in blocks[name].items():
        resolved[kind] = {impl: resolve((name, kind, impl)) for impl in impls}
        for impl, settings in resolved[kind].items():
            if not isinstance(settings, Mapping):
                raise ConfigError(
                    f"the server block {join_key((name, kind, impl))} is not a "
                    "mapping of settings",
                    key=join_key((name, kind, impl)),
                )
    return resolved


def reachable_servers(
    blocks: ServerBlocks, seeds: Iterable[Reference], resolve: Resolve
) -> dict[str, dict[str, dict[str, Any]]]:
    """The reachable servers' resolved blocks, walking references breadth-first (ID-3).

    Raises:
        ConfigError: a referenced server is missing or lacks the referenced kind.
    """
    queue = deque(_check(blocks, seed) for seed in seeds)
    selected: dict[str, dict[str, dict[str, Any]]] = {}
    while queue:
        name = queue.popleft()
        if name in selected:
            continue
        selected[name] = _resolved_server(blocks, name, resolve)
        for kind, impls in selected[name].items():
            for impl, settings in impls.items():
                found = _references(settings, (name, kind, impl))
                queue.extend(_check(blocks, reference) for reference in found)
    return selected
