"""Server blocks of a global configuration and the ones a run can reach (ID-3, ID-4).

A top-level key is a server when its value maps a server kind to implementations
(ID-4). The servers a run reaches are the agents and environment servers its rows name
(ID-3, ID-41), then, walking breadth-first, every server a selected server's
resolved settings reference: ``{type: <kind>, name: <server>}`` mappings
anywhere in them, the mappings with a ``name`` under the reference settings
(``model_server``, ...) and, under those settings, a plain string naming a
configured server (``agent_server: math_agent``) (ID-3). Then every
environment server that routes rows to a reached server (its ``agent_server``,
or a reference to an agent or environment server) is reached too, and the walk
goes on from it, until nothing more is reached (ID-41).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Container, Iterable, Iterator, Mapping
from typing import Any

from ledger.errors import ConfigError
from ledger.identity.key_tables import (
    ENVIRONMENT_KIND,
    REFERENCE_KEYS,
    ROUTE_KEYS,
    ROUTE_KINDS,
    SERVER_KINDS,
)
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


def _found(
    value: Any, path: tuple[str, ...], known: Container[str]
) -> Iterator[tuple[Reference, bool]]:
    """Each reference in ``value`` and whether it routes rows (ID-3, ID-41)."""
    if isinstance(value, list):
        for item in value:
            yield from _found(item, path, known)
        return
    if not isinstance(value, Mapping):
        return
    name, kind = value.get("name"), value.get("type")
    # Any value may stand under "type" (a mapping is not hashable): only a
    # string names a server kind.
    if isinstance(name, str) and isinstance(kind, str) and kind in SERVER_KINDS:
        yield (name, kind, join_key(path)), kind in ROUTE_KINDS
    for key, item in value.items():
        where = join_key((*path, key))
        # A reference setting's mapping counts even without a (known) type; a
        # plain string there counts when it names a configured server.
        if isinstance(item, str) and key in REFERENCE_KEYS and item in known:
            yield (item, None, where), key in ROUTE_KEYS
        target = item.get("name") if isinstance(item, Mapping) else None
        typed = isinstance(item, Mapping) and _server_kind(item.get("type"))
        if key in REFERENCE_KEYS and isinstance(target, str) and not typed:
            yield (target, None, where), key in ROUTE_KEYS
        yield from _found(item, (*path, key), known)


def _server_kind(value: object) -> bool:
    return isinstance(value, str) and value in SERVER_KINDS


def _references(
    server: str, resolved: Mapping[str, Mapping[str, Any]], known: Container[str]
) -> Iterator[tuple[Reference, bool]]:
    for kind, impls in resolved.items():
        for impl, settings in impls.items():
            yield from _found(settings, (server, kind, impl), known)


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


def _routes_to(
    blocks: ServerBlocks,
    name: str,
    selected: Container[str],
    resolve: Resolve,
    resolved: dict[str, dict[str, dict[str, Any]] | None],
) -> bool:
    """Whether environment server ``name`` routes rows to a selected server (ID-41).

    Its settings are resolved once and kept in ``resolved``; one that cannot be
    resolved is judged by its literal settings (an unused server with an unset
    variable never fails), and resolved again, raising, when it routes.
    """
    if name not in resolved:
        try:
            resolved[name] = _resolved_server(blocks, name, resolve)
        except ConfigError:
            resolved[name] = None
    settings = resolved[name]
    found = _references(
        name, settings if settings is not None else blocks[name], blocks
    )
    routes = any(route and ref[0] in selected for ref, route in found)
    if routes and settings is None:
        _resolved_server(blocks, name, resolve)  # raises the ConfigError
    return routes


def reachable_servers(
    blocks: ServerBlocks,
    seeds: Iterable[Reference],
    resolve: Resolve,
    *,
    environments: bool = True,
) -> dict[str, dict[str, dict[str, Any]]]:
    """The reachable servers' resolved blocks (ID-3, ID-41).

    The walk goes breadth-first along references from the seeds; then each
    environment server routing rows to a reached server is added and walked
    from, until none is left. ``environments=False`` walks as before ID-41:
    mappings only, and no environment server reached by routing.

    Raises:
        ConfigError: a referenced server is missing or lacks the referenced kind.
    """
    queue = deque(_check(blocks, seed) for seed in seeds)
    selected: dict[str, dict[str, dict[str, Any]]] = {}
    known: Container[str] = blocks if environments else ()
    routers = (
        [n for n in blocks if ENVIRONMENT_KIND in blocks[n]] if environments else []
    )
    resolved: dict[str, dict[str, dict[str, Any]] | None] = {}
    while queue:
        while queue:
            name = queue.popleft()
            if name in selected:
                continue
            settings = resolved.get(name)
            selected[name] = settings or _resolved_server(blocks, name, resolve)
            for reference, _ in _references(name, selected[name], known):
                queue.append(_check(blocks, reference))
        queue.extend(
            name
            for name in routers
            if name not in selected
            and _routes_to(blocks, name, selected, resolve, resolved)
        )
    return selected
