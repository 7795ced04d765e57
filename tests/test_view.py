"""Issue 27: ``rollout-ledger view``, through HTTP as a browser or a script asks.

Every view has its own URL and a JSON twin whose counts equal ``status
--json``; filters, orders and pages are the server's; one rollout shows what
its rows hold, credentials redacted; a foreign ``Host`` is refused, only GET
and HEAD are answered, every answer carries the Content-Security-Policy, and
a text a row wrote lands escaped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.pg_support import pg_run
from tests.report_support import demo_run, invoke
from tests.test_cli_support import CliRun, by_key, failed, graded
from tests.view_support import PAYLOAD, Served, serving

__all__ = ["pg_run"]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_run(tmp_path_factory.mktemp("view") / "demo")


@pytest.fixture(scope="module")
def served(demo: Path) -> Served:
    with serving([demo.parent.parent]) as found:
        yield found


def _run_id(served: Served) -> str:
    runs = served.get("/api/runs").json()["runs"]
    assert len(runs) == 1
    return str(runs[0]["id"])


def test_the_runs_list_counts_are_status_s(served: Served, demo: Path) -> None:
    status = json.loads(invoke("status", str(demo), "--json").output)
    (card,) = served.get("/api/runs").json()["runs"]
    assert card["expected"] == status["metrics"]["expected"]
    assert card["complete"] == status["metrics"]["complete"]
    assert card["mean"] == pytest.approx(status["metrics"]["reward"]["mean"])
    assert card["n"] == status["metrics"]["reward"]["rollouts"]
    assert card["header"]["agent"] == "math_agent"
    assert card["check_exit"] in (75, 76)
    page = served.get("/").text
    assert f"{card['complete']}</span> of <span" in page
    assert "math_agent" in page
    assert "demo/simulated-policy" in page


def test_a_run_s_page_names_what_was_evaluated(served: Served) -> None:
    run = _run_id(served)
    page = served.get(f"/runs/{run}").text
    for said in ("math_agent", "data/problems.jsonl", "temperature 0.6", "at most"):
        assert said in page
    document = served.get(f"/api/runs/{run}").json()
    assert document["schema_version"] == 1
    assert document["coverage"]["expected"] == document["run"]["expected"]


def test_filters_narrow_the_list_on_the_server(served: Served) -> None:
    run = _run_id(served)
    every = served.get(f"/api/runs/{run}/rollouts").json()
    held = served.get(f"/api/runs/{run}/rollouts?decision=held").json()
    assert 0 < held["matched"] < every["matched"] == every["total"]
    assert held["matched"] == every["by_decision"]["held"]
    assert {r["decision"] for r in held["rollouts"]} == {"held"}
    kind = next(iter(every["by_kind"]))
    by_kind = served.get(f"/api/runs/{run}/rollouts?kind={kind}").json()
    assert by_kind["matched"] == every["by_kind"][kind]
    assert {r["kind"] for r in by_kind["rollouts"]} == {kind}
    by_text = served.get(f"/api/runs/{run}/rollouts?q={kind[:5].upper()}").json()
    assert by_text["matched"] >= by_kind["matched"]
    task = served.get(f"/api/runs/{run}/rollouts?task=3").json()
    assert {r["task"] for r in task["rollouts"]} == {3}
    page = served.get(f"/runs/{run}?decision=held").text
    assert page.count('class="open"') == held["matched"]


def test_pages_and_orders(served: Served) -> None:
    run = _run_id(served)
    first = served.get(f"/api/runs/{run}/rollouts").json()
    assert first["pages"] == -(-first["total"] // 100)
    assert len(first["rollouts"]) == 100
    second = served.get(f"/api/runs/{run}/rollouts?page=2").json()
    assert second["page"] == 2
    assert second["rollouts"][0] != first["rollouts"][0]
    rewards = [
        r["reward"]
        for r in served.get(f"/api/runs/{run}/rollouts?sort=-reward").json()["rollouts"]
        if r["reward"] is not None
    ]
    assert rewards
    assert rewards == sorted(rewards, reverse=True)


def test_one_rollout_shows_what_its_rows_hold(served: Served) -> None:
    run = _run_id(served)
    listed = served.get(f"/api/runs/{run}/rollouts?sort=-attempts").json()["rollouts"]
    chosen = next(r for r in listed if r["kind"])
    path = f"/runs/{run}/rollouts/{chosen['task']}/{chosen['rollout']}"
    detail = served.get(f"/api{path}").json()["rollout"]
    assert detail["decision"] == chosen["decision"]
    assert len(detail["attempts"]) == chosen["attempts"]
    assert detail["messages"]
    assert "Problem" in detail["messages"][0][1]["head"]
    assert any(a["kind"] == chosen["kind"] for a in detail["attempts"])
    panel = served.get(f"{path}?fragment=1").text
    assert "<html" not in panel
    assert f"Task {chosen['task']}" in panel
    assert "For auditors" in served.get(path).text


def test_a_foreign_host_is_refused_and_only_reads_are_answered(served: Served) -> None:
    assert served.get("/", host="evil.example:80").status == 400
    assert served.get("/api/runs", host=f"attacker.test:{served.port}").status == 400
    assert served.get("/", host=f"localhost:{served.port}").status == 200
    assert served.get("/", method="POST").status == 405
    assert served.get("/", method="DELETE").status == 405
    head = served.get("/", method="HEAD")
    assert head.status == 200
    assert head.body == b""
    assert served.get("/runs/nope").status == 404
    assert served.get("/nothing/here").status == 404


def test_every_answer_carries_the_content_security_policy(served: Served) -> None:
    for path in ("/", "/api/runs", "/static/view.js", "/runs/nope"):
        answer = served.get(path)
        policy = answer.headers["Content-Security-Policy"]
        assert "default-src 'none'" in policy
        assert "script-src 'self'" in policy
        assert answer.headers["X-Content-Type-Options"] == "nosniff"
    page = served.get("/").text
    assert "<script>" not in page
    assert "<style>" not in page


def test_text_a_row_wrote_lands_escaped(tmp_path: Path) -> None:
    run = CliRun(tmp_path, tasks=2, rollouts=2)
    run.create()
    bad = failed("infrastructure_error") | {
        "_ng_failure_class": PAYLOAD,
        "_ng_failure_message": PAYLOAD + " api_key=sk-abcdefghijklmnopqrstuvwx",
    }
    run.collect(by_key({(0, 0): bad, (1, 1): graded(0.5)}))
    with serving([tmp_path]) as served:
        run_id = _run_id(served)
        page = served.get(f"/runs/{run_id}/rollouts/0/0").text
        assert PAYLOAD not in page
        assert "&lt;!--&lt;script&gt;" in page
        assert "sk-abcdefghijklmnopqrstuvwx" not in page
        detail = served.get(f"/api/runs/{run_id}/rollouts/0/0").json()["rollout"]
        assert "sk-abcdefghijklmnopqrstuvwx" not in json.dumps(detail)
        assert served.get(f"/runs/{run_id}/rollouts/9/9").status == 404


def test_text_search_finds_failure_messages(tmp_path: Path) -> None:
    run = CliRun(tmp_path, tasks=2, rollouts=2)
    run.create()
    bad = failed("infrastructure_error") | {
        "_ng_failure_message": "socket hang-up xyzzy"
    }
    run.collect(by_key({(1, 0): bad}))
    with serving([tmp_path]) as served:
        run_id = _run_id(served)
        found = served.get(f"/api/runs/{run_id}/rollouts?q=HANG-UP%20xyzzy").json()
        assert [(r["task"], r["rollout"]) for r in found["rollouts"]] == [(1, 0)]
        assert (
            served.get(f"/api/runs/{run_id}/rollouts?q=nowhere").json()["matched"] == 0
        )


def test_a_run_on_postgresql_named_by_its_url(pg_run: Any) -> None:
    with serving([pg_run.url]) as served:
        (card,) = served.get("/api/runs").json()["runs"]
        assert card["out"] == pg_run.url
        assert card["expected"] == 6
        assert card["writer"]  # the run lock is held (pg_run holds it)
        run_id = card["header"]["run_id"]
        assert served.get(f"/runs/{run_id}").status == 200
        listed = served.get(f"/api/runs/{run_id}/rollouts").json()
        assert listed["total"] == 6


def test_the_runs_list_says_when_a_writer_holds_a_run(tmp_path: Path) -> None:
    from ledger import RunLock

    run = CliRun(tmp_path, tasks=1, rollouts=1)
    run.create()
    with serving([tmp_path]) as served:
        assert served.get("/api/runs").json()["runs"][0]["writer"] is None
        lock = RunLock(run.out).acquire()
        try:
            writer = served.get("/api/runs").json()["runs"][0]["writer"]
            assert writer is not None
            assert f"pid {os.getpid()}" in writer
        finally:
            lock.release()
        assert served.get("/api/runs").json()["runs"][0]["writer"] is None


def test_copies_of_one_run_each_have_their_own_address(tmp_path: Path) -> None:
    import shutil

    run = (
        CliRun(tmp_path / "first", tasks=1, rollouts=2)
        if (tmp_path / "first").mkdir() is None
        else None
    )
    assert run is not None
    run.create()
    run.collect(lambda row: graded())
    shutil.copytree(tmp_path / "first", tmp_path / "second")
    with serving([tmp_path]) as served:
        runs = served.get("/api/runs").json()["runs"]
        ids = [r["id"] for r in runs]
        assert len(set(ids)) == 2
        assert {r["header"]["run_id"] for r in runs} == {ids[0]}
        for card in runs:
            assert (
                served.get(f"/api/runs/{card['id']}").json()["run"]["out"]
                == card["out"]
            )


def test_issue_30_the_runs_list_reads_what_is_left_not_every_rollout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run's card on the runs page comes from its snapshot of what is left
    (as ``status`` reads it), and says what a fold of every rollout says."""
    import ledger
    import projections
    from tests.internals import browse_runs_module

    run = demo_run(tmp_path / "demo")
    with ledger.open_run(run) as led:
        full = projections.run_card(led, run, projections.replay(led))

    def no_replay(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the runs page folded every rollout")

    monkeypatch.setattr(browse_runs_module, "replay", no_replay)
    with ledger.open_run(run) as led:
        assert projections.run_card(led, run) == full
    with serving([run.parent.parent]) as served:
        (card,) = served.get("/api/runs").json()["runs"]
        assert card["complete"] == full.complete
        assert card["check_words"] == full.check_words
        monkeypatch.undo()  # the run's own page folds it (in the background first)
        run_id = card["id"]
        page = served.get(f"/api/runs/{run_id}").json()
        assert page["run"]["complete"] == full.complete
