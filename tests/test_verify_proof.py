"""Issue 30: ``verify`` keeps what it proved; readers check only what came after.

A full ``verify`` with no finding keeps a proof (its seq, head hash, time and
each collector file's size, change times and sha256). ``report``, ``status``
and the viewer then check the events after it as a chain and the rows
recorded since against their files, and say so; a byte changed below the
proof is not read by them and is still found by the next ``verify``. None of
these is a timed test.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.test_cli_support import CliRun, by_key, failed, graded


def _two_rounds(tmp_path: Path) -> CliRun:
    """A run whose first round left retries (so a second round records more)."""
    run = CliRun(tmp_path, tasks=3, rollouts=2)
    run.create()
    run.collect(by_key({(0, 0): failed("transient"), (1, 1): failed("transient")}))
    return run


def _report(run: CliRun, *extra: str) -> dict[str, Any]:
    page = run.folder / "report.html"
    found: dict[str, Any] = json.loads(
        run.ok("report", run.out, "-o", page, "--json", *extra).stdout
    )
    found["html"] = page.read_text()
    return found


def _flip_a_byte_below(path: Path) -> None:
    """One byte of the first row's answer changed, its length and times kept."""
    data = path.read_bytes()
    at = data.index(b'"42"') + 1
    stat = path.stat()
    path.write_bytes(data[:at] + b"7" + data[at + 1 :])
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def test_issue_30_r_7_verify_keeps_a_proof_and_the_report_checks_only_what_came_after(
    tmp_path: Path,
) -> None:
    run = _two_rounds(tmp_path)
    before = _report(run)
    assert before["verified_up_to"] is None  # no proof yet: every check
    assert "Every check, every byte" in before["checked"]
    verified = json.loads(run.ok("verify", run.out, "--json").stdout)
    assert verified["verified"] is True
    proof = json.loads(Path(verified["proof"]).read_bytes())
    assert (proof["seq"], proof["head"]) == (verified["seq"], verified["head"])
    assert set(proof["files"]) >= {run.out.name}
    out_proof = proof["files"][run.out.name]
    assert out_proof["size"] == run.out.stat().st_size
    # A second round: events and rows after the proof.
    run.collect(lambda row: graded(0.5))
    after = _report(run)
    assert after["verified"] is True
    assert after["verified_up_to"] == proof["seq"]
    assert after["seq"] > proof["seq"]
    events = after["seq"] - proof["seq"]
    assert f"verified up to event {proof['seq']} at {proof['at']}" in after["checked"]
    assert f"since then {events} events checked as a chain" in after["checked"]
    assert "2 rows recorded since read and hashed" in after["checked"]
    assert f"{run.out.name} changed" in after["checked"]  # its old bytes not re-read
    assert f"after the last verify (event {proof['seq']}) checks out" in after["html"]
    # status and --no-verify say the same proof, and what they checked.
    status = json.loads(run.ok("status", run.out, "--json").stdout)
    assert status["verified"]["up_to"] == proof["seq"]
    assert status["verified"]["findings"] == []
    assert status["integrity"] == after["checked"]
    text = run.ok("status", run.out).stdout
    assert f"integrity: verified up to event {proof['seq']}" in text
    unchecked = _report(run, "--no-verify")
    assert unchecked["verified"] is None
    assert unchecked["checked"].startswith(f"verified up to event {proof['seq']}")
    assert "Not checked for this report." in unchecked["html"]


def test_issue_30_r_7_a_row_changed_after_the_proof_is_found_by_the_report(
    tmp_path: Path,
) -> None:
    run = _two_rounds(tmp_path)
    run.ok("verify", run.out)
    size = run.out.stat().st_size
    run.collect(lambda row: graded(0.5))
    data = run.out.read_bytes()
    at = data.index(b"0.5", size)  # inside a row recorded after the proof
    run.out.write_bytes(data[:at] + b"0.6" + data[at + 3 :])
    found = _report(run)
    assert found["verified"] is False
    assert found["findings"] >= 1
    assert "changed since it was recorded" in found["html"]
    assert run.invoke("verify", run.out).exit_code == 5


def test_issue_30_r_7_a_byte_changed_below_the_proof_is_caught_by_verify(
    tmp_path: Path,
) -> None:
    """Readers after a proof do not re-read what it covers, and say so; the
    next full ``verify`` reads every byte and names the changed row."""
    run = _two_rounds(tmp_path)
    run.ok("verify", run.out)
    _flip_a_byte_below(run.out)  # same length, same modification time
    found = _report(run)
    assert found["verified_up_to"] is not None
    # The report read only what came after (nothing): it does not claim more.
    assert "no event since" in found["checked"]
    assert f"{run.out.name} changed since" in found["checked"]
    assert "not read again" in found["checked"]
    full = run.invoke("verify", run.out)
    assert full.exit_code == 5
    assert "changed since it was recorded" in full.stdout
    assert f"{run.out.name} line 1" in full.stdout
    # A failed verify keeps no new proof, and removes none it did not make.
    again = json.loads(run.invoke("verify", run.out, "--json").stdout)
    assert again["proof"] is None


def test_issue_30_ev_2_a_log_rewritten_at_the_proof_is_found_by_every_reader(
    tmp_path: Path,
) -> None:
    run = _two_rounds(tmp_path)
    proof = json.loads(run.ok("verify", run.out, "--json").stdout)
    with sqlite3.connect(run.ledger_dir / "ledger.db") as db:
        db.execute(
            "UPDATE events SET hash = zeroblob(32) WHERE seq = ?", (proof["seq"],)
        )
    found = _report(run)
    assert found["verified"] is False
    assert "no longer carries the head hash verify proved" in found["html"]
    status = run.invoke("status", run.out)  # its open checks the head: refused
    assert status.exit_code == 5
    assert f"event seq {proof['seq']}" in status.stderr


def test_issue_30_status_says_what_it_left_unchecked_on_a_run_grown_since(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """status stays quick: past a bound of events since the proof it checks
    none of them, and says so with the command that does; the report checks
    them all."""
    monkeypatch.setattr("projections.views.proof.QUICK_LIMIT", 3)
    run = _two_rounds(tmp_path)
    proof = json.loads(run.ok("verify", run.out, "--json").stdout)
    run.collect(lambda row: graded(0.5))
    status = json.loads(run.ok("status", run.out, "--json").stdout)
    events = status["verified"]["seq"] - proof["seq"]
    assert events > 3
    assert status["integrity"].endswith(
        f"{events} events since, not checked here (`rollout-ledger verify "
        f"{run.out}` checks them)"
    )
    report = _report(run)
    assert f"since then {events} events checked as a chain" in report["checked"]


def _verified(run: CliRun, jobs: str) -> tuple[int, dict[str, Any]]:
    found = run.invoke("verify", run.out, "--json", "--jobs", jobs)
    document: dict[str, Any] = json.loads(found.stdout)
    document.pop("proof")
    return found.exit_code, document


def test_issue_30_cli_9_verify_in_two_processes_finds_what_one_finds(
    tmp_path: Path,
) -> None:
    run = _two_rounds(tmp_path)
    assert _verified(run, "1") == _verified(run, "2") == (0, _verified(run, "1")[1])
    _flip_a_byte_below(run.out)  # a row's byte: the second process's check
    published = run.ledger_dir / "coverage.json"  # this process's check
    published.write_text(published.read_text().replace("complete", "complete "))
    one, two = _verified(run, "1"), _verified(run, "2")
    assert one == two  # the same findings, in the same order
    assert one[0] == 5
    checks = [f["check"] for f in one[1]["findings"]]
    assert checks[0] == "rows"
    assert len(checks) >= 2


def test_issue_30_verify_jobs_2_checks_the_log_in_a_second_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ledger import open_run
    from projections import verify
    from tests.internals import checks_module

    run = _two_rounds(tmp_path)
    _flip_a_byte_below(run.out)

    def not_here(ledger: object) -> object:
        raise AssertionError("the log's checks ran in this process")

    # The spawned process imports the module afresh: only this one is patched.
    monkeypatch.setattr(checks_module, "log_checks", not_here)
    with open_run(run.out, check_head=False) as led:
        findings = verify(led, jobs=2)
    assert [f.check for f in findings] == ["rows"]
