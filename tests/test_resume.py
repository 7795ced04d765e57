"""REC-50..REC-62 and EV-14: the gate, resume, published files and snapshots.

Runs are created through the public API with a configuration shaped like NeMo
Gym's (tests/test_identity.py), then resumed under changed configurations.
"""

from __future__ import annotations

import copy
import json
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ledger import (
    CorruptLedger,
    IdentityMismatch,
    Ledger,
    LedgerError,
    RecoveryIncomplete,
    RecoveryPolicy,
    RunLock,
    RunManifest,
    UnknownEvent,
)
from ledger.events import chain_hash
from projections import check_complete, coverage, replay, resume
from tests.internals import CODE_VERSION, save_snapshot
from tests.test_identity import nemo_configuration

Config = dict[str, Any]


class Run:
    """A run created from ``nemo_configuration()`` with a held lock."""

    def __init__(self, folder: Path, *, prompt: Path | None = None) -> None:
        self.config, self.global_config, self.rows = nemo_configuration()
        if prompt is not None:
            self.config["prompt_fpath"] = str(prompt)
        self.out = folder / "rollouts.jsonl"
        self.lock = RunLock(self.out).acquire()
        manifest = RunManifest.create(None, self.rows, self.config, self.global_config)
        Ledger.create(self.out, manifest, self.rows, lock=self.lock).close()

    def resume(self, config: Config | None = None, **options: Any) -> Any:
        with Ledger.open(self.out, lock=self.lock) as led:
            return resume(led, config or self.config, self.global_config, **options)

    def kinds(self) -> list[str]:
        with Ledger.open(self.out) as led:
            return [event.kind for event in led.events()]

    def snapshot_of_files(self) -> dict[str, bytes]:
        folder = self.out.parent
        return {
            str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*"))
            if p.is_file()
            and not p.name.startswith("ledger.db")
            and p.name != "run.lock"
        }


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Run]:
    made = Run(tmp_path)
    yield made
    made.lock.release()


def changed(config: Config, dotted: str, value: Any) -> Config:
    result = copy.deepcopy(config)
    node = result
    *path, last = dotted.split(".")
    for part in path:
        node = node[part]
    node[last] = value
    return result


GLOBAL_JUDGE = "judge_model.responses_api_models.openai_model"

# -- REC-53: operational drift passes, with a warning, an event and a journal line --


@pytest.mark.parametrize(
    ("where", "dotted", "value", "key"),
    [
        ("config", "num_samples_in_parallel", 8, "collection.num_samples_in_parallel"),
        (
            "global",
            f"{GLOBAL_JUDGE}.request_timeout_s",
            600,
            f"servers.{GLOBAL_JUDGE}.request_timeout_s",
        ),
        (
            "global",
            f"{GLOBAL_JUDGE}.max_retries",
            9,
            f"servers.{GLOBAL_JUDGE}.max_retries",
        ),
        (
            "global",
            f"{GLOBAL_JUDGE}.openai_base_url",
            "https://other.example/v1",
            f"servers.{GLOBAL_JUDGE}.openai_base_url",
        ),
    ],
)
def test_rec_53_operational_drift_resumes_with_warning_event_and_journal_line(
    run: Run,
    caplog: pytest.LogCaptureFixture,
    where: str,
    dotted: str,
    value: Any,
    key: str,
) -> None:
    run.resume()
    config, global_config = run.config, run.global_config
    if where == "config":
        config = changed(config, dotted, value)
    else:
        run.global_config = changed(global_config, dotted, value)
    with caplog.at_level(logging.WARNING, logger="projections"):
        result = run.resume(config)
    assert result.verdict.drift is not None
    assert result.verdict.drift.operational == (key,)
    assert result.verdict.drift.semantic == ()
    assert any(key in message for message in caplog.messages)
    assert run.kinds().count("drift_accepted") == 1
    journal = (run.out.parent / "rollouts_ledger" / "resume_drift.log").read_text()
    assert journal.count("\n") == 1
    assert journal.rstrip("\n").split("\t")[3] == key
    # The next resume with the same configuration is silent.
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="projections"):
        again = run.resume(config)
    assert again.verdict.drift is None
    assert caplog.messages == []
    assert run.kinds().count("drift_accepted") == 1


@pytest.mark.parametrize(
    ("where", "dotted", "value"),
    [
        ("global", "policy_model.responses_api_models.vllm_model.host", "10.9.9.9"),
        ("global", "policy_model.responses_api_models.vllm_model.port", 1234),
        ("global", "policy_base_url", "http://10.7.7.7:9000/v1"),
        ("global", "policy_api_key", "sk-rotated-999"),
    ],
)
def test_rec_53_placement_moved_references_and_rotated_keys_are_no_drift(
    run: Run, where: str, dotted: str, value: Any
) -> None:
    run.resume()
    run.global_config = changed(run.global_config, dotted, value)
    result = run.resume()
    assert result.verdict.drift is None
    assert result.verdict.record is None
    assert "drift_accepted" not in run.kinds()


@pytest.mark.parametrize(
    ("where", "dotted", "value", "key"),
    [
        (
            "config",
            "responses_create_params.temperature",
            1.0,
            "collection.responses_create_params.temperature",
        ),
        ("config", "num_repeats", 8, "collection.num_repeats"),
        (
            "global",
            "policy_model_name",
            "another/model",
            "servers.policy_model.responses_api_models.vllm_model.model",
        ),
        (
            "global",
            f"{GLOBAL_JUDGE}.openai_model",
            "another/judge",
            f"servers.{GLOBAL_JUDGE}.openai_model",
        ),
    ],
)
def test_rec_53_semantic_drift_refuses_naming_every_key_with_both_values(
    run: Run, where: str, dotted: str, value: Any, key: str
) -> None:
    run.resume()
    head_before = run.kinds()
    config = run.config
    if where == "config":
        config = changed(config, dotted, value)
    else:
        run.global_config = changed(run.global_config, dotted, value)
    with pytest.raises(IdentityMismatch) as caught:
        run.resume(config)
    assert key in caught.value.keys
    message = str(caught.value)
    assert key in message
    assert "saved" in message
    assert json.dumps(value) in message
    assert "--allow-unsafe" in message
    assert run.kinds() == head_before


def test_rec_55_an_edited_prompt_file_is_semantic_drift(tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Solve the problem.\n")
    made = Run(tmp_path / "run", prompt=prompt)
    try:
        made.resume()
        prompt.write_text("Solve the problem carefully.\n")
        with pytest.raises(IdentityMismatch) as caught:
            made.resume()
        assert "collection.prompt_fpath" in str(caught.value)
    finally:
        made.lock.release()


def test_rec_55_an_edited_materialized_inputs_file_refuses(run: Run) -> None:
    path = run.out.parent / "rollouts_materialized_inputs.jsonl"
    data = path.read_bytes()
    path.write_bytes(data.replace(b"Problem 0", b"Problem 9"))
    with pytest.raises(IdentityMismatch) as caught:
        run.resume()
    assert caught.value.keys == ("materialized_digest",)


# -- REC-54: allow_unsafe -------------------------------------------------------------


def test_rec_54_allow_unsafe_records_a_sticky_override(
    run: Run, caplog: pytest.LogCaptureFixture
) -> None:
    run.resume()
    hot = changed(run.config, "responses_create_params.temperature", 1.5)
    result = run.resume(hot, allow_unsafe=True, reason="ablation")
    assert result.verdict.overridden
    assert run.kinds().count("identity_overridden") == 1
    manifest = json.loads(
        (run.out.parent / "rollouts_ledger" / "manifest.json").read_text()
    )
    assert manifest["identity_overridden"] is True
    assert manifest["config_digest"] == result.state.manifest["config_digest"]
    with caplog.at_level(logging.WARNING, logger="projections"):
        later = run.resume(hot)  # the override made the new identity the saved one
    assert later.verdict.refusal is None
    assert "previously overridden run identity" in later.verdict.warnings


def test_rec_52_rows_of_another_run_refuse_even_with_allow_unsafe(run: Run) -> None:
    run.resume()
    row = {
        **run.rows[0],
        "_ng_attempt_index": 0,
        "_ng_run_id": "another-run",
        "reward": 1,
    }
    with run.out.open("a") as handle:
        handle.write(json.dumps(row) + "\n")
    with pytest.raises(IdentityMismatch, match=r"line 1 of rollouts\.jsonl"):
        run.resume(allow_unsafe=True)


def test_rec_51_unknown_event_kinds_refuse_even_with_allow_unsafe(run: Run) -> None:
    run.resume()
    db = run.out.parent / "rollouts_ledger" / "ledger.db"
    conn = sqlite3.connect(db, isolation_level=None)
    seq, prev = conn.execute(
        "SELECT seq, hash FROM events ORDER BY seq DESC"
    ).fetchone()
    at, body = "2026-01-01T00:00:00.000000Z", b'{"kind":"future_kind"}'
    digest = chain_hash(prev, seq + 1, "future_kind", at, "x", body)
    conn.execute(
        "INSERT INTO events VALUES (?, 'future_kind', ?, 'x', ?, ?, ?)",
        (seq + 1, at, body, prev, digest),
    )
    conn.close()
    with pytest.raises(UnknownEvent, match="future_kind"):
        run.resume(allow_unsafe=True)


def test_rec_51_a_corrupt_database_refuses_even_with_allow_unsafe(run: Run) -> None:
    db = run.out.parent / "rollouts_ledger" / "ledger.db"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    conn.close()
    with pytest.raises(CorruptLedger):
        run.resume(allow_unsafe=True)


# -- REC-57: adopting an identity through matches_config ----------------------------


def test_rec_57_a_digest_saved_without_a_later_collection_setting_adopts(
    tmp_path: Path,
) -> None:
    config, global_config, rows = nemo_configuration()
    # ID-35: an earlier collector, from before num_repeats_add_seed existed,
    # recorded only the digest of the identity without it.
    before = copy.deepcopy(config)
    del before["num_repeats_add_seed"]
    saved = RunManifest.create(None, rows, before, global_config).with_identity(None)
    out = tmp_path / "r.jsonl"
    with RunLock(out) as lock:
        Ledger.create(out, saved, rows, lock=lock).close()
        with Ledger.open(out, lock=lock) as led:
            result = resume(led, config, global_config)
        assert result.verdict.adopted
        assert result.verdict.refusal is None
        with Ledger.open(out) as led:
            kinds = [e.kind for e in led.events()]
        assert kinds.count("identity_adopted") == 1
        assert result.state.identity is not None
        with Ledger.open(out, lock=lock) as led:  # from then on, compared like any
            again = resume(led, config, global_config)
        assert not again.verdict.adopted
        assert again.verdict.record is None


def test_rec_57_an_imported_digest_refuses_and_says_allow_unsafe(
    tmp_path: Path,
) -> None:
    config, global_config, rows = nemo_configuration()
    out = tmp_path / "r.jsonl"
    with RunLock(out) as lock:
        legacy = RunManifest.import_legacy(rows, config_digest="f" * 64)
        Ledger.create(out, legacy, rows, lock=lock).close()
        with (
            Ledger.open(out, lock=lock) as led,
            pytest.raises(IdentityMismatch, match="--allow-unsafe"),
        ):
            resume(led, config, global_config)
        with Ledger.open(out, lock=lock) as led:
            result = resume(led, config, global_config, allow_unsafe=True)
        assert result.verdict.overridden
        with Ledger.open(out, lock=lock) as led:
            assert resume(led, config, global_config).verdict.refusal is None


# -- REC-50: nothing changes before the gate passed ---------------------------------


def test_rec_50_a_refused_resume_modifies_nothing(run: Run) -> None:
    result = run.resume()
    with Ledger.open(run.out, lock=run.lock) as led:
        for row in result.plan.dispatch[:2]:
            led.reserve(row)
            led.record({**row, "reward": 1.0})
    with Ledger.open(run.out) as led:
        head = led.head()
    files = run.snapshot_of_files()
    with pytest.raises(IdentityMismatch):
        run.resume(changed(run.config, "num_repeats", 99))
    with Ledger.open(run.out) as led:
        assert led.head() == head
    assert run.snapshot_of_files() == files


def test_rec_56_dry_run_writes_nothing(run: Run) -> None:
    files = run.snapshot_of_files()
    with Ledger.open(run.out) as reader:
        head = reader.head()
        result = resume(reader, run.config, run.global_config, dry_run=True)
        assert reader.head() == head
    assert len(result.plan.dispatch) == 6
    assert run.snapshot_of_files() == files


def test_rec_56_appends_in_order_and_stamps_the_plan(run: Run) -> None:
    result = run.resume(
        extend_attempts=2,
        retry_terminal_timeouts=True,
        approvals=[(0, 0, 0)],
        reason="ops",
    )
    tail = run.kinds()[1:]
    assert tail == [
        "attempts_extended",
        "policy_changed",
        "rerun_approved",
        "resume_started",
        "attempts_released",
    ]
    row = result.plan.dispatch[0]
    assert row["_ng_attempt_index"] == 0
    assert row["_ng_run_id"] == result.state.run_id
    assert [r["_ng_task_index"] for r in result.plan.dispatch] == [0, 0, 1, 1, 2, 2]


def test_rec_56_a_writer_is_required_unless_dry_run(run: Run) -> None:
    with Ledger.open(run.out) as reader, pytest.raises(LedgerError, match="RunLock"):
        resume(reader, run.config, run.global_config)


# -- REC-11, REC-15, REC-60: operator options through resume ------------------------


def test_rec_11_extend_attempts_twice_raises_the_cap_once(run: Run) -> None:
    first = run.resume(extend_attempts=2)
    second = run.resume(extend_attempts=2)
    assert run.kinds().count("attempts_extended") == 1
    assert first.state.cap == second.state.cap == 5
    assert coverage(second.state).totals["extension"] == 2


def _timeout_row(row: dict[str, Any]) -> dict[str, Any]:
    return {
        **row,
        "_ng_failure_class": "timeout_exceeded",
        "_ng_failure_terminal": True,
        "_ng_failure_message": "agent ran out of time",
    }


def test_rec_15_opting_into_terminal_timeouts_is_agreed_by_check_and_coverage(
    run: Run,
) -> None:
    plan = run.resume().plan
    with Ledger.open(run.out, lock=run.lock) as led:
        for row in plan.dispatch:
            led.reserve(row)
            led.record(_timeout_row(row))
    with Ledger.open(run.out) as led:
        state = replay(led)
    assert coverage(state).decisions["terminal"] == 6
    with pytest.raises(RecoveryIncomplete) as caught:
        check_complete(state)
    assert not caught.value.retryable
    result = run.resume(retry_terminal_timeouts=True)
    assert len(result.plan.dispatch) == 6
    with Ledger.open(run.out) as led:
        after = replay(led)  # check and coverage read the policy from the log
    assert coverage(after).decisions["terminal"] == 0
    with pytest.raises(RecoveryIncomplete) as caught:
        check_complete(after)
    assert caught.value.retryable


# -- REC-10: the saved cap stands ------------------------------------------------


def test_rec_10_the_environment_cap_only_warns_on_resume(
    run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS", "7")
    result = run.resume()
    assert result.state.cap == 3
    assert any("NEMO_GYM_MAX_ROLLOUT_ATTEMPTS" in w for w in result.verdict.warnings)


# -- Published files (events.md) --------------------------------------------------


def test_published_files_are_projections_of_the_log(run: Run) -> None:
    result = run.resume()
    folder = run.out.parent / "rollouts_ledger"
    saved = json.loads((folder / "coverage.json").read_text())
    assert saved == coverage(result.state).to_dict()
    assert saved["as_of_seq"] == result.state.as_of_seq
    identity = json.loads((folder / "identity.json").read_text())
    assert identity == result.state.identity
    from projections import verify

    with Ledger.open(run.out) as led:
        assert verify(led) == []


# -- EV-14: snapshots -------------------------------------------------------------


def _decoded_count(led: Ledger) -> list[int]:
    # The seqs replay folds: it reads a ledger's rows for the fold (P-3).
    seen: list[int] = []
    original = led.rows_for_fold

    def counting(from_seq: int = 1) -> Iterator[tuple[int, str, bytes]]:
        for row in original(from_seq):
            seen.append(row[0])
            yield row

    led.rows_for_fold = counting  # type: ignore[method-assign]
    return seen


def test_ev_14_a_snapshot_limits_replay_to_the_tail(run: Run) -> None:
    result = run.resume()  # resume saves a snapshot at its head
    with Ledger.open(run.out, lock=run.lock) as led:
        for row in result.plan.dispatch:
            led.reserve(row)
        head = led.head()[0]
        seen = _decoded_count(led)
        tail_state = replay(led)
        assert seen
        assert min(seen) == result.state.as_of_seq + 1
        full = replay(led, use_snapshot=False)
    import msgspec

    assert msgspec.msgpack.encode(tail_state) == msgspec.msgpack.encode(full)
    assert tail_state.as_of_seq == head


@pytest.mark.parametrize("stale", ["policy", "code", "head"])
def test_ev_14_a_stale_snapshot_is_ignored(run: Run, stale: str) -> None:
    run.resume()
    with Ledger.open(run.out, lock=run.lock) as led:
        state = replay(led, use_snapshot=False)
        bogus = replay(led, use_snapshot=False)
        bogus.extension = 99  # a wrong state: trusting it would show
        policy = RecoveryPolicy()
        if stale == "policy":
            policy = RecoveryPolicy(fault_share=0.9)
            save_snapshot(led, bogus, policy)
        elif stale == "code":
            led.save_snapshot(
                bogus.as_of_seq,
                bytes.fromhex(bogus.head_hash),
                CODE_VERSION + "-old",
                policy.digest(),
                b"junk",
            )
        else:
            bogus.head_hash = "00" * 32
            save_snapshot(led, bogus, policy)
        assert replay(led).extension == state.extension == 0


def test_cli_9_verify_compares_a_stored_snapshot_with_a_refold(run: Run) -> None:
    from projections import verify

    run.resume()  # saves a snapshot at its head
    with Ledger.open(run.out, lock=run.lock) as led:
        assert verify(led) == []
        state = replay(led)
        state.extension = 42  # a snapshot that lies about what it covers
        save_snapshot(led, state, RecoveryPolicy())
        findings = verify(led)
    assert [f.check for f in findings] == ["snapshot"]
    assert findings[0].seq == state.as_of_seq
