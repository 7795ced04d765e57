"""SC-1, SC-2, SC-4, SC-5 through the command line: every command takes a run URL.

The same run is driven as ``tests/test_cli_run.py`` drives a file-based one,
but named by ``postgresql://...?run=NAME`` on the test server (SC-6). The
files a command writes on a file-based run are rows in the store here;
``export --files`` brings them back and ``verify`` checks them offline.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from ledger import Ledger
from tests.internals import SCHEMA, STORE_ENV
from tests.test_cli_support import CliRun, graded, read_jsonl

ROOT = Path(__file__).resolve().parents[1]


class PgCliRun(CliRun):
    """A ``CliRun`` whose ``OUT`` is a run URL in the test's own database."""

    def __init__(self, folder: Path, run: str, database: str) -> None:
        super().__init__(folder)
        self.run = run
        self.database = database
        self.url = f"{database}?run={run}"
        self.out = self.url  # type: ignore[assignment]


@pytest.fixture
def pg_run(tmp_path: Path, pg_url: str) -> PgCliRun:
    return PgCliRun(tmp_path, f"cli-{uuid.uuid4().hex[:10]}", pg_url)


def _complete(run: PgCliRun) -> None:
    run.create()
    run.collect(lambda row: graded(1.0))


def test_sc_1_create_resume_record_status_check_on_a_run_url(pg_run: PgCliRun) -> None:
    created = pg_run.create()
    # issue 29: `run URL ... -- COMMAND` runs as printed (a coordinator and a worker)
    assert (
        f"next: rollout-ledger run {shlex.quote(pg_run.url)} --config" in created.stdout
    )
    _, plan = pg_run.resume()
    assert len(plan) == 6
    assert all(line["_ng_run_id"] == plan[0]["_ng_run_id"] for line in plan)
    pg_run.record([{**line, **graded(1.0)} for line in plan[:4]])
    status = pg_run.ok("status", pg_run.url, "--json")
    assert json.loads(status.stdout)["coverage"]["decisions"]["complete"] == 4
    check = pg_run.invoke("check", pg_run.url)
    assert check.exit_code == 75
    assert "2 pending" in check.stderr
    assert not (pg_run.folder / "results").exists()  # SC-2: no files beside it


def test_sc_2_rows_are_stored_with_their_events_and_results_reads_them(
    pg_run: PgCliRun, pg_admin: psycopg.Connection[Any]
) -> None:
    _complete(pg_run)
    stored = pg_admin.execute(
        f"SELECT r.seq, e.kind, r.sha256, r.data FROM {SCHEMA}.rows r "
        f"JOIN {SCHEMA}.events e USING (run, seq) WHERE r.run = %s ORDER BY r.seq",
        (pg_run.run,),
    ).fetchall()
    assert [kind for _, kind, _, _ in stored] == ["result_saved"] * 6
    import hashlib

    for _, _, digest, data in stored:
        assert hashlib.sha256(bytes(data)).hexdigest() == digest
    out = pg_run.folder / "selected.jsonl"
    pg_run.ok("results", pg_run.url, "-o", out)
    rows = read_jsonl(out)
    assert len(rows) == 6
    assert {row["_ng_decision"] for row in rows} == {"graded"}
    saved = {json.loads(bytes(data))["_ng_task_index"] for *_, data in stored}
    assert {row["_ng_task_index"] for row in rows} == saved


def test_sc_5_export_files_then_verify_gives_the_same_head_hash(
    pg_run: PgCliRun,
) -> None:
    _complete(pg_run)
    head = pg_run.ok("head", pg_run.url).stdout
    assert pg_run.ok("verify", pg_run.url).stdout.startswith("verified: seq")
    copy = pg_run.folder / "copy"
    exported = pg_run.ok("export", pg_run.url, "--files", copy)
    assert head.split()[1] in exported.stdout
    out = copy / f"{pg_run.run}.jsonl"
    assert len(read_jsonl(out)) == 6
    assert (copy / f"{pg_run.run}_materialized_inputs.jsonl").is_file()
    assert (copy / f"{pg_run.run}_ledger" / "manifest.json").is_file()
    assert pg_run.ok("head", out).stdout == head
    assert pg_run.ok("verify", out).exit_code == 0
    assert pg_run.ok("verify", copy).stdout == pg_run.ok("verify", out).stdout
    again = pg_run.invoke("export", pg_run.url, "--files", copy)
    assert again.exit_code == 3  # never over an existing run
    assert "exists" in again.stderr


def test_sc_5_import_from_a_file_run_keeps_its_events_and_hashes(
    tmp_path: Path, pg_url: str
) -> None:
    (tmp_path / "files").mkdir()
    files = CliRun(tmp_path / "files")
    files.create()
    files.collect(lambda row: graded(0.5))
    head = files.ok("head", files.out).stdout
    run = f"imp-{uuid.uuid4().hex[:10]}"
    url = f"{pg_url}?run={run}"
    loaded = files.ok("import", url, "--from", files.out)
    assert head.split()[1] in loaded.stdout
    assert files.ok("head", url).stdout == head
    assert files.ok("verify", url).exit_code == 0
    assert len(read_jsonl_lines(files, url)) == 6
    resumed = files.invoke("resume", url, *files.config_args(), "--dry-run")
    assert resumed.exit_code == 0, resumed.stderr
    # the import is whole or nothing: a second one into the same run refuses
    assert files.invoke("import", url, "--from", files.out).exit_code == 3


def read_jsonl_lines(run: CliRun, url: str) -> list[Any]:
    out = run.folder / "pg-results.jsonl"
    run.ok("results", url, "-o", out)
    return read_jsonl(out)


def test_sc_1_a_bare_run_name_finds_its_store_in_the_environment(
    pg_run: PgCliRun, monkeypatch: pytest.MonkeyPatch
) -> None:
    pg_run.create()
    monkeypatch.setenv(STORE_ENV, pg_run.database)
    monkeypatch.chdir(pg_run.folder)
    assert pg_run.ok("head", pg_run.run).stdout == pg_run.ok("head", pg_run.url).stdout


def test_sc_1_a_url_with_a_password_is_refused_and_never_echoed(
    pg_run: PgCliRun,
) -> None:
    secret = "s3cr3t-Pa55"
    url = pg_run.url.replace("postgres@", f"postgres:{secret}@")
    for command in (
        ["status", url],
        ["create", url, "--inputs", pg_run.inputs, *pg_run.config_args()],
    ):
        result = pg_run.invoke(*command)
        assert result.exit_code == 3
        assert secret not in result.stdout + result.stderr
        assert "password" in result.stderr


def test_sc_4_doctor_names_the_coordinator_holding_the_lock(
    pg_run: PgCliRun,
) -> None:
    pg_run.create()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys, time
                from ledger import RunLock
                with RunLock({pg_run.url!r}):
                    print("held", flush=True)
                    sys.stdin.readline()
                """
            ),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        doctor = pg_run.ok("doctor", pg_run.url)
        assert f"held by pid {holder.pid} on host" in doctor.stdout
        refused = pg_run.invoke("status", pg_run.url, "--publish")
        assert refused.exit_code == 4  # a second coordinator: LockHeld
        assert f"pid {holder.pid}" in refused.stderr
    finally:
        holder.communicate("\n", timeout=30)
    assert "free" in pg_run.ok("doctor", pg_run.url).stdout


def test_sc_4_history_and_export_read_the_run_without_its_lock(
    pg_run: PgCliRun,
) -> None:
    _complete(pg_run)
    history = pg_run.ok("history", pg_run.url, "--json")
    kinds = [entry["kind"] for entry in json.loads(history.stdout)["entries"]]
    assert kinds.count("result_saved") == 6
    events = pg_run.folder / "events.jsonl"
    pg_run.ok("export", pg_run.url, "-o", events)
    lines = read_jsonl(events)
    assert [line["seq"] for line in lines] == list(range(1, len(lines) + 1))
    with Ledger.open(pg_run.url) as led:
        assert led.head()[1].hex() == lines[-1]["hash"]


@pytest.mark.parametrize("name", ["blackjack", "claude_code_math"])
def test_sc_5_a_real_run_saved_without_a_ledger_goes_to_postgresql_and_back(
    name: str, tmp_path: Path, pg_url: str
) -> None:
    """REC-70 beside the files, then SC-2's copy; export --files gives it back."""
    from tests.test_import_real_runs import RUNS, collector_bytes, copy_run

    source = tmp_path / "source"
    source.mkdir()
    out = copy_run(RUNS[name][0], source)
    original = collector_bytes(out)
    run = f"real-{uuid.uuid4().hex[:10]}"
    url = f"{pg_url}?run={run}"
    cli = CliRun(tmp_path)
    loaded = cli.ok("import", url, "--from", out, "--skip-rejected")
    assert f"into {url}" in loaded.stdout
    assert collector_bytes(out) == original  # the collector's files untouched
    head = cli.ok("head", url).stdout
    assert cli.ok("head", out).stdout == head
    assert cli.ok("verify", url).exit_code == 0
    copy = tmp_path / "copy"
    cli.ok("export", url, "--files", copy)
    exported = collector_bytes(copy / out.name)
    assert exported == original  # byte for byte, rejected lines included
    assert cli.ok("head", copy / out.name).stdout == head
    assert cli.ok("verify", copy / out.name).exit_code == 0
