"""R-5 for option files: approvals (REC-26), policies (REC-61), YAML configurations.

Arbitrary bytes and text give a value or a clean ``LedgerError`` (never another
exception), and nothing unreadable ever approves an attempt.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger import (
    ConfigError,
    LedgerError,
    RecoveryPolicy,
    config_identity,
    creation_policy,
)
from tests.internals import (
    DEFAULT_POLICY,
    parse_approvals,
    read_approvals,
    read_policy_file,
)

# -- REC-26: approval files ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "approved", "problems"),
    [
        ('{"task": 1, "rollout": 2, "attempt": 0}', [(1, 2, 0, 1)], []),
        ("3 4 1", [(3, 4, 1, 1)], []),
        ("\n# a comment\n\n5 0 2\n", [(5, 0, 2, 4)], []),
        ("1 2", [], [1]),
        ("1 2 -1", [], [1]),
        ('{"task": 1, "rollout": 2}', [], [1]),
        ('{"task": true, "rollout": 2, "attempt": 0}', [], [1]),
        ('{"task": 1, "rollout": 2, "attempt": 0, "extra": 1}', [], [1]),
        ("{not json", [], [1]),
        ("1 2 3\nx y z\n4 5 6", [(1, 2, 3, 1), (4, 5, 6, 3)], [2]),
    ],
)
def test_rec_26_approval_lines(
    text: str, approved: list[tuple[int, ...]], problems: list[int]
) -> None:
    entries, bad = parse_approvals(text.splitlines())
    assert [tuple(entry) for entry in entries] == approved
    assert [problem.line for problem in bad] == problems
    assert all(problem.reason for problem in bad)


@given(st.text(max_size=400))
def test_rec_26_any_text_approves_only_well_formed_lines(text: str) -> None:
    entries, problems = parse_approvals(text.splitlines())
    lines = text.splitlines()
    for entry in entries:
        line = lines[entry.line - 1].strip()
        assert line.split() == [
            str(entry.task),
            str(entry.rollout),
            str(entry.attempt),
        ] or (
            json.loads(line)
            == {"task": entry.task, "rollout": entry.rollout, "attempt": entry.attempt}
        )
    assert {e.line for e in entries}.isdisjoint({p.line for p in problems})


@given(st.binary(max_size=300))
def test_rec_26_any_bytes_give_approvals_or_a_config_error(data: bytes) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "approvals.txt"
        path.write_bytes(data)
        message = "approvals.txt"
        try:
            read_approvals(path)
        except ConfigError as exc:
            message = str(exc)
        assert "approvals.txt" in message


# -- REC-61: policy files ------------------------------------------------------------


@given(st.binary(max_size=300))
def test_rec_61_any_policy_bytes_give_a_policy_or_a_config_error(data: bytes) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "policy.json"
        path.write_bytes(data)
        try:
            result: object = read_policy_file(path)
        except ConfigError as exc:
            result = str(exc)
        assert isinstance(result, RecoveryPolicy) or "policy.json" in str(result)


def test_rec_61_policy_sources_in_order(tmp_path: Path) -> None:
    out = tmp_path / "rollouts.jsonl"
    assert creation_policy(out) == DEFAULT_POLICY  # standalone: the shared defaults
    launcher = tmp_path / "recovery_policy.json"
    launcher.write_text(
        json.dumps({"owner": ["other"], "policy": {"fault_share": 0.9}})
    )
    assert creation_policy(out) == DEFAULT_POLICY  # not a listed stem
    launcher.write_text(
        json.dumps({"owner": ["rollouts"], "policy": {"fault_share": 0.9}})
    )
    assert creation_policy(out).fault_share == 0.9  # the owning launcher's
    option = tmp_path / "p.json"
    option.write_text(json.dumps({"max_free_attempts": 2}))
    assert (
        creation_policy(out, policy_file=option).max_free_attempts == 2
    )  # --policy wins


@pytest.mark.parametrize(
    "content",
    [
        '{"owner": ["rollouts"], "policy": {"fault_share": 7}}',
        '{"owner": ["rollouts"], "policy": {"no_such_setting": 1}}',
        '{"owner": "rollouts", "policy": {}}',
        "not json at all",
    ],
)
def test_rec_61_a_malformed_saved_policy_is_an_error(
    tmp_path: Path, content: str
) -> None:
    (tmp_path / "recovery_policy.json").write_text(content)
    with pytest.raises(ConfigError, match=r"recovery_policy\.json"):
        creation_policy(tmp_path / "rollouts.jsonl")


# -- YAML configurations ----------------------------------------------------------

yaml_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-1000, 1000),
    st.text(max_size=12),
    st.sampled_from(
        [
            "${oc.env:HF_TOKEN}",
            "${policy_base_url}",
            "???",
            "${missing}",
            "Bearer abc",
            "${oc.env:X,default}",
        ]
    ),
)
yaml_values = st.recursive(
    yaml_scalars,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(min_size=1, max_size=8), inner, max_size=4)
    ),
    max_leaves=10,
)


@given(
    config=st.dictionaries(st.text(min_size=1, max_size=8), yaml_values, max_size=5),
    servers=st.dictionaries(st.text(min_size=1, max_size=8), yaml_values, max_size=5),
)
def test_r_5_any_configuration_gives_an_identity_or_a_config_error(
    config: dict[str, object], servers: dict[str, object]
) -> None:
    from omegaconf import OmegaConf

    try:
        loaded = OmegaConf.create(config), OmegaConf.create(servers)
    except Exception:
        return
    try:
        identity = config_identity(*loaded, [])
    except LedgerError:
        return
    assert isinstance(identity, dict)
