"""REC-86: rows NeMo Gym 0.7.0's own ``--resume`` appended to a run that has a ledger.

A run is imported (or created by the ledger), then 0.7.0 continues it without
the ledger: it appends rows to ``OUT`` and the sidecar, numbering attempts by
the sidecar rows of each key and stamping no ``_ng_run_id``
(``../shared/reference/nemo_gym_0_7.md`` 1.1, 1.2, finding 11). A second
``import`` adopts exactly those rows; ``status``, ``check``, ``verify`` and
``resume`` name them and the command until then; a row edited before the
recorded end is still refused (R-7). Collector files stay byte-identical
through every command.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from omegaconf import OmegaConf

from cli import main
from ledger import CorruptLedger, Ledger, import_legacy_run
from projections import import_run, resume, verify
from tests.test_identity import nemo_configuration

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "nemo-gym-0.7"
COLLECTOR_FILES = (
    "rollouts.jsonl",
    "rollouts_failures.jsonl",
    "rollouts_materialized_inputs.jsonl",
)
#: A rule id in user-facing text (none may appear there).
RULE_ID = re.compile(r"\b[A-Z]{1,4}-\d+\b")

Row = dict[str, Any]

if not FIXTURES.is_dir():
    pytest.skip(f"no NeMo Gym 0.7.0 runs at {FIXTURES}", allow_module_level=True)


def cli(*args: Any) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def copy_run(name: str, folder: Path) -> Path:
    shutil.copytree(FIXTURES / name, folder)
    return folder / "rollouts.jsonl"


def collector_bytes(out: Path) -> dict[str, bytes]:
    return {
        name: (out.parent / name).read_bytes()
        for name in COLLECTOR_FILES
        if (out.parent / name).exists()
    }


def read_rows(path: Path) -> list[Row]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_bytes().splitlines() if line]


def sidecar_of(out: Path) -> Path:
    return out.with_name("rollouts_failures.jsonl")


def append_as_070(out: Path, row: Row, *, sidecar: bool) -> None:
    """Append ``row`` as 0.7.0's resume writes it: attempt = sidecar rows of its key."""
    key = (row["_ng_task_index"], row["_ng_rollout_index"])
    count = sum(
        (r["_ng_task_index"], r["_ng_rollout_index"]) == key
        for r in read_rows(sidecar_of(out))
    )
    row = {k: v for k, v in row.items() if k not in ("_ng_attempt_index", "_ng_run_id")}
    if count:
        row["_ng_attempt_index"] = count  # 0.7.0 stamps it only when > 0
    target = sidecar_of(out) if sidecar else out
    with target.open("ab") as handle:
        handle.write(json.dumps(row).encode() + b"\n")


def first_failure(out: Path) -> Row:
    return read_rows(sidecar_of(out))[0]


def success_for(out: Path, failure: Row) -> Row:
    """0.7.0's main row for ``failure``'s key: the run's success row, rekeyed."""
    success = copy.deepcopy(read_rows(out)[0])
    success["_ng_task_index"] = failure["_ng_task_index"]
    success["_ng_rollout_index"] = failure["_ng_rollout_index"]
    return success


def configuration(folder: Path) -> tuple[Row, Row, list[Path]]:
    """A configuration that reaches the fixtures' demo agent and environment."""
    config, servers, _ = nemo_configuration()
    servers = {**servers, "demo_agent": servers["math_agent"]}
    servers["demo_env"] = servers["math_with_judge"]
    paths = []
    for name, data in (("collection.yaml", config), ("servers.yaml", servers)):
        OmegaConf.save(OmegaConf.create(dict(data)), folder / name)
        paths.append(folder / name)
    return config, servers, paths


def planned(out: Path, config: Row, servers: Row) -> list[tuple[int, int, int]]:
    with Ledger.open(out) as reader:
        found = resume(reader, config, servers, allow_unsafe=True, dry_run=True)
    return [
        (r["_ng_task_index"], r["_ng_rollout_index"], r["_ng_attempt_index"])
        for r in found.plan.dispatch
    ]


def outcomes(out: Path) -> list[tuple[str, str, int, int, int]]:
    with Ledger.open(out) as reader:
        return [
            (e.kind, e.actor, e.body.task, e.body.rollout, e.body.attempt)  # type: ignore[attr-defined]
            for e in reader.events()
            if e.kind in ("result_saved", "failure_saved", "omission_saved")
        ]


def head(out: Path) -> tuple[int, bytes]:
    with Ledger.open(out) as reader:
        return reader.head()


class Unchanged:
    """Asserts the collector files are byte-identical across the commands run."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.before = collector_bytes(out)

    def __enter__(self) -> None:
        self.before = collector_bytes(self.out)

    def __exit__(self, *exc: object) -> None:
        assert collector_bytes(self.out) == self.before


def assert_names_waiting(result: Result, out: Path, file: str, rows: int) -> None:
    text = result.stdout + result.stderr
    plural = "row" if rows == 1 else "rows"
    assert f"{file}: {rows} {plural} from line" in text, text
    assert f"rollout-ledger import {out}" in text, text
    assert "without the ledger" in text
    assert not RULE_ID.search(text), text


@pytest.mark.parametrize(
    ("name", "attempt", "plans"),
    [
        # One gateway failure: 0.7.0 and the ledger both dispatch attempt 1, then 2.
        ("c01_agent_request_failed_503", 1, ([(0, 0, 1)], [(0, 0, 2)])),
        # Three failures, the cap: 0.7.0 goes on only with a raised
        # NEMO_GYM_MAX_ROLLOUT_ATTEMPTS; the ledger's cap of 3 dispatches nothing.
        ("f08_three_failures_cap", 3, ([], [])),
    ],
)
def test_rec_86_a_mixed_run_twice_over(
    tmp_path: Path, name: str, attempt: int, plans: tuple[list[Any], list[Any]]
) -> None:
    """REC-86, REC-72: import, 0.7.0 appends, import adopts; twice; then nothing."""
    out = copy_run(name, tmp_path / "run")
    config, servers, _ = configuration(tmp_path)
    same = Unchanged(out)
    with same:
        assert cli("import", out).exit_code == 0
    failure = first_failure(out)
    key = (failure["_ng_task_index"], failure["_ng_rollout_index"])
    assert planned(out, config, servers) == plans[0]

    # Round 1: 0.7.0 retries the failed rollout, and it fails again (sidecar).
    append_as_070(out, failure, sidecar=True)
    with same:
        adopted = cli("import", out)
    assert adopted.exit_code == 0, adopted.stderr
    assert "adopted 1 row" in adopted.stdout
    assert f"rollouts_failures.jsonl: 1 from line {attempt + 1}" in adopted.stdout
    assert not RULE_ID.search(adopted.stdout)
    assert outcomes(out)[-1] == ("failure_saved", "import", *key, attempt)
    with same:
        assert cli("verify", out).exit_code == 0
    assert planned(out, config, servers) == plans[1]

    # Round 2: 0.7.0 retries again and succeeds (OUT), numbered by the sidecar.
    append_as_070(out, success_for(out, failure), sidecar=False)
    with same:
        adopted = cli("import", out)
    assert "adopted 1 row" in adopted.stdout
    assert "rollouts.jsonl: 1 from line 2" in adopted.stdout
    assert outcomes(out)[-1] == ("result_saved", "import", *key, attempt + 1)
    with same:
        verified = cli("verify", out)
    assert verified.exit_code == 0
    assert "waiting" not in verified.stdout
    assert planned(out, config, servers) == []  # the success is not dispatched again
    with same:
        assert cli("check", out).exit_code == 0

    # A third import: nothing new, nothing recorded, and it says so.
    before = head(out)
    with same:
        again = cli("import", out)
    assert again.exit_code == 0
    assert "nothing to adopt" in again.stdout
    assert head(out) == before


def test_rec_86_status_check_verify_resume_name_the_waiting_rows(
    tmp_path: Path,
) -> None:
    """REC-86: readers name the rows and the command; resume refuses (exit 3)."""
    out = copy_run("c01_agent_request_failed_503", tmp_path / "run")
    _, _, (config, servers) = configuration(tmp_path)
    import_run(out)
    append_as_070(out, first_failure(out), sidecar=True)
    same = Unchanged(out)
    with same:
        status = cli("status", out)
        checked = cli("check", out)
        verified = cli("verify", out)
        dry = cli("resume", out, "--config", config, "--global-config", servers,
                  "--allow-unsafe", "--dry-run")  # fmt: skip
        real = cli("resume", out, "--config", config, "--global-config", servers,
                   "--allow-unsafe")  # fmt: skip
    assert status.exit_code == 0
    assert "unrecorded row" not in status.stdout
    assert_names_waiting(status, out, "rollouts_failures.jsonl", 1)
    assert checked.exit_code == 75
    assert_names_waiting(checked, out, "rollouts_failures.jsonl", 1)
    # Waiting rows are not damage: verify passes and lists them.
    assert verified.exit_code == 0
    assert "waiting to be adopted" in verified.stdout
    assert_names_waiting(verified, out, "rollouts_failures.jsonl", 1)
    for refused in (dry, real):
        assert refused.exit_code == 3
        assert_names_waiting(refused, out, "rollouts_failures.jsonl", 1)
    status_json = json.loads(cli("status", out, "--json").stdout)
    assert status_json["waiting"] == [
        {"file": "rollouts_failures.jsonl", "rows": 1, "first_line": 2}
    ]
    assert status_json["pending_repairs"] == []
    with Ledger.open(out) as reader:
        assert verify(reader) == []


def test_rec_86_r_7_a_row_edited_before_the_recorded_end_is_refused(
    tmp_path: Path,
) -> None:
    """REC-86 with R-7: an edit in place refuses the import, new rows or not."""
    out = copy_run("c01_agent_request_failed_503", tmp_path / "run")
    import_run(out)
    append_as_070(out, first_failure(out), sidecar=True)
    sidecar = sidecar_of(out)
    data = sidecar.read_bytes()
    edited = data.replace(b"503 Service", b"504 Service", 1)  # line 1, same length
    assert len(edited) == len(data)
    sidecar.write_bytes(edited)
    before = head(out)
    same = Unchanged(out)
    for dry_run in ((), ("--dry-run",)):
        with same:
            refused = cli("import", out, *dry_run)
        assert refused.exit_code == 5
        assert "line 1 of rollouts_failures.jsonl no longer holds the row" in (
            refused.stderr
        )
    with pytest.raises(CorruptLedger, match="no longer holds the row"):
        import_legacy_run(out)
    assert head(out) == before


def test_rec_86_dry_run_says_what_would_be_adopted_and_writes_nothing(
    tmp_path: Path,
) -> None:
    """REC-86, REC-74: --dry-run lists the adoption and writes nothing."""
    out = copy_run("c01_agent_request_failed_503", tmp_path / "run")
    import_run(out)
    append_as_070(out, first_failure(out), sidecar=True)
    ledger_dir = out.with_name("rollouts_ledger")

    def files() -> dict[str, bytes]:
        # SQLite's -shm and -wal come and go with any reader of a WAL log.
        return {
            p.name: p.read_bytes()
            for p in ledger_dir.iterdir()
            if p.is_file() and not p.name.endswith(("-shm", "-wal"))
        }

    before = files()
    with Unchanged(out):
        dry = cli("import", out, "--dry-run")
    assert dry.exit_code == 0
    assert "would adopt 1 row" in dry.stdout
    assert "nothing written" in dry.stdout
    assert files() == before
    document = json.loads(cli("import", out, "--dry-run", "--json").stdout)
    assert document["adopting"] is True
    assert document["adopted"] == [
        {"file": "rollouts_failures.jsonl", "rows": 1, "first_line": 2}
    ]
    assert document["coverage"]["decisions"]["retry"] == 1


def test_rec_86_the_api_adopts_with_its_documented_signature(tmp_path: Path) -> None:
    """REC-86 through ``import_legacy_run(out, *, inputs, skip_rejected, dry_run)``."""
    out = copy_run("c01_agent_request_failed_503", tmp_path / "run")
    first = import_legacy_run(out)
    assert not first.adopting
    failure = first_failure(out)
    append_as_070(out, failure, sidecar=True)
    append_as_070(out, success_for(out, failure), sidecar=False)
    dry = import_legacy_run(out, dry_run=True)
    assert dry.dry_run
    assert dry.rows_imported == 2
    report = import_legacy_run(out, inputs=out.with_name(COLLECTOR_FILES[2]))
    assert report.adopting
    assert report.rows_imported == 2
    assert [(e.kind, e.actor, e.body.attempt) for e in report.events] == [  # type: ignore[attr-defined]
        ("failure_saved", "import", 1),
        ("result_saved", "import", 2),  # two sidecar rows of its key: attempt 2
    ]
    assert [e.seq for e in report.events] == [e.seq for e in dry.events]
    assert [(a.file, a.rows, a.first_line) for a in report.adopted] == [
        ("rollouts_failures.jsonl", 1, 2),
        ("rollouts.jsonl", 1, 2),
    ]
    assert import_legacy_run(out).rows_imported == 0


def test_rec_86_an_appended_line_that_is_no_row_refuses_the_adoption(
    tmp_path: Path,
) -> None:
    """REC-86, REC-71: a rejected line is listed; --skip-rejected does not skip it."""
    out = copy_run("c01_agent_request_failed_503", tmp_path / "run")
    import_run(out)
    append_as_070(out, first_failure(out), sidecar=True)
    with out.open("ab") as handle:
        handle.write(b"not json\n")
    before = head(out)
    for options in ((), ("--skip-rejected",)):
        with Unchanged(out):
            refused = cli("import", out, *options)
        assert refused.exit_code == 3
        assert "rollouts.jsonl line 2: not JSON" in refused.stderr
        assert "nothing was recorded" in refused.stderr
    assert head(out) == before


def test_rec_86_a_run_the_ledger_created_is_adopted_too(tmp_path: Path) -> None:
    """REC-86: a run created by the ledger, then continued by 0.7.0 alone."""
    _, _, (config, servers) = configuration(tmp_path)
    inputs = tmp_path / "rows.jsonl"
    rows = [
        json.loads(line)
        for line in (FIXTURES / "c01_agent_request_failed_503" / COLLECTOR_FILES[2])
        .read_bytes()
        .splitlines()
    ]
    inputs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "run" / "rollouts.jsonl"
    out.parent.mkdir()
    created = cli("create", out, "--inputs", inputs, "--config", config,
                  "--global-config", servers)  # fmt: skip
    assert created.exit_code == 0, created.stderr
    # 0.7.0 resumes it (the materialized inputs are there): a failure, then a
    # success, neither stamped with a run id.
    template = json.loads(
        (FIXTURES / "c01_agent_request_failed_503" / "rollouts_failures.jsonl")
        .read_bytes()
        .splitlines()[0]
    )
    out.touch()
    append_as_070(out, template, sidecar=True)
    append_as_070(out, success_for_key(0, 1), sidecar=False)
    waiting = cli("status", out)
    assert_names_waiting(waiting, out, "rollouts_failures.jsonl", 1)
    with Unchanged(out):
        adopted = cli("import", out)
    assert adopted.exit_code == 0, adopted.stderr
    assert "adopted 2 rows" in adopted.stdout
    assert outcomes(out) == [
        ("failure_saved", "import", 0, 0, 0),
        ("result_saved", "import", 0, 1, 0),
    ]
    assert cli("verify", out).exit_code == 0
    resumed = cli("resume", out, "--config", config, "--global-config", servers,
                  "--dry-run")  # fmt: skip
    assert resumed.exit_code == 0, resumed.stderr


def success_for_key(task: int, rollout: int) -> Row:
    success = json.loads(
        (FIXTURES / "c01_agent_request_failed_503" / "rollouts.jsonl")
        .read_bytes()
        .splitlines()[0]
    )
    success.update(_ng_task_index=task, _ng_rollout_index=rollout)
    return success


def test_rec_86_import_from_adopts_waiting_rows_before_loading_into_postgresql(
    tmp_path: Path, pg_url: str
) -> None:
    """REC-86 with SC-2: ``import URL --from OUT`` adopts first, then loads."""
    out = copy_run("c01_agent_request_failed_503", tmp_path / "run")
    import_run(out)
    append_as_070(out, first_failure(out), sidecar=True)
    url = f"{pg_url}?run=adopt-{uuid.uuid4().hex[:10]}"
    with Unchanged(out):
        dry = cli("import", url, "--from", out, "--dry-run")
        assert dry.exit_code == 0, dry.stderr
        assert "would adopt 1 row" in dry.stdout
        loaded = cli("import", url, "--from", out)
    assert loaded.exit_code == 0, loaded.stderr
    assert "adopted 1 row" in loaded.stdout
    assert outcomes(out)[-1] == ("failure_saved", "import", 0, 0, 1)
    assert cli("head", url).stdout == cli("head", out).stdout
    assert cli("verify", url).exit_code == 0


def test_rec_86_a_torn_last_line_is_left_to_the_writer_s_open(tmp_path: Path) -> None:
    """REC-86, EV-12: the complete rows are adopted; a cut-short last line is not."""
    out = copy_run("c01_agent_request_failed_503", tmp_path / "run")
    import_run(out)
    append_as_070(out, first_failure(out), sidecar=True)
    with sidecar_of(out).open("ab") as handle:
        handle.write(b'{"_ng_task_index": 0, "_ng_rollout_in')  # 0.7.0 killed mid-write
    with Unchanged(out):
        adopted = cli("import", out)
    assert adopted.exit_code == 0, adopted.stderr
    assert "adopted 1 row" in adopted.stdout
    with Ledger.open(out) as reader:
        pending = [(p.file, p.line, p.what) for p in reader.pending_repairs()]
    assert pending == [("rollouts_failures.jsonl", 3, "torn last line")]


def test_rec_86_rec_72_unstamped_rows_count_the_recorded_sidecar_rows(
    tmp_path: Path,
) -> None:
    """REC-72 over the whole run: rows without an attempt count every sidecar row."""
    out = copy_run("c01_agent_request_failed_503", tmp_path / "run")
    import_run(out)
    failure = first_failure(out)
    # An older collector's resume: it stamps no _ng_attempt_index at all.
    for target, row in ((sidecar_of(out), failure), (out, success_for(out, failure))):
        with target.open("ab") as handle:
            handle.write(json.dumps(row).encode() + b"\n")
    report = import_legacy_run(out)
    assert [(e.kind, e.body.attempt) for e in report.events] == [  # type: ignore[attr-defined]
        ("failure_saved", 1),  # one earlier sidecar row of its key, recorded before
        ("result_saved", 2),  # two sidecar rows of its key in all
    ]


def test_issue_30_rec_86_a_large_dry_run_tells_waiting_rows_beside_its_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A dry run of a large log reads the waiting rows in a second process
    while it replays, and refuses as a small one does (the same words)."""
    from ledger import cpus
    from tests.internals import aside_module

    out = copy_run("c01_agent_request_failed_503", tmp_path / "run")
    _, _, (config, servers) = configuration(tmp_path)
    import_run(out)
    append_as_070(out, first_failure(out), sidecar=True)
    args = ("resume", out, "--config", config, "--global-config", servers,
            "--allow-unsafe", "--dry-run")  # fmt: skip
    here = cli(*args)
    monkeypatch.setattr(aside_module, "ASIDE_FROM", 0)  # every log is large
    if cpus() < 2:
        pytest.skip("one CPU: a dry run tells its waiting rows itself")

    def not_here(self: Ledger) -> object:
        raise AssertionError("the waiting rows were read in this process")

    monkeypatch.setattr(Ledger, "waiting", not_here)  # the spawned one is not
    aside = cli(*args)
    assert here.exit_code == aside.exit_code == 3
    assert aside.stderr == here.stderr
    assert_names_waiting(aside, out, "rollouts_failures.jsonl", 1)


def test_issue_30_a_large_replay_reads_the_inputs_beside_it_and_plans_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With nothing trusted of the inputs' file, a large resume reads it in a
    second process while it replays: the same plan, and no read here."""
    import time

    from ledger import cpus
    from tests.internals import aside_module, current_manifest_module

    out = copy_run("c01_agent_request_failed_503", tmp_path / "run")
    config, servers, _ = configuration(tmp_path)
    import_run(out)
    with sqlite3.connect(out.parent / "rollouts_ledger" / "ledger.db") as db:
        db.execute("DELETE FROM snapshots")  # the worst case: a full replay
    expected = planned(out, config, servers)
    assert expected  # the run has rollouts to dispatch
    if cpus() < 2:
        pytest.skip("one CPU: a resume reads its inputs itself")
    time.sleep(2.1)  # the inputs written long enough before they are read
    monkeypatch.setattr(aside_module, "ASIDE_FROM", 0)

    def not_here(chunks: object) -> object:
        raise AssertionError("the inputs were read in this process")

    monkeypatch.setattr(current_manifest_module, "_agents_and_digest", not_here)
    assert planned(out, config, servers) == expected
