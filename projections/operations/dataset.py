"""A NeMo Gym dataset expanded into materialized rows, as NeMo Gym 0.7.0 does (CLI-2).

``create --dataset`` starts a run from the dataset a NeMo Gym user has, rows
without indices, instead of rows a collector materialized already. The
expansion follows 0.7.0's ``RolloutCollectionHelper`` (``_preprocess_rows_from_config``
and ``_preprocess_raw_rows`` in ``nemo_gym/rollout_collection.py``), so the
materialized inputs file is byte for byte the one NeMo Gym would write:

- ``limit``: only the first ``limit`` lines are read (when it is set and not 0);
- ``agent_name`` fills ``agent_ref: {name}`` on a row without one (appended);
- ``responses_create_params`` of the collection overrides the row's, shallowly;
- ``_ng_task_index``: kept when the row has one, else identical lines share one,
  numbered in order of first appearance;
- ``num_repeats`` (a number): each row ``num_repeats`` times in a row (aabbcc),
  ``_ng_rollout_index`` counting per task index;
- ``num_repeats_add_seed``: ``metadata.extra_body`` (a JSON string) gets
  ``seed`` = the rollout index;
- each row written as compact JSON in its key order (what ``orjson.dumps``
  writes), one a line.

The options 0.7.0 has and this does not reproduce are refused by name
(``REFUSED_SETTINGS``), so a run never holds rows NeMo Gym would have expanded
otherwise.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import msgspec

from ledger import ConfigError, RowError, credential_paths, plural

__all__ = [
    "MAX_EXPANDED_BYTES",
    "MAX_EXPANDED_ROLLOUTS",
    "REFUSED_SETTINGS",
    "REPRODUCED_SETTINGS",
    "Expanded",
    "expand_dataset",
]

#: What ``create --dataset`` expands at most: the rollouts, and the bytes of
#: their materialized rows, which it holds in memory once (a million rollouts
#: is the scale the bench measures; five times that still fits this class of
#: machine). A larger run is split, or materialized by NeMo Gym (--inputs).
MAX_EXPANDED_ROLLOUTS = 5_000_000
MAX_EXPANDED_BYTES = 4 * 2**30

#: Collection settings the expansion reproduces.
REPRODUCED_SETTINGS = (
    "limit",
    "agent_name",
    "responses_create_params",
    "num_repeats",
    "num_repeats_add_seed",
)
#: Collection settings of 0.7.0's expansion that are refused, and why.
REFUSED_SETTINGS: dict[str, str] = {
    "prompt_config": "a prompt configuration rewrites each row's input",
    "skills": "skills stamp a skills reference computed from a folder",
    "agent_map": "routing rows to other agents",
    "fan_out": "fanning rows out to several agents",
    "interleave_repeats": "interleaving repeats (abcabc)",
}
_TASK = "_ng_task_index"
_ROLLOUT = "_ng_rollout_index"
_PARAMS = "responses_create_params"
_AGENT = "agent_ref"
_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder()


class Expanded(NamedTuple):
    """The materialized rows and the bytes of the file NeMo Gym would write."""

    rows: list[dict[str, Any]]
    data: bytes
    tasks: int


def _refuse_settings(config: Mapping[str, Any]) -> None:
    for key, what in REFUSED_SETTINGS.items():
        if config.get(key) not in (None, False, {}, []):
            raise ConfigError(
                f"the collection configuration sets {key} ({what}); create "
                "--dataset does not reproduce it. Let NeMo Gym materialize the "
                "rows and pass that file as --inputs",
                key=key,
            )


def _repeats(config: Mapping[str, Any], given: int | None) -> int:
    saved = config.get("num_repeats")
    if isinstance(saved, Mapping):
        raise ConfigError(
            "the collection configuration sets num_repeats per agent; create "
            "--dataset reproduces one number for every row. Let NeMo Gym "
            "materialize the rows and pass that file as --inputs",
            key="num_repeats",
        )
    if saved is not None and (isinstance(saved, bool) or not isinstance(saved, int)):
        raise ConfigError(
            f"num_repeats in the collection configuration is {saved!r}, not a number",
            key="num_repeats",
        )
    if saved is not None and given is not None and saved != given:
        raise ConfigError(
            f"--num-repeats {given} disagrees with num_repeats: {saved} in the "
            "collection configuration; give one of them, or the same number",
            key="num_repeats",
        )
    repeats = given if given is not None else saved if saved is not None else 1
    if repeats < 1:
        raise ConfigError(
            f"num_repeats must be at least 1 (found {repeats})", key="num_repeats"
        )
    return repeats


def _merged(under: Any, over: Any) -> Any:
    """``over`` merged onto ``under`` as OmegaConf merges: mappings key by key."""
    if isinstance(under, Mapping) and isinstance(over, Mapping):
        merged = dict(under)
        for key, value in over.items():
            merged[key] = _merged(merged.get(key), value) if key in merged else value
        return merged
    return over


def _check_size(path: Path, lines: list[bytes], repeats: int) -> None:
    """The expansion within ``MAX_EXPANDED_ROLLOUTS`` and ``MAX_EXPANDED_BYTES``.

    Checked from the dataset's lines before a row is expanded (issue 25: a
    ``--num-repeats`` of a billion grew until the OOM killer ended it).
    """
    rollouts = len(lines) * repeats
    size = sum(len(raw) for raw in lines) * repeats
    if rollouts <= MAX_EXPANDED_ROLLOUTS and size <= MAX_EXPANDED_BYTES:
        return
    raise ConfigError(
        f"{plural(len(lines), 'row')} of {path} repeated {repeats:,} times would make "
        f"{rollouts:,} rollouts (about {size / 2**30:,.1f} GiB of materialized rows); "
        f"a run made by create --dataset holds at most {MAX_EXPANDED_ROLLOUTS:,} "
        f"rollouts and {MAX_EXPANDED_BYTES // 2**30} GiB of rows: lower --num-repeats "
        "(or num_repeats), set limit, or split the dataset into several runs",
        key="num_repeats",
    )


def _refuse_credentials(
    value: Mapping[str, Any], where: str, *, line: int | None = None, root: str = ""
) -> None:
    """A literal credential that would be copied into rows, refused by name."""
    found = next(credential_paths(value, where=root), None)
    if found is None:
        return
    message = (
        f"{where}{found} holds a credential, and create --dataset would copy it "
        "into every materialized row (and from there into every plan, OUT and "
        "export); remove it, and give it to the model server instead: its "
        "--global-config file (the model server's api_key, set there from an "
        "environment variable: ${oc.env:OPENAI_API_KEY}), which NeMo Gym keeps "
        "out of the rows"
    )
    if line is None:
        raise ConfigError(message, key=found)
    raise RowError(message, key=found, line=line)


def _overrides(config: Mapping[str, Any], servers: Mapping[str, Any]) -> dict[str, Any]:
    # NeMo Gym reads the collection settings from the merged configuration, so
    # a server configuration's top-level responses_create_params (real ones
    # carry it) applies too, under the collection's own.
    value = _merged(servers.get(_PARAMS), config.get(_PARAMS))
    if value in (None, {}):
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"{_PARAMS} in the collection configuration is not a mapping", key=_PARAMS
        )
    if "${" in json.dumps(value, default=str):
        raise ConfigError(
            f"{_PARAMS} in the collection configuration holds an interpolation; "
            "create --dataset copies these values into every row, so write them out",
            key=_PARAMS,
        )
    return dict(value)


def _lines(path: Path, limit: Any) -> list[bytes]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"cannot read the dataset {path}: {exc.strerror}", path=path
        ) from exc
    lines = data.splitlines(keepends=True)
    if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
        lines = lines[:limit]
    elif limit not in (None, 0):
        raise ConfigError(
            f"limit in the collection configuration is {limit!r}, not a number",
            key="limit",
        )
    return lines


def _row(raw: bytes, path: Path, line: int) -> dict[str, Any]:
    problem = f"{path} line {line}"
    if not raw.strip():
        raise RowError(
            f"{problem} is blank; a dataset holds one JSON object a line", line=line
        )
    try:
        row = _DECODER.decode(raw)
    except (msgspec.DecodeError, RecursionError):
        raise RowError(f"{problem} is not JSON", line=line) from None
    if not isinstance(row, dict):
        raise RowError(f"{problem} is not a JSON object", line=line)
    if _ROLLOUT in row:
        raise RowError(
            f"{problem} has {_ROLLOUT} already: these are materialized rows, not a "
            "dataset; pass the file as --inputs",
            key=_ROLLOUT,
            line=line,
        )
    for key, what in (
        ("task_input", "a materialized task row"),
        ("prompt_config", "a prompt configuration"),
    ):
        if row.get(key) is not None:
            raise RowError(
                f"{problem} has {key} ({what}); create --dataset does not reproduce "
                "its expansion. Let NeMo Gym materialize the rows and pass that file "
                "as --inputs",
                key=key,
                line=line,
            )
    return row


def _agent(row: dict[str, Any], agent: Any, problem: str, line: int) -> None:
    ref = row.get(_AGENT)
    name = ref.get("name") if isinstance(ref, Mapping) else None
    if name is None and isinstance(agent, str):
        row.setdefault(_AGENT, {"name": agent})
    elif name is None:
        raise RowError(
            f"{problem} names no agent (agent_ref) and the collection configuration "
            "sets no agent_name",
            key=_AGENT,
            line=line,
        )
    elif isinstance(agent, str) and name != agent:
        # NeMo Gym versions differ here: older ones keep the row's agent,
        # newer ones send every row to agent_name. Neither is guessed.
        raise RowError(
            f"{problem} names the agent {name!r} but the collection configuration's "
            f"agent_name is {agent!r}; make them agree",
            key=_AGENT,
            line=line,
        )


def _seed(row: dict[str, Any], rollout: int, problem: str, line: int) -> None:
    params = dict(row[_PARAMS])
    metadata = dict(params.get("metadata") or {})
    params["metadata"] = metadata
    extra = metadata.get("extra_body", "{}")
    try:
        body = json.loads(extra) if isinstance(extra, str) else None
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise RowError(
            f"{problem}: {_PARAMS}.metadata.extra_body is not a JSON object in a "
            "string, so num_repeats_add_seed cannot add its seed",
            key=f"{_PARAMS}.metadata.extra_body",
            line=line,
        )
    body["seed"] = rollout
    metadata["extra_body"] = json.dumps(body)
    row[_PARAMS] = params


def expand_dataset(
    path: Path,
    config: Mapping[str, Any],
    *,
    num_repeats: int | None = None,
    global_config: Mapping[str, Any] | None = None,
) -> Expanded:
    """The rows NeMo Gym 0.7.0 materializes from the dataset at ``path``.

    ``config`` is the collection configuration (plain data); ``num_repeats``
    the command line's, which must agree with the configuration's when both
    are given; ``global_config`` the merged server configurations, whose
    top-level ``responses_create_params`` NeMo Gym applies as well. Refuses a
    setting or row it cannot expand as NeMo Gym would, naming it (and the line).
    """
    _refuse_settings(config)
    repeats = _repeats(config, num_repeats)
    overrides = _overrides(config, global_config or {})
    _refuse_credentials(overrides, "the collection configuration's ", root=_PARAMS)
    add_seed = bool(config.get("num_repeats_add_seed"))
    task_of_line: dict[bytes, int] = {}
    next_rollout: Counter[Any] = Counter()
    rows: list[dict[str, Any]] = []
    lines = _lines(path, config.get("limit"))
    _check_size(path, lines, repeats)
    for line, raw in enumerate(lines, start=1):
        row = _row(raw, path, line)
        problem = f"{path} line {line}"
        _refuse_credentials(row, f"{problem}: ", line=line)
        _agent(row, config.get("agent_name"), problem, line)
        if _PARAMS not in row or not isinstance(row[_PARAMS], dict):
            raise RowError(f"{problem} has no {_PARAMS} object", key=_PARAMS, line=line)
        row[_PARAMS] = row[_PARAMS] | overrides
        if _TASK in row:
            task = row[_TASK]
            if isinstance(task, bool) or not isinstance(task, int) or task < 0:
                raise RowError(
                    f"{problem}: {_TASK} must be an integer >= 0 (found {task!r})",
                    key=_TASK,
                    line=line,
                )
        else:
            # Identical lines are one task (NeMo Gym keys them by the line read).
            key = raw[:-2] + b"\n" if raw.endswith(b"\r\n") else raw
            row[_TASK] = task_of_line.setdefault(key, len(task_of_line))
        for _ in range(repeats):
            copy = dict(row)
            task = copy[_TASK]
            copy[_ROLLOUT] = next_rollout[task]
            next_rollout[task] += 1
            if add_seed:
                _seed(copy, copy[_ROLLOUT], problem, line)
            rows.append(copy)
    if not rows:
        raise ConfigError(f"the dataset {path} holds no rows", path=path)
    data = b"".join(_ENCODER.encode(row) + b"\n" for row in rows)
    return Expanded(rows, data, len(next_rollout))
