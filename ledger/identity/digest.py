"""Configuration identity: what a run's results depend on (ID-1..ID-9).

The identity document is::

    {"scheme": 1,
     "collection": {...collection settings...},
     "servers": {"<server>": {"<kind>": {"<implementation>": {...settings...}}}}}

Built in this order: plain data (ID-2); loader directives refused (ID-8);
credentials redacted (ID-10..ID-12) and connection references rewritten (ID-5)
everywhere, before anything is resolved; the reachable servers selected and
their settings resolved in the context of the whole configuration (ID-3, ID-8);
then reshaped under their concrete paths without their placement (ID-4, ID-7);
null defaults dropped (ID-6, applied to resolved values, so ``${oc.env:X,null}``
resolving to null is dropped too); the resolved values redacted once more (a
value an innocent ``${oc.env:DB_URL}``, a default, ``oc.select``, ``oc.decode``
or ``oc.create`` brought in: ID-12 holds for values, not only names); semantic
file-valued settings digested (ID-9).

Rows seed the selection with the agents their ``agent_ref.name`` names and the
environment servers their ``_ng_environment_server`` names (ID-41). Rows that
name no server fall back to the collection's ``agent_name``; with neither,
every server is part of the identity.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ledger.errors import ConfigError
from ledger.identity import registries
from ledger.identity.drift import classify_key
from ledger.identity.key_tables import ENVIRONMENT_KIND, PLACEMENT_KEYS, SERVER_KINDS
from ledger.identity.key_words import join_key
from ledger.identity.normalize import (
    drop_nulls,
    file_values,
    refuse_directives,
    runtime_references,
)
from ledger.identity.plain_data import to_plain
from ledger.identity.resolve import ConfigContext
from ledger.identity.secrets.redact import Redactor
from ledger.identity.servers import Reference, reachable_servers, server_blocks

__all__ = [
    "ENVIRONMENT_FIELD",
    "IDENTITY_SCHEME",
    "IdentityInputs",
    "config_identity",
    "counted_identity",
    "identity_digest",
    "identity_inputs",
    "identity_of",
]

logger = logging.getLogger("ledger")

#: The row field naming the environment server a row was routed through (ID-41).
ENVIRONMENT_FIELD = "_ng_environment_server"

#: The identity algorithm of this module (the manifest's ``identity_scheme``).
IDENTITY_SCHEME = 1


class IdentityInputs:
    """The plain configurations and server seeds an identity is computed from.

    ``earlier_seeds`` are the seeds before environment servers were part of a
    run (the rows' agents alone), for the identity a run created then recorded
    (ID-41). Held in memory only: they may hold credentials (ID-14), so their
    ``repr`` shows none of them.
    """

    __slots__ = ("collection", "earlier_seeds", "global_config", "seeds")

    def __init__(
        self,
        collection: dict[str, Any],
        global_config: dict[str, Any],
        seeds: tuple[Reference, ...],
        earlier_seeds: tuple[Reference, ...] | None = None,
    ) -> None:
        self.collection = collection
        self.global_config = global_config
        self.seeds = seeds
        self.earlier_seeds = seeds if earlier_seeds is None else earlier_seeds

    def environments_matter(self) -> bool:
        """Whether ID-41 may select other servers than before: rows name an
        environment server, or the configuration has one."""
        return self.seeds != self.earlier_seeds or any(
            isinstance(value, Mapping) and ENVIRONMENT_KIND in value
            for value in self.global_config.values()
        )

    def __repr__(self) -> str:
        return f"IdentityInputs(<{len(self.global_config)} global keys, in memory>)"


def _mapping(value: Any, name: str) -> dict[str, Any]:
    plain = {} if value is None else to_plain(value)
    if not isinstance(plain, dict):
        raise ConfigError(f"the {name} is a {type(plain).__name__}, not a mapping")
    return plain


def _row_seeds(index: int, row: Any) -> Iterator[Reference]:
    if not isinstance(row, Mapping):
        return
    ref = row.get("agent_ref")
    name = ref.get("name") if isinstance(ref, Mapping) else None
    if isinstance(name, str) and isinstance(ref, Mapping):
        kind = ref.get("type")
        yield (
            name,
            kind if isinstance(kind, str) and kind in SERVER_KINDS else None,
            f"row {index} agent_ref.name",
        )
    # ID-41: the environment server 0.7.0 routed the row through.
    environment = row.get(ENVIRONMENT_FIELD)
    if isinstance(environment, str):
        yield environment, None, f"row {index} {ENVIRONMENT_FIELD}"


def _seeds(
    rows: Iterable[Any], collection: Mapping[str, Any]
) -> tuple[tuple[Reference, ...], tuple[Reference, ...]]:
    """The seeds of ID-3 and ID-41, and those of ID-3 alone (the earlier ones)."""
    found: dict[tuple[str, str | None], Reference] = {}
    agents: dict[tuple[str, str | None], Reference] = {}
    for index, row in enumerate(rows):
        for seed in _row_seeds(index, row):
            found.setdefault(seed[:2], seed)
            if not seed[2].endswith(ENVIRONMENT_FIELD):
                agents.setdefault(seed[:2], seed)

    def chosen(
        named: dict[tuple[str, str | None], Reference],
    ) -> tuple[Reference, ...]:
        agent = collection.get("agent_name")
        if not named and isinstance(agent, str):
            return ((agent, None, "agent_name"),)
        return tuple(named[key] for key in sorted(named, key=str))

    return chosen(found), chosen(agents)


def identity_inputs(
    config: Any, global_config: Any, rows: Iterable[Any]
) -> IdentityInputs:
    """The plain inputs of :func:`identity_of` (ID-2, ID-3's seeds)."""
    collection = _mapping(config, "collection configuration")
    seeds, earlier = _seeds(rows, collection)
    return IdentityInputs(
        collection, _mapping(global_config, "global configuration"), seeds, earlier
    )


def _prepared(value: dict[str, Any], redactor: Redactor | None) -> dict[str, Any]:
    # ID-10: redaction comes before any resolving; ID-5 after it, so a
    # credential-named reference is redacted, never kept as a reference.
    safe = value if redactor is None else redactor.safe(value)
    rewritten: dict[str, Any] = runtime_references(safe)
    return rewritten


def _collection(context: ConfigContext, keys: Iterable[str]) -> dict[str, Any]:
    settings = {key: context.resolve((key,)) for key in keys}
    drop_nulls(
        settings, registries.NULL_DEFAULTS.get(registries.COLLECTION, frozenset())
    )
    return settings


def _settings(kind: str, impl: str, resolved: Mapping[str, Any]) -> dict[str, Any]:
    # ID-7: host and port in a server's own settings are its placement.
    settings = {
        key: value for key, value in resolved.items() if key not in PLACEMENT_KEYS
    }
    drop_nulls(
        settings, registries.scope_settings(registries.NULL_DEFAULTS, kind, impl)
    )
    return settings


def _servers(selected: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> dict[str, Any]:
    return {
        name: {
            kind: {
                impl: _settings(kind, impl, settings)
                for impl, settings in impls.items()
            }
            for kind, impls in kinds.items()
        }
        for name, kinds in selected.items()
    }


def _with_file_values(identity: dict[str, Any]) -> dict[str, Any]:
    def semantic(key: str) -> bool:
        return classify_key(key) == "semantic"

    file_values(identity["collection"], ("collection",), semantic)
    for name, kinds in identity["servers"].items():
        for kind, impls in kinds.items():
            for impl, settings in impls.items():
                file_values(settings, ("servers", name, kind, impl), semantic)
    return identity


def identity_of(
    inputs: IdentityInputs, *, credential_safe: bool = True, environments: bool = True
) -> dict[str, Any]:
    """The identity document of plain inputs (ID-1); see :func:`config_identity`.

    ``environments=False`` gives the identity as it was taken before
    environment servers were part of a run (ID-41): the rows' agents alone
    seed the walk, and no environment server is reached by routing.
    """
    refuse_directives(inputs.global_config, where="global configuration")
    refuse_directives(inputs.collection, where="collection configuration")
    redactor = (
        Redactor.of(inputs.global_config, inputs.collection)
        if credential_safe
        else None
    )
    collection = _prepared(inputs.collection, redactor)
    global_config = _prepared(inputs.global_config, redactor)
    context = ConfigContext({**global_config, **collection}, redactor=redactor)
    blocks = server_blocks(global_config)
    seeds = inputs.seeds if environments else inputs.earlier_seeds
    seeds = seeds or tuple((name, None, name) for name in sorted(blocks))
    selected = reachable_servers(
        blocks, seeds, context.resolve, environments=environments
    )
    identity: dict[str, Any] = {
        "scheme": IDENTITY_SCHEME,
        "collection": _collection(context, collection),
        "servers": _servers(selected),
    }
    if redactor is not None:  # ID-12 on what resolving brought in
        identity = redactor.safe(identity, resolved=True)
    return _with_file_values(identity)


def config_identity(
    config: Any,
    global_config: Any,
    rows: Iterable[Any],
    *,
    credential_safe: bool = True,
) -> dict[str, Any]:
    """The normalized, credential-safe identity of a run's configuration (ID-1).

    ``config`` is the collection configuration, ``global_config`` the merged
    server configuration (plain mappings, pydantic models, dataclasses or
    OmegaConf containers), ``rows`` the materialized input rows.
    ``credential_safe=False`` gives the unredacted form, resolved as an earlier
    collector resolved it (reading the environment); it exists only to be
    compared in memory (ID-14) and must never be written or logged.

    Raises:
        ConfigError: a referenced server is missing, an interpolation cannot be
            resolved, a value is ``???``, or a loader directive is unexpanded;
            the message names the dotted key and never holds a credential.
    """
    inputs = identity_inputs(config, global_config, rows)
    return identity_of(inputs, credential_safe=credential_safe)


def _refuse_nan(value: Any, path: tuple[str, ...]) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(
            f"{join_key(path)} is {value!r}; an identity refuses NaN and infinity",
            key=join_key(path),
        )
    if isinstance(value, Mapping):
        for key, item in value.items():
            _refuse_nan(item, (*path, str(key)))
    elif isinstance(value, list | tuple):
        for item in value:
            _refuse_nan(item, path)


def identity_digest(identity: Mapping[str, Any]) -> str:
    """The sha256 hex of an identity's canonical JSON (sorted keys, compact, UTF-8).

    Exactly ``json.dumps(identity, sort_keys=True, separators=(",", ":"),
    ensure_ascii=False, allow_nan=False)`` encoded as UTF-8, so anyone can
    recompute it with the standard library.
    """
    _refuse_nan(identity, ())
    try:
        text = json.dumps(
            identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"the identity is not JSON data ({exc})") from None
    return hashlib.sha256(text.encode()).hexdigest()


def counted_identity(
    identity: Mapping[str, Any] | None, config_digest: str, *, where: str
) -> dict[str, Any] | None:
    """The saved identity when its digest is the ``config_digest`` beside it (ID-33).

    Otherwise it is ignored with a warning naming ``where`` it came from, and
    the run can only be compared by digest.
    """
    if identity is None:
        return None
    try:
        matches = (
            isinstance(identity, Mapping) and identity_digest(identity) == config_digest
        )
    except ConfigError:
        matches = False
    if not matches:
        logger.warning(
            "the identity saved in %s is not the one its config_digest %s was "
            "taken from; it is ignored, so the run is compared by digest only",
            where,
            config_digest,
        )
        return None
    return dict(identity)
