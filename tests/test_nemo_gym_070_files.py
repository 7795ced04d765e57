"""NeMo Gym 0.7.0's files: an unterminated last line, inputs alone, its manifest.

REC-83: a last line that is a complete JSON object without its newline is
kept (import records it; a writer's open appends the newline and records a
``tail_repaired`` event saying so); only a last line that is no JSON object is
cut and saved (EV-12). REC-84: a folder holding only the materialized inputs
is a run with every rollout pending (``import`` accepts it; ``create`` given
the same bytes adopts it). REC-85: a NeMo Gym manifest of an unsupported
``schema_version`` or ``selection_policy`` is refused, exit 5, nothing
imported. Runs come from ``../shared/fixtures/nemo-gym-0.7`` (f01, f02) or are
built here; collector files stay byte-identical but for REC-83's newline.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cli import main
from ledger import CorruptLedger, Ledger, RunLock
from ledger.events import FailureSaved, ResultSaved, TailRepaired
from projections import decide, history, import_run, replay, resume, verify
from tests.prerequisites import unavailable
from tests.test_cli_support import CliRun, graded, read_jsonl
from tests.test_identity import nemo_configuration

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "nemo-gym-0.7"
F01 = "f01_unterminated_complete_last_line"
F02 = "f02_torn_last_line"
NEWLINE_SHA256 = hashlib.sha256(b"\n").hexdigest()

if not (FIXTURES / F01).is_dir():
    unavailable(f"no NeMo Gym 0.7.0 fixtures at {FIXTURES}")


def copy_run(name: str, folder: Path) -> Path:
    """A writable copy of a fixture run; its ``OUT``."""
    target = folder / name
    shutil.copytree(FIXTURES / name, target)
    target.chmod(0o755)
    for path in target.iterdir():
        path.chmod(0o644)
    return target / "rollouts.jsonl"


def collector_files(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.parent.iterdir()) if p.is_file()}


def invoke(*args: Any) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def tail_events(out: Path) -> list[TailRepaired]:
    with Ledger.open(out) as reader:
        return [e.body for e in reader.events() if isinstance(e.body, TailRepaired)]


def open_writer(out: Path) -> int:
    """A writer's open (EV-12's repair runs first); the head seq after it."""
    with RunLock(out) as lock, Ledger.open(out, lock=lock) as writer:
        return writer.head()[0]


def demo_configuration() -> tuple[dict[str, Any], dict[str, Any]]:
    """A configuration reaching the fixtures' ``demo_agent``."""
    config, servers, _ = nemo_configuration()
    servers = copy.deepcopy(servers)
    servers["demo_agent"] = servers["math_agent"]
    return {**config, "agent_name": "demo_agent"}, servers


# --- REC-83: a complete last line without its newline is kept -----------------------


def test_rec83_f01_import_keeps_the_unterminated_complete_row(tmp_path: Path) -> None:
    """REC-83 (f01): import records the last row; its saved answer stands."""
    out = copy_run(F01, tmp_path)
    before = collector_files(out)
    last = out.read_bytes().splitlines(keepends=True)[-1]
    assert not last.endswith(b"\n")
    for dry_run in (True, False):
        imported = import_run(out, dry_run=dry_run)
        assert imported.report.rows_rejected == 0
        assert imported.report.rows_imported == 2
        assert decide(imported.state, 0, 0).value == "complete"
        assert decide(imported.state, 0, 0).score == 0.5
        assert collector_files(out) == before  # the import never writes them
    saved = [e.body for e in imported.report.events if isinstance(e.body, ResultSaved)]
    kept = next(body for body in saved if body.rollout == 0)
    assert kept.location.length == len(last)  # the row as it is, no newline
    assert kept.location.row_sha256 == hashlib.sha256(last).hexdigest()
    source = next(s for s in imported.report.sources if s.file == "rollouts.jsonl")
    assert source.size == len(before["rollouts.jsonl"])


def test_rec83_f01_through_the_command_line(tmp_path: Path) -> None:
    """REC-83 (f01): ``import --dry-run`` and ``import`` exit 0, nothing rejected."""
    out = copy_run(F01, tmp_path)
    dry = invoke("import", out, "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    assert "imported: 2, rejected: 0" in dry.stdout
    assert not (out.parent / "rollouts_ledger" / "ledger.db").exists()
    real = invoke("import", out)
    assert real.exit_code == 0, real.stderr
    assert re.search(r"\n  complete +2\b", real.stdout)


def test_rec83_a_writers_open_appends_the_newline_and_records_it(
    tmp_path: Path,
) -> None:
    """REC-83: the open appends ``\\n``, records ``tail_repaired``; verify holds."""
    out = copy_run(F01, tmp_path)
    original = out.read_bytes()
    import_run(out)
    with Ledger.open(out) as reader:
        pending = [f for f in verify(reader) if f.check == "repair"]
        assert [(f.file, f.line) for f in pending] == [("rollouts.jsonl", 2)]
        assert "newline" in pending[0].message  # a reader only reports it
    assert out.read_bytes() == original
    head = open_writer(out)
    assert out.read_bytes() == original + b"\n"  # one byte added, nothing else
    [repaired] = tail_events(out)
    assert repaired.action == "newline_appended"
    assert (repaired.file, repaired.offset, repaired.length) == (
        "rollouts.jsonl",
        len(original),
        1,
    )
    assert (repaired.sha256, repaired.saved_as) == (NEWLINE_SHA256, "")
    assert not list((out.parent / "rollouts_ledger").glob("*.bin"))
    with Ledger.open(out) as reader:
        assert verify(reader) == []  # the recorded rows and offsets still hold
        assert "newline appended" in history(reader).entries[-1].summary
        state = replay(reader)
    assert decide(state, 0, 0).value == "complete"
    assert open_writer(out) == head  # a second open has nothing to repair
    assert out.read_bytes() == original + b"\n"


def test_rec83_the_kept_answer_is_not_dispatched_again(tmp_path: Path) -> None:
    """REC-83 (f01): resume plans nothing for the kept row (0.7.0: done)."""
    out = copy_run(F01, tmp_path)
    import_run(out)
    config, servers = demo_configuration()
    with RunLock(out) as lock, Ledger.open(out, lock=lock) as writer:
        resumed = resume(writer, config, servers, allow_unsafe=True)
    assert resumed.plan.dispatch == []
    assert resumed.plan.rejudge == []
    assert out.read_bytes().endswith(b"}\n")


def test_rec83_a_writers_open_from_the_command_line(tmp_path: Path) -> None:
    """REC-83: ``status`` names the pending newline; ``status --publish`` adds it."""
    out = copy_run(F01, tmp_path)
    assert invoke("import", out).exit_code == 0
    status = invoke("status", out)
    assert "rollouts.jsonl line 2: last row without its newline" in status.stdout
    assert invoke("verify", out).exit_code == 5
    assert invoke("status", out, "--publish").exit_code == 0
    assert out.read_bytes().endswith(b"\n")
    verified = invoke("verify", out)
    assert verified.exit_code == 0, verified.stdout
    assert "pending repairs" not in invoke("status", out).stdout


def test_rec83_a_newline_another_collector_appended_is_recorded(
    tmp_path: Path,
) -> None:
    """REC-83: 0.7.0's resume appended the newline itself; the open records it."""
    out = copy_run(F01, tmp_path)
    import_run(out)
    with out.open("ab") as handle:
        handle.write(b"\n")
    completed = out.read_bytes()
    open_writer(out)
    assert out.read_bytes() == completed  # nothing written: it was there
    [repaired] = tail_events(out)
    assert repaired.action == "newline_recorded"
    assert repaired.offset == len(completed) - 1
    with Ledger.open(out) as reader:
        assert verify(reader) == []


def test_rec83_bytes_written_onto_the_kept_row_refuse_the_open(
    tmp_path: Path,
) -> None:
    """REC-83: a row appended onto the kept row's line is named, nothing changed."""
    out = copy_run(F01, tmp_path)
    import_run(out)
    with out.open("ab") as handle:
        handle.write(b'{"_ng_task_index": 0}\n')
    before = out.read_bytes()
    with pytest.raises(CorruptLedger, match=r"line 2 of rollouts\.jsonl"):
        open_writer(out)
    assert out.read_bytes() == before
    assert tail_events(out) == []


def test_rec83_f02_a_last_line_cut_mid_json_is_still_cut_and_saved(
    tmp_path: Path,
) -> None:
    """REC-83 / EV-12 (f02): a last line that does not parse is torn: cut, saved."""
    out = copy_run(F02, tmp_path)
    original = out.read_bytes()
    refused = invoke("import", out)
    assert refused.exit_code == 3
    assert "rollouts.jsonl line 2: torn last line" in refused.stderr
    imported = import_run(out, skip_rejected=True)
    assert decide(imported.state, 0, 0).value == "pending"
    open_writer(out)
    cut_at = original.rfind(b"\n") + 1
    assert out.read_bytes() == original[:cut_at]
    [repaired] = tail_events(out)
    assert repaired.action == "cut"
    assert (out.parent / repaired.saved_as).read_bytes() == original[cut_at:]


@pytest.mark.parametrize("tail", [b"[1, 2]", b"42", b'"a row"', b"<PLACEHOLDER ROW>"])
def test_rec83_a_last_line_that_is_no_json_object_is_torn(
    tmp_path: Path, tail: bytes
) -> None:
    """REC-83: only a complete JSON *object* is kept; anything else is torn."""
    out = copy_run(F01, tmp_path)
    kept = out.read_bytes()
    out.write_bytes(kept + b"\n" + tail)
    imported = import_run(out, skip_rejected=True)
    assert [r.reason.split(":")[0] for r in imported.report.rejections] == [
        "torn last line"
    ]
    open_writer(out)
    assert out.read_bytes() == kept + b"\n"
    assert [r.action for r in tail_events(out)] == ["cut"]


def test_rec83_the_sidecars_last_line_is_kept_too(tmp_path: Path) -> None:
    """REC-83: the sidecar's unterminated complete row is a failure, kept."""
    out = copy_run(F01, tmp_path)
    rows = out.read_bytes().splitlines(keepends=True)
    out.write_bytes(rows[0])  # rollout 1's success
    failure = {
        "_ng_task_index": 0,
        "_ng_rollout_index": 0,
        "_ng_failure_class": "agent_request_failed",
        "reward": 0.0,
    }
    sidecar = out.with_name("rollouts_failures.jsonl")
    sidecar.write_bytes(json.dumps(failure).encode())
    imported = import_run(out)
    failures = [
        e.body for e in imported.report.events if isinstance(e.body, FailureSaved)
    ]
    assert [(f.task, f.rollout, f.sidecar_line) for f in failures] == [(0, 0, 0)]
    open_writer(out)
    assert sidecar.read_bytes() == json.dumps(failure).encode() + b"\n"
    assert [(r.file, r.action) for r in tail_events(out)] == [
        ("rollouts_failures.jsonl", "newline_appended")
    ]
    with Ledger.open(out) as reader:
        assert verify(reader) == []


def test_rec83_a_ledger_runs_last_row_without_its_newline_is_kept_and_recorded(
    tmp_path: Path,
) -> None:
    """REC-83 / EV-12: a collector killed before a row's newline; the row stands.

    A run created by rollout-ledger: the row of a released attempt is in
    ``OUT`` without its newline and without its event. The open appends the
    newline, records the row (actor ``repair``), and the rollout is complete;
    the next row lands on a line of its own.
    """
    run = CliRun(tmp_path, tasks=1, rollouts=2)
    run.create()
    _, plan = run.resume()
    first = {**plan[0], **graded(0.25)}
    data = json.dumps(first).encode()
    with run.out.open("ab") as handle:
        handle.write(data)  # killed before the newline and the event
    status = run.ok("status", run.out).stdout
    assert "rollouts.jsonl line 1: unrecorded row" in status
    assert "rollouts.jsonl line 1: last row without its newline" in status
    open_writer(run.out)
    assert run.out.read_bytes() == data + b"\n"
    with Ledger.open(run.out) as reader:
        events = list(reader.events())
        assert verify(reader) == []
        state = replay(reader)
    assert [(e.kind, e.actor) for e in events[-3:]] == [
        ("tail_repaired", "repair"),
        ("attempt_reserved", "repair"),
        ("result_saved", "repair"),
    ]
    assert events[-3].body.action == "newline_appended"
    key = (first["_ng_task_index"], first["_ng_rollout_index"])
    assert decide(state, *key).value == "complete"
    _, again = run.resume()
    assert key not in [(r["_ng_task_index"], r["_ng_rollout_index"]) for r in again]
    run.record([{**again[0], **graded(1.0)}])
    saved = read_jsonl(run.out)  # two lines, the kept row first
    assert len(saved) == 2
    assert saved[0] == first
    assert run.ok("verify", run.out).exit_code == 0


# --- REC-84: materialized inputs alone are a run, every rollout pending -------------


def inputs_only(folder: Path) -> tuple[Path, bytes]:
    """A folder a collector left before its first row: OUT and the inputs' bytes."""
    out = copy_run(F01, folder)
    out.unlink()
    return out, out.with_name("rollouts_materialized_inputs.jsonl").read_bytes()


def test_rec84_import_of_materialized_inputs_alone(tmp_path: Path) -> None:
    """REC-84: ``import OUT`` (OUT missing) records every rollout pending."""
    out, data = inputs_only(tmp_path)
    dry = invoke("import", out, "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    assert re.search(r"\n  pending +2\b", dry.stdout)
    imported = import_run(out)
    assert [e.kind for e in imported.report.events] == [
        "run_created",
        "legacy_imported",
    ]
    assert imported.coverage.decisions["pending"] == 2
    assert not out.exists()  # nothing created beside the inputs
    assert out.with_name("rollouts_materialized_inputs.jsonl").read_bytes() == data
    with Ledger.open(out) as reader:
        assert verify(reader) == []
    assert open_writer(out) == 2


def collector_inputs(run: CliRun) -> tuple[Path, bytes]:
    """The materialized inputs as a collector writes them: its own key order."""
    rows = read_jsonl(run.inputs)
    data = b"".join(json.dumps(row, indent=None).encode() + b"\n" for row in rows)
    run.out.parent.mkdir(parents=True)
    target = run.out.with_name("rollouts_materialized_inputs.jsonl")
    target.write_bytes(data)
    return target, data


@pytest.mark.parametrize("given", ["the file itself", "a copy"])
def test_rec84_create_adopts_byte_identical_inputs(tmp_path: Path, given: str) -> None:
    """REC-84: ``create --inputs`` of the same bytes adopts the run, files kept."""
    run = CliRun(tmp_path, tasks=2, rollouts=2)
    target, data = collector_inputs(run)
    inputs = target
    if given == "a copy":
        inputs = tmp_path / "copy.jsonl"
        inputs.write_bytes(data)
    created = run.invoke("create", run.out, "--inputs", inputs, *run.config_args())
    assert created.exit_code == 0, created.stderr
    assert target.read_bytes() == data  # byte-identical, never re-encoded
    assert not run.out.exists()
    with Ledger.open(run.out) as reader:
        assert verify(reader) == []
        assert replay(reader).manifest["materialized_digest"] == (
            hashlib.sha256(data).hexdigest()
        )
    _, plan = run.resume()
    assert sorted((r["_ng_task_index"], r["_ng_rollout_index"]) for r in plan) == [
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
    ]


def test_rec84_create_with_other_inputs_still_refuses(tmp_path: Path) -> None:
    """REC-84: other rows than the collector's are refused, with the way on."""
    run = CliRun(tmp_path, tasks=2, rollouts=2)
    target, data = collector_inputs(run)
    other = tmp_path / "other.jsonl"
    other.write_bytes(data.splitlines(keepends=True)[0])
    refused = run.invoke("create", run.out, "--inputs", other, *run.config_args())
    assert refused.exit_code == 3
    message = refused.stderr
    assert "rollouts_materialized_inputs.jsonl exists" in message
    assert "pass that file as --inputs" in message
    assert "rollout-ledger import" in message
    assert target.read_bytes() == data
    assert not (run.ledger_dir / "ledger.db").exists()


# --- REC-85: a manifest of an unsupported schema or selection is refused ------------


@pytest.mark.parametrize(
    ("field", "value", "shown"),
    [
        ("schema_version", 3, "schema_version 3"),
        ("schema_version", "2", "schema_version '2'"),
        (
            "selection_policy",
            "latest_dispatched",
            "selection_policy 'latest_dispatched'",
        ),
        ("selection_policy", "any_success", "selection_policy 'any_success'"),
        ("schema1:selection_policy", "any_success", "selection_policy 'any_success'"),
        ("selection_policy", None, "selection_policy None"),
    ],
)
def test_rec85_unsupported_manifest_refused_exit_5(
    tmp_path: Path, field: str, value: object, shown: str
) -> None:
    """REC-85: exit 5 naming the file, the field and its value; nothing imported."""
    out = copy_run(F01, tmp_path)
    manifest = {
        "schema_version": 2,
        "selection_policy": "latest_allocated",
        "run_id": "5f" * 16,
        "config_digest": "unverified",
    }
    if field.startswith("schema1:"):  # schema 1 accepts only its own selection too
        manifest["schema_version"] = 1
        field = field.removeprefix("schema1:")
    manifest[field] = value
    out.with_name("rollouts_manifest.json").write_text(json.dumps(manifest))
    before = collector_files(out)
    for extra in (["--dry-run"], []):
        refused = invoke("import", out, *extra)
        assert refused.exit_code == 5, refused.stderr
        assert "rollouts_manifest.json" in refused.stderr
        assert shown in refused.stderr
        assert "latest_allocated" in refused.stderr or field == "schema_version"
        assert "REC-" not in refused.stderr  # plain words, no rule ids
    assert collector_files(out) == before
    assert not (out.parent / "rollouts_ledger" / "ledger.db").exists()


@pytest.mark.parametrize("selection", ["latest_allocated", None])
def test_rec85_latest_allocated_or_no_selection_is_imported(
    tmp_path: Path, selection: str | None
) -> None:
    """REC-85: ``latest_allocated``, or no selection_policy (its default), imports."""
    out = copy_run(F01, tmp_path)
    manifest: dict[str, Any] = {"schema_version": 1, "run_id": "5f" * 16,
                                "config_digest": "unverified"}  # fmt: skip
    if selection is not None:
        manifest["selection_policy"] = selection
    out.with_name("rollouts_manifest.json").write_text(json.dumps(manifest))
    imported = import_run(out)
    assert imported.state.run_id == "5f" * 16
