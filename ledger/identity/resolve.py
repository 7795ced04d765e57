"""Resolving the interpolations left after normalization and redaction (ID-8).

The context is the (already redacted) global configuration with the collection
settings beside it, so relative and global references resolve as the collector
resolves them. OmegaConf does the resolving; only the parts that enter the
identity are resolved, so an unused server with an unset environment variable
never fails. Every failure is a :class:`~ledger.errors.ConfigError` naming the
dotted key; in the unredacted form (ID-14) the message holds no value at all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue, OmegaConfBaseException

from ledger.errors import ConfigError
from ledger.identity.secrets.redact import Redactor

__all__ = ["ConfigContext"]


def _where(path: tuple[str | int, ...]) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text.lstrip(".")


def _unparsable(
    value: Any, path: tuple[str | int, ...]
) -> tuple[str | int, ...] | None:
    """The path of the first string OmegaConf cannot parse, if any."""
    if isinstance(value, str) and "${" in value:
        try:
            OmegaConf.create({"v": value})
        except OmegaConfBaseException:
            return path
    items = (
        value.items()
        if isinstance(value, Mapping)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, item in items:
        found = _unparsable(item, (*path, key))
        if found is not None:
            return found
    return None


class ConfigContext:
    """An OmegaConf view of one normalized configuration, resolved part by part."""

    def __init__(
        self, context: Mapping[str, Any], *, redactor: Redactor | None
    ) -> None:
        """``redactor`` is ``None`` for the unredacted form (ID-14)."""
        self._redactor = redactor
        try:
            self._root = OmegaConf.create(dict(context))
        except OmegaConfBaseException as exc:
            raise self._error(_unparsable(context, ()) or (), exc) from None

    def resolve(self, path: tuple[str, ...]) -> Any:
        """The resolved plain value at a path of keys (ID-8)."""
        node: Any = self._root
        for index, key in enumerate(path):
            node = self._child(node, key, path[: index + 1])
        return self._plain(node, path)

    def _child(self, node: Any, key: str | int, path: tuple[str | int, ...]) -> Any:
        try:
            return node[key]
        except OmegaConfBaseException as exc:
            raise self._error(path, exc) from None

    def _plain(self, node: Any, path: tuple[str | int, ...]) -> Any:
        if isinstance(node, DictConfig):
            keys = [str(key) for key in node]
            return {
                key: self._plain(self._child(node, key, (*path, key)), (*path, key))
                for key in keys
            }
        if isinstance(node, ListConfig):
            return [
                self._plain(self._child(node, index, (*path, index)), (*path, index))
                for index in range(len(node))
            ]
        return node

    def _error(self, path: tuple[str | int, ...], exc: Exception) -> ConfigError:
        key = _where(path)
        where = key or "the top level"
        if isinstance(exc, MissingMandatoryValue):
            return ConfigError(
                f"{where} is ??? (a value the configuration must supply); set it, "
                f"for example with ++{key}=...",
                key=key,
            )
        # ID-14: an unredacted form's failure never shows a value.
        detail = (
            f": {self._redactor.text(str(exc).splitlines()[0], resolved=True)}"
            if self._redactor is not None and str(exc)
            else ""
        )
        return ConfigError(
            f"the interpolation at {where} cannot be resolved{detail}; define what "
            "it references or set the environment variable it reads",
            key=key,
        )
