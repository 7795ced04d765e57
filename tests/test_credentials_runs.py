"""No credential byte anywhere a run goes (quality.md R-6; identity.md ID-12..ID-15).

The real NeMo Gym configurations of ``../shared/fixtures/nemo-gym-configs/`` are
rewritten (copies in ``tmp_path``; the fixtures are never touched) to take
their secrets from ``${oc.env:...}`` of innocent names, set to planted secrets
in every credential shape: a URL password, ``--api-key`` arguments, ``Bearer``
and ``Authorization: basic`` values, ``NAME=secret`` assignments, provider
token formats, interpolation defaults, ``oc.select``/``oc.decode``/``oc.create``,
a YAML alias of the ``api_key``, a URL with a password as a mapping key. Each
secret also stands under an innocent key beside its credential-named one, so
only the redaction of values can catch it there. Then a run is created,
compared (``diff-config``) and resumed under rotated secrets, fed rows whose
omission reasons, failure kinds and failure records carry more secrets,
recorded, shown, exported and verified; every file the ledger wrote, every
output and every message is scanned for the planted bytes.

The suite takes a sample of the configurations chosen by a hash of their
paths (``ROLLOUT_LEDGER_SECRET_CONFIGS``: a number, or ``all`` for every one).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import yaml
from click.testing import CliRunner, Result
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from cli import main
from ledger import Clock, Ledger, credential_safe
from tests.internals import Redactor, credential_named, find_interpolations
from tests.prerequisites import CONFIGS_ENV, nemo_gym_configs, require_folder
from tests.test_cli_support import CliRun, graded, read_jsonl, write_jsonl
from tests.test_real_configs import OVERLAY, config_files

CONFIGS = nemo_gym_configs()
require_folder(CONFIGS, "*.yaml", CONFIGS_ENV)

#: How many configurations the suite takes (``all``: every one).
SAMPLE_ENV = "ROLLOUT_LEDGER_SECRET_CONFIGS"
DEFAULT_SAMPLE = 32
ACTOR = "operator:tester"

#: The forms a credential-named key's value is rewritten to: the setting written
#: in the configuration and the environment variable's value (``{s}`` is the
#: secret, ``{a}`` the secret as a provider token). ``RL_PLANT_<n>`` is an
#: innocent name, so only the value can tell it is a credential.
FORMS: tuple[tuple[str, str, str | None], ...] = (
    ("env url password", "${oc.env:RL_PLANT_{n}}", "postgresql://u:{s}@db:5432/x"),
    ("env --api-key", "${oc.env:RL_PLANT_{n}}", "serve --api-key {s} --port 9"),
    ("env --api-key=", "${oc.env:RL_PLANT_{n}}", "serve --api-key={s}"),
    ("env bearer", "${oc.env:RL_PLANT_{n}}", "Bearer {s}"),
    ("env assignment", "${oc.env:RL_PLANT_{n}}", "--env HF_TOKEN={s} --rm"),
    ("env token", "${oc.env:RL_PLANT_{n}}", "sk-{a}"),
    ("env driver url", "${oc.env:RL_PLANT_{n}}", "postgresql+psycopg://u:{s}@db/x"),
    ("default", "${oc.env:RL_UNSET_{n},'postgresql://u:{s}@db/x'}", None),
    ("select", "${oc.select:plant_store_{n}}", None),
    ("decode", "${oc.decode:'Bearer {s}'}", None),
    ("create", "${oc.create:'{hdr: \"Bearer {s}\"}'}", None),
    ("basic", "Authorization: basic {s}", None),
    ("alias", "{s}", None),
    ("url key", "${oc.env:RL_PLANT_{n}}", "{s}"),
)


def _rank(path: Path) -> str:
    return hashlib.sha256(str(path.relative_to(CONFIGS)).encode()).hexdigest()


def _has_credentials(path: Path) -> bool:
    counting = Planter(str(path), 0)
    counting.rewrite(_load(path))
    return counting.count > 0


def sample() -> list[Path]:
    """The configurations this run takes, or all of them.

    A stable sample by path hash: mostly configurations that hold credentials,
    and a quarter without (their runs still carry the overlay's and the rows').
    """
    wanted = os.environ.get(SAMPLE_ENV, str(DEFAULT_SAMPLE))
    files = config_files()
    if wanted == "all":
        return files
    size = int(wanted)
    holding: list[Path] = []
    other: list[Path] = []
    for path in sorted(files, key=_rank):
        with_credentials = _has_credentials(path)
        if with_credentials and len(holding) < size - size // 4:
            holding.append(path)
        elif not with_credentials and len(other) < size // 4:
            other.append(path)
        if len(holding) + len(other) == size:
            break
    return sorted(holding + other)


def _load(path: Path) -> dict[str, Any]:
    try:
        loaded = OmegaConf.load(path)
    except (yaml.YAMLError, OmegaConfBaseException):
        # One file repeats a mapping key, which OmegaConf refuses; PyYAML keeps
        # the last value (tests/test_real_configs.py reads it the same way).
        loaded = OmegaConf.create(yaml.safe_load(path.read_text(encoding="utf-8")))
    plain = OmegaConf.to_container(loaded, resolve=False, throw_on_missing=False)
    assert isinstance(plain, dict)
    return {str(key): value for key, value in plain.items()}


class Planter:
    """Rewrites one configuration to read planted secrets; one version of them.

    Two planters of the same configuration and different ``version`` make the
    same rewrite with other secrets: the rotation ID-15 says is no drift.
    """

    def __init__(self, name: str, version: int, offset: int = 0) -> None:
        self.name = name
        self.version = version
        # Where this configuration enters the cycle of forms: where the one
        # before it stopped, so a sample covers every form.
        self.offset = offset
        self.env: dict[str, str] = {}
        self.globals: dict[str, Any] = {}
        self.secrets: list[str] = []
        self.forms: Counter[str] = Counter()
        self.count = 0

    def secret(self, what: str) -> str:
        digest = hashlib.sha256(f"{self.name}:{what}:{self.version}".encode())
        secret = f"S3c{digest.hexdigest()[:21]}"
        self.secrets.append(secret)
        return secret

    def _plant(self) -> tuple[str, Any]:
        """The setting of the next credential, and its innocent mirror."""
        n = self.count
        self.count += 1
        name, setting, env = FORMS[(n + self.offset) % len(FORMS)]
        self.forms[name] += 1
        s = self.secret(f"value-{n}")
        token = s.ljust(34, "0")

        def filled(text: str) -> str:
            return text.replace("{n}", str(n)).replace("{s}", s).replace("{a}", token)

        if env is not None:
            self.env[f"RL_PLANT_{n}"] = filled(env)
        if name == "select":
            self.globals[f"plant_store_{n}"] = filled("https://u:{s}@store.example/x")
        value = filled(setting)
        mirror: Any = {filled("https://u:{s}@hub.example/x"): 1}
        return value, (mirror if name == "url key" else value)

    def rewrite(self, value: Any) -> Any:
        """``value`` with every credential replaced by a planted one (ID-12)."""
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                if credential_named(str(key)) and not isinstance(item, dict):
                    out[key], out[f"plant_mirror_{self.count}"] = self._plant()
                else:
                    out[key] = self.rewrite(item)
            return out
        if isinstance(value, list):
            return [self.rewrite(item) for item in value]
        if isinstance(value, str) and "${" in value:
            return self._rewrite_text(value)
        return value

    def _rewrite_text(self, text: str) -> str:
        # A credential-named interpolation inside a string ("Bearer ${oc.env:
        # HF_TOKEN}") reads an innocent variable holding a shaped secret.
        parts, last = [], 0
        for one in find_interpolations(text):
            names = [one.name, *(inner.name for inner in one.nested)]
            if any(credential_named(name) for name in names):
                n = self.count
                self.count += 1
                self.forms["text interpolation"] += 1
                self.env[f"RL_PLANT_{n}"] = f"Bearer {self.secret(f'text-{n}')}"
                parts += [text[last : one.start], f"${{oc.env:RL_PLANT_{n}}}"]
                last = one.end
        return "".join([*parts, text[last:]])

    def overlay(self) -> dict[str, Any]:
        """The launcher's overlay, its credential settings planted too."""
        overlay = copy.deepcopy(OVERLAY)
        overlay["policy_api_key"] = self.secret("policy")
        overlay["judge_api_key"] = f"Bearer {self.secret('judge')}"
        return {**overlay, **self.globals}


def _row_secrets(name: str) -> list[str]:
    return [
        f"S3cRow{hashlib.sha256(f'{name}:{i}'.encode()).hexdigest()[:20]}"
        for i in range(7)
    ]


def _outcomes(plan: list[dict[str, Any]], s: list[str]) -> list[dict[str, Any]]:
    """Outcome rows whose strings carry the row secrets ``s`` (ID-13)."""
    failures: list[dict[str, Any]] = [
        {
            "_ng_omitted": True,
            "_ng_failure_message": (
                f"skipped: https://bot:{s[0]}@h/x said Bearer {s[1]}"
            ),
        },
        {
            "_ng_failure_class": f"Bearer {s[2]}",
            "_ng_failure_message": f"--api-key {s[3]} refused",
            "_ng_failure_record": {
                "schema_version": 1,
                "source": f"token={s[4]}",
                "failure": {"failure_kind": f"sk-{s[5]}", "stage": "agent"},
                "failure_events": [
                    {"failure_kind": f"auth https://u:{s[6]}@h", "stage": "agent"}
                ],
            },
        },
    ]
    return [
        {**line, **(failures[i] if i < len(failures) else graded())}
        for i, line in enumerate(line for line in plan if "rejudge" not in line)
    ]


class Driven:
    """The outputs of one configuration's run, and how far it got."""

    def __init__(self) -> None:
        self.shown: list[str] = []
        self.created = False


def _invoke(driven: Driven, clock: Clock, *args: Any) -> Result:
    result = CliRunner().invoke(
        main,
        [str(arg) for arg in args],
        obj={"clock": clock, "actor": ACTOR},
        catch_exceptions=False,
    )
    driven.shown += [result.stdout, result.stderr]
    return result


def _write_yaml(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _configs(folder: Path, planter: Planter, data: dict[str, Any]) -> list[Any]:
    servers = _write_yaml(folder / "servers.yaml", planter.rewrite(data))
    overlay = _write_yaml(folder / "overlay.yaml", planter.overlay())
    return ["--global-config", servers, "--global-config", overlay]


def _drive(
    folder: Path, path: Path, offset: int
) -> tuple[Driven, list[str], list[str], Planter]:
    """Create, compare, resume, record, show, export and verify one run."""
    name = str(path.relative_to(CONFIGS))
    data = _load(path)
    (folder / "a").mkdir()
    (folder / "b").mkdir()
    first, second = Planter(name, 1, offset), Planter(name, 2, offset)
    args_a = _configs(folder / "a", first, copy.deepcopy(data))
    args_b = _configs(folder / "b", second, copy.deepcopy(data))
    collection = _write_yaml(folder / "collection.yaml", {"num_repeats": 1})
    inputs = write_jsonl(
        folder / "rows.jsonl",
        [
            {"_ng_task_index": t, "_ng_rollout_index": 0, "question": f"q{t}"}
            for t in range(3)
        ],
    )
    out = folder / "run" / "rollouts.jsonl"
    driven, clock = Driven(), Clock(seed=5)
    config = ["--config", collection]
    with mock.patch.dict(os.environ, first.env):
        created = _invoke(
            driven, clock, "create", out, "--inputs", inputs, *config, *args_a
        )
    row_secrets = _row_secrets(name)
    if created.exit_code != 0:
        assert created.exit_code == 3, created.stderr  # a ConfigError, named
        return driven, first.secrets + second.secrets, row_secrets, first
    driven.created = True
    with mock.patch.dict(os.environ, second.env):
        diff = _invoke(driven, clock, "diff-config", out, *config, *args_b)
        assert "no key differs" in diff.stdout, diff.stdout  # ID-15: no drift
        plan_file = folder / "plan.jsonl"
        resumed = _invoke(
            driven, clock, "resume", out, *config, *args_b, "--plan-out", plan_file
        )
        assert resumed.exit_code == 0, resumed.stderr
    outcomes = write_jsonl(
        folder / "outcomes.jsonl", _outcomes(read_jsonl(plan_file), row_secrets)
    )
    assert _invoke(driven, clock, "record", out, outcomes).exit_code == 0
    for command in (
        ("history", out),
        ("history", out, "--json"),
        ("status", out),
        ("status", out, "--json"),
        ("export", out),
        ("export", out, "-o", folder / "events.jsonl"),
        ("export", out, "--files", folder / "copy"),
        ("verify", out),
        ("check", out),
        ("results", out, "-o", folder / "selected.jsonl"),
    ):
        assert _invoke(driven, clock, *command).exit_code in (0, 75, 76), command
    with Ledger.open(out) as led:
        driven.shown += [repr(event) for event in led.events()]
    return driven, first.secrets + second.secrets, row_secrets, first


def _files(folder: Path) -> Iterator[Path]:
    return (path for path in sorted(folder.rglob("*")) if path.is_file())


#: The collector's own files (rows are the collector's data, ID-13), and the
#: inputs this test wrote: where row secrets may stand.
_COLLECTOR = re.compile(
    r"(rollouts(_failures|_materialized_inputs)?\.jsonl|outcomes\.jsonl"
    r"|selected\.jsonl)$"
)
_WRITTEN_HERE = re.compile(r"(servers|overlay|collection)\.yaml$")


def _leaks(
    folder: Path, driven: Driven, config: list[str], rows: list[str]
) -> list[str]:
    found = []
    for path in _files(folder):
        if _WRITTEN_HERE.search(path.name):
            continue
        data = path.read_bytes()
        secrets = config if _COLLECTOR.search(path.name) else config + rows
        found += [f"{path.name}: {s}" for s in secrets if s.encode() in data]
    text = "\n".join(driven.shown)
    found += [f"output: {s}" for s in config + rows if s in text]
    return found


_FAST_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _keys(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _keys(item)
    elif isinstance(value, list):
        for item in value:
            yield from _keys(item)


def test_id_11_redaction_keeps_every_key_name_of_the_real_configurations() -> None:
    """ID-11/ID-12: over every real configuration, credential redaction changes
    values only: every key keeps its name (``client_password`` stays
    ``client_password`` whatever value it holds), and every changed value reads
    ``<redacted>``. (Read with PyYAML's C loader, for speed: the keys and
    scalars are those OmegaConf reads, unresolved.)"""
    files = config_files()
    changed = 0
    for path in files:
        plain = yaml.load(path.read_text(encoding="utf-8"), Loader=_FAST_LOADER)
        safe = credential_safe(plain)
        assert list(_keys(safe)) == list(_keys(plain)), path
        changed += json.dumps(safe, default=str) != json.dumps(plain, default=str)
    assert len(files) > 0
    assert changed > 0  # some configurations hold credentials, and lost them


@pytest.mark.slow
def test_r_6_no_planted_secret_of_the_real_configurations_reaches_any_output(
    tmp_path: Path,
) -> None:
    """R-6/ID-13 (and ID-15): real configurations, secrets in every form."""
    configs = sample()
    outcome: Counter[str] = Counter()
    forms: Counter[str] = Counter()
    leaked: list[str] = []
    for index, path in enumerate(configs):
        folder = tmp_path / f"c{index}"
        folder.mkdir()
        offset = sum(forms.values())
        driven, config_secrets, row_secrets, planter = _drive(folder, path, offset)
        outcome["created" if driven.created else "refused"] += 1
        outcome["with planted credentials"] += planter.count > 0
        outcome["created with planted credentials"] += (
            driven.created and planter.count > 0
        )
        forms.update(planter.forms)
        leaked += [
            f"{path.name}: {leak}"
            for leak in _leaks(folder, driven, config_secrets, row_secrets)
        ]
    assert len(configs) > 0
    assert outcome["created"] > 0  # runs went through every command
    assert outcome["created with planted credentials"] > 0
    if sum(forms.values()) >= len(FORMS):  # the default sample plants more
        assert {name for name, _, _ in FORMS} <= set(forms)
    assert leaked == []


# -- ID-15: rotating an interpolated password is no drift ---------------------------

_OLD = "S3cOldPassword00001"
_NEW = "S3cNewPassword00002"


def _interpolated_run(folder: Path) -> CliRun:
    run = CliRun(folder)
    agent = run.servers_data["math_agent"]["responses_api_agents"]["simple_agent"]
    agent["database"] = "${oc.env:RL_DB}"
    agent["serve"] = "${oc.env:RL_SERVE}"
    run.servers = run.write_config("servers.yaml", run.servers_data)
    return run


def _secret_env(password: str) -> dict[str, str]:
    return {
        "RL_DB": f"postgresql://u:{password}@db:5432/x",
        "RL_SERVE": f"serve --api-key {password} --port 9",
    }


def _ledger_bytes(run: CliRun) -> bytes:
    return b"".join(path.read_bytes() for path in _files(run.ledger_dir))


def test_id_15_rotating_an_interpolated_password_is_no_drift_and_resume_proceeds(
    tmp_path: Path,
) -> None:
    """ID-15/REC-53: a credential's value is not identity, wherever it comes from."""
    run = _interpolated_run(tmp_path)
    with mock.patch.dict(os.environ, _secret_env(_OLD)):
        run.create()
        run.resume()
    with mock.patch.dict(os.environ, _secret_env(_NEW)):
        diff = run.ok("diff-config", run.out, *run.config_args())
        resumed, plan = run.resume()
    assert "no key differs" in diff.stdout
    assert resumed.exit_code == 0
    assert "drift" not in resumed.stderr
    assert len(plan) == 6
    assert "drift_accepted" not in run.ok("history", run.out).stdout
    shown = diff.stdout + diff.stderr + resumed.stdout + resumed.stderr
    for password in (_OLD, _NEW):
        assert password not in shown
        assert password.encode() not in _ledger_bytes(run)


def test_id_15_a_log_that_holds_a_resolved_password_resumes_after_its_rotation(
    tmp_path: Path,
) -> None:
    """ID-15/ID-13: a run created before values were redacted (its identity holds
    the password an ``${oc.env:...}`` resolved to) is compared redacted: rotating
    the password proceeds, recording the redacted identity, and no command
    shows the old password."""
    run = _interpolated_run(tmp_path)
    unredacted = Redactor.safe

    def names_only(self: Redactor, value: Any, *, resolved: bool = False) -> Any:
        return value if resolved else unredacted(self, value)

    with (
        mock.patch.dict(os.environ, _secret_env(_OLD)),
        mock.patch.object(Redactor, "safe", names_only),
    ):
        run.create()
    assert _OLD.encode() in _ledger_bytes(run)  # the log as an older build wrote it
    with mock.patch.dict(os.environ, _secret_env(_NEW)):
        diff = run.ok("diff-config", run.out, *run.config_args())
        resumed, _ = run.resume()
    assert "resume would proceed" in diff.stdout
    assert "operational drift accepted: (none)" in resumed.stderr
    shown = diff.stdout + diff.stderr + resumed.stdout + resumed.stderr
    assert _OLD not in shown
    assert _NEW not in shown
    identity = json.loads((run.ledger_dir / "identity.json").read_text())
    assert _OLD not in json.dumps(identity)  # republished from drift_accepted


# -- SC-1: a URL is never taken for a path ------------------------------------------


def _tree(folder: Path) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


@pytest.mark.parametrize(
    "url",
    [
        "mysql+pymysql://u:S3cUrlPassword0001@db:3306/runs",
        "sqlite+pysqlite://u:S3cUrlPassword0001@db/runs.db",
        "https://u:S3cUrlPassword0001@store.example/runs/rollouts.jsonl",
    ],
)
def test_sc_1_a_url_of_no_store_is_refused_and_never_made_a_folder(
    tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SC-1/ID-13: ``scheme+driver://`` is no path: refused; nothing made or shown."""
    run = CliRun(tmp_path)
    monkeypatch.chdir(tmp_path)
    before = _tree(tmp_path)
    result = run.invoke("create", url, "--inputs", run.inputs, *run.config_args())
    status = run.invoke("status", url)
    assert result.exit_code == 2
    assert status.exit_code == 2
    for shown in (result, status):
        assert "names no store of this ledger" in shown.stderr
        assert "S3cUrlPassword0001" not in shown.stdout + shown.stderr
    assert _tree(tmp_path) == before


def test_sc_1_a_usage_error_quoting_a_url_shows_no_password(tmp_path: Path) -> None:
    """ID-13: click's own messages pass the CLI's redaction too."""
    run = CliRun(tmp_path)
    result = run.invoke(
        "diff-config", run.out, "--config", "https://u:S3cUsagePw00001@h/c.yaml"
    )
    assert result.exit_code == 2
    assert "https://u:<redacted>@h/c.yaml" in result.stderr
    assert "S3cUsagePw00001" not in result.stderr


def _driver_url(pg_url: str, password: str | None, run: str) -> str:
    scheme, _, rest = pg_url.partition("://")
    assert scheme == "postgresql"
    user, _, host = rest.partition("@")
    userinfo = user if password is None else f"{user}:{password}"
    return f"postgresql+psycopg://{userinfo}@{host}?run={run}"


def test_sc_1_a_postgresql_driver_url_with_a_password_is_refused_without_a_trace(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SC-1/ID-13: ``postgresql+psycopg://user:pw@...`` is PostgreSQL's URL: its
    password is refused, never printed, and no folder is named after it."""
    password = "S3cPgPassword00001"
    url = _driver_url(pg_url, password, "r1")
    run = CliRun(tmp_path)
    monkeypatch.chdir(tmp_path)
    before = _tree(tmp_path)
    results = [
        run.invoke("create", url, "--inputs", run.inputs, *run.config_args()),
        run.invoke("status", url),
        run.invoke("verify", url),
    ]
    for result in results:
        assert result.exit_code == 3
        assert "holds a password" in result.stderr
        assert password not in result.stdout + result.stderr
    assert _tree(tmp_path) == before
    assert not any(password in name for name in _tree(tmp_path))


def test_sc_1_a_postgresql_driver_url_names_the_run_on_postgresql(
    tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SC-1: the ``+driver`` spelling reaches the same store as ``postgresql://``."""
    run = CliRun(tmp_path)
    monkeypatch.chdir(tmp_path)
    before = _tree(tmp_path)
    created = run.invoke(
        "create",
        _driver_url(pg_url, None, "r2"),
        "--inputs",
        run.inputs,
        *run.config_args(),
    )
    assert created.exit_code == 0, created.stderr
    # issue 29: `run URL ... -- COMMAND` runs as printed (a coordinator and a worker)
    assert "next: rollout-ledger run 'postgresql://" in created.stdout
    status = run.ok("status", f"{pg_url}?run=r2", "--json")
    assert json.loads(status.stdout)["coverage"]["decisions"]["pending"] == 6
    assert _tree(tmp_path) == before  # the run is on PostgreSQL, not on local disk


# -- ID-13: an imported run's rows and manifest -------------------------------------

_IMPORTED = [f"S3cImported{i:03d}xyzw" for i in range(6)]


def _line(row: dict[str, Any]) -> str:
    return json.dumps(row) + "\n"


def test_id_13_an_imported_run_stores_no_secret_of_its_rows_or_manifest(
    tmp_path: Path,
) -> None:
    """ID-13 (R-6): omission reasons, failure kinds, the refusal of a row, and a
    NeMo Gym manifest beside the run are recorded and shown redacted."""
    s = _IMPORTED
    out = tmp_path / "rollouts.jsonl"
    keys = [(t, r) for t in range(2) for r in range(2)]
    (tmp_path / "rollouts_materialized_inputs.jsonl").write_text(
        "".join(
            _line({"_ng_task_index": t, "_ng_rollout_index": r, "q": f"q{t}"})
            for t, r in keys
        )
    )
    out.write_text(_line({"_ng_task_index": 0, "_ng_rollout_index": 0, **graded()}))
    (tmp_path / "rollouts_failures.jsonl").write_text(
        _line(
            {
                "_ng_task_index": 0,
                "_ng_rollout_index": 1,
                "_ng_omitted": True,
                "_ng_failure_message": f"https://bot:{s[0]}@h said Bearer {s[1]}",
            }
        )
        + _line(
            {
                "_ng_task_index": 1,
                "_ng_rollout_index": 0,
                "reward": 0.0,
                "_ng_failure_class": f"--api-key {s[2]}",
            }
        )
        + _line(
            {
                "_ng_task_index": 1,
                "_ng_rollout_index": 1,
                "_ng_attempt_index": f"token={s[3]}",
                "_ng_failure_class": "transient",
            }
        )
    )
    (tmp_path / "rollouts_manifest.json").write_text(
        json.dumps(
            {
                "schema_version": 1,
                "run_id": "5f" + "0" * 30,
                "config_digest": "ab" * 32,
                "launcher": {"env": f"HF_TOKEN={s[4]}", "hub": f"hf_{s[5]}0000000"},
            }
        )
    )
    collector = {
        path.name: path.read_bytes() for path in _files(tmp_path) if path.is_file()
    }
    driven, clock = Driven(), Clock(seed=3)
    refused = _invoke(driven, clock, "import", out)
    assert refused.exit_code == 3  # the refusal quotes the line's value, redacted
    assert "token=<redacted>" in refused.stderr
    dry = _invoke(driven, clock, "import", out, "--dry-run", "--skip-rejected")
    done = _invoke(driven, clock, "import", out, "--skip-rejected")
    assert dry.exit_code == 0, dry.stderr
    assert done.exit_code == 0, done.stderr
    for command in (("history", out), ("status", out), ("export", out)):
        assert _invoke(driven, clock, *command).exit_code == 0, command
    stored = {
        path.name: path.read_bytes()
        for path in _files(tmp_path)
        if path.name not in collector  # the collector's files are its data
    }
    assert stored  # the ledger's files were scanned
    leaks = [
        (name, x) for name, data in stored.items() for x in s if x.encode() in data
    ]
    leaks += [("output", x) for x in s if x in "\n".join(driven.shown)]
    assert leaks == []
    after = {path.name: path.read_bytes() for path in _files(tmp_path)}
    assert {name: after[name] for name in collector} == collector  # untouched
