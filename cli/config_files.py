"""NeMo Gym's configuration files, read as they are, each given where it belongs.

A NeMo Gym user has two kinds of file. The server configurations (the YAML
files ``ng_run "+config_paths=[...]"`` takes, e.g.
``resources_servers/<name>/configs/<name>.yaml``, and ``env.yaml``) hold the
server blocks ``<server>: {<kind>: {<implementation>: {...}}}``: they are
``--global-config``. The collection settings (what ``ng_collect_rollouts``
takes on its command line: ``agent_name``, ``input_jsonl_fpath``,
``num_repeats``, ``num_samples_in_parallel``, ...) written as a YAML file are
``--config``. A key given in the other file is refused, naming the file, the
key and the option it belongs to (exit 3), before anything is read from it;
which keys belong where is ``ledger``'s (``misplaced_in_collection``,
``misplaced_in_servers``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = [
    "CONFIG_HELP",
    "GLOBAL_CONFIG_HELP",
    "load_config",
    "load_global_config",
]

# Said in full once, in the glossary (``rollout-ledger explain config``,
# docs/glossary.md): each command's --help names the file in a line.
CONFIG_HELP = (
    "The collection settings (YAML or JSON); see `rollout-ledger explain config`."
)
GLOBAL_CONFIG_HELP = (
    "A server configuration; repeat to merge. See `rollout-ledger explain "
    "global-config`."
)


def _load(path: Path) -> Any:
    import yaml  # type: ignore[import-untyped]  # omegaconf's parser
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from ledger import ConfigError

    try:
        return OmegaConf.load(path)
    except RecursionError:
        raise ConfigError(
            f"cannot read the configuration {path}: it nests too deeply", path=path
        ) from None
    except (OSError, OmegaConfBaseException, ValueError, yaml.YAMLError) as exc:
        raise ConfigError(
            f"cannot read the configuration {path}: {_yaml_problem(exc)}", path=path
        ) from exc


def _yaml_problem(exc: Exception) -> str:
    """What is wrong, in a line: the parser's problem and where, not its context."""
    import yaml

    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem:
        mark = exc.problem_mark or exc.context_mark
        where = (
            ""
            if mark is None
            else f" at line {mark.line + 1}, column {mark.column + 1}"
        )
        problem = exc.problem
        if "expansion exceeds" in problem:  # omegaconf's guard against alias bombs
            problem = "its YAML aliases expand to too many values (an alias bomb?)"
        return f"{problem}{where}"
    text = str(exc)
    if "integer string conversion" in text:
        return "a number has more than 4300 digits"
    return text.splitlines()[0] if text else type(exc).__name__


def _plain(config: Any, path: str) -> dict[str, Any]:
    from omegaconf import DictConfig, OmegaConf

    from ledger import ConfigError

    if not isinstance(config, DictConfig):
        raise ConfigError(f"the configuration {path} is not a mapping", path=path)
    # ID-2, ID-8: interpolations stay as written; the identity resolves them.
    plain: dict[str, Any] = OmegaConf.to_container(
        config, resolve=False, throw_on_missing=False
    )  # type: ignore[assignment]
    return plain


def load_config(path: Path) -> dict[str, Any]:
    """A collection configuration as plain data, its interpolations unresolved.

    A server block (or ``config_paths``) in it is refused: it belongs in a
    ``--global-config``.
    """
    plain = _plain(_load(path), str(path))
    _refuse_server_keys(plain, path)
    return plain


def load_global_config(paths: Iterable[Path]) -> dict[str, Any]:
    """Global configurations merged in order, as Hydra merges them."""
    from omegaconf import OmegaConf

    configs = []
    for path in paths:
        config = _load(path)
        # Each file on its own, so the refusal names the file that holds the key.
        _refuse_collection_keys(_plain(config, str(path)), path)
        configs.append(config)
    if not configs:
        return {}
    names = ", ".join(str(path) for path in paths)
    return _plain(OmegaConf.merge(*configs), names)


def _refuse_server_keys(plain: dict[str, Any], path: Path) -> None:
    from ledger import ConfigError, misplaced_in_collection

    found = misplaced_in_collection(plain)
    if found is not None:
        key, what = found
        raise ConfigError(
            f"{path}: {key} is {what}; it belongs in a --global-config file, "
            "not in --config (which holds the collection settings)",
            key=key,
            path=path,
        )


def _refuse_collection_keys(plain: dict[str, Any], path: Path) -> None:
    from ledger import ConfigError, misplaced_in_servers

    key = misplaced_in_servers(plain)
    if key is not None:
        raise ConfigError(
            f"{path}: {key} is a collection setting; it belongs in the --config "
            "file, not in --global-config (which holds the server blocks)",
            key=key,
            path=path,
        )
