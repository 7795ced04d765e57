"""Issue 27: ``rollout-ledger view`` in a real browser (headless Chromium).

On a demo run and an imported NeMo Gym 0.7.0 fixture run: the runs list shows
each run with the counts of ``status --json``; a filter by decision narrows
the list; clicking a rollout shows its response text and failure message in
the panel beside the list; a writer recording rows moves the count on an open
page without a reload; a ``<!--<script>`` planted in a failure class and in an
approval reason leaves the page's script working.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser_support import chromium
from tests.nemo_gym_070 import imported
from tests.prerequisites import unavailable
from tests.report_support import demo_run, invoke
from tests.test_cli_support import CliRun, by_key, failed, graded
from tests.view_support import PAYLOAD, Served, serving

try:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait
except ImportError:  # pragma: no cover - the dev extra installs it
    unavailable("selenium is not installed: pip install -e '.[dev]'")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    # Only loopback: any other name resolves nowhere.
    rules = (
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost"
    )
    with chromium(1300, 1000, [rules]) as driver:
        yield driver


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("runs")
    demo_run(folder / "demo")
    imported("a01", folder / "fixture")
    return folder


def _wait(browser: Any, check: Any, seconds: float = 10) -> Any:
    return WebDriverWait(browser, seconds, poll_frequency=0.1).until(check)


def _field(browser: Any, name: str) -> str:
    text: str = browser.find_element(By.CSS_SELECTOR, f"[data-field={name}]").text
    return text


def _panel(browser: Any) -> Any:
    panel = browser.find_element(By.ID, "panel")
    return panel if "Attempt" in panel.text else False


def _status(out: Path) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(invoke("status", str(out), "--json").output)
    return found


def test_the_runs_list_shows_each_run_with_status_s_counts(
    browser: Any, runs: Path
) -> None:
    outs = sorted(runs.rglob("*_ledger/ledger.db"))
    assert len(outs) == 2
    with serving([runs]) as served:
        browser.get(served.base + "/")
        rows = browser.find_elements(By.CSS_SELECTOR, "table.runs tbody tr")
        assert len(rows) == 2
        # What was evaluated, for an imported run too: the agent its rows name.
        assert sorted(r.find_elements(By.TAG_NAME, "td")[1].text for r in rows) == [
            "demo_agent",
            "math_agent",
        ]
        for db in outs:
            out = db.parent.parent / (db.parent.name.removesuffix("_ledger") + ".jsonl")
            metrics = _status(out)["metrics"]
            row = next(r for r in rows if str(out) in r.text)
            complete = row.find_element(By.CSS_SELECTOR, "[data-field=complete]")
            expected = row.find_element(By.CSS_SELECTOR, "[data-field=expected]")
            assert int(complete.text) == metrics["complete"]
            assert int(expected.text) == metrics["expected"]


def _open_run(browser: Any, served: Served, name: str) -> None:
    browser.get(served.base + "/")
    link = next(
        a
        for a in browser.find_elements(By.CSS_SELECTOR, "table.runs a")
        if name in a.text
    )
    link.click()
    _wait(browser, lambda b: b.find_elements(By.CSS_SELECTOR, "table.rollouts"))


def test_a_filter_by_decision_narrows_the_list(browser: Any, runs: Path) -> None:
    with serving([runs]) as served:
        _open_run(browser, served, "demo")
        shown = browser.find_element(By.CSS_SELECTOR, "[data-field=matched]").text
        Select(browser.find_element(By.NAME, "decision")).select_by_value("held")
        browser.find_element(By.CSS_SELECTOR, "form.filters button").click()
        _wait(browser, lambda b: "decision=held" in b.current_url)
        matched = int(
            browser.find_element(By.CSS_SELECTOR, "[data-field=matched]").text
        )
        assert 0 < matched < int(shown)
        cells = browser.find_elements(
            By.CSS_SELECTOR, "table.rollouts tbody td:nth-child(3)"
        )
        assert cells
        assert {c.text for c in cells} == {"held"}


def test_a_rollout_opens_beside_the_list_with_its_response_and_failure(
    browser: Any, runs: Path
) -> None:
    with serving([runs]) as served:
        _open_run(browser, served, "fixture")
        url = browser.current_url
        link = browser.find_element(By.CSS_SELECTOR, "a.open")
        link.click()
        panel = _wait(browser, _panel)
        assert browser.current_url == url  # beside the list, not a new page
        assert "RuntimeError: simulator died" in panel.text  # the failure message
        assert "response" in panel.text
        assert browser.find_element(By.CSS_SELECTOR, "table.rollouts").is_displayed()


def test_a_writer_moves_the_count_on_an_open_page(browser: Any, tmp_path: Path) -> None:
    (tmp_path / "live").mkdir()
    run = CliRun(tmp_path / "live", tasks=3, rollouts=2)
    run.create()
    run.collect(lambda row: graded() if row["_ng_task_index"] == 0 else None)
    with serving([tmp_path]) as served:
        _open_run(browser, served, "live")
        field = browser.find_element(By.CSS_SELECTOR, "[data-field=complete]")
        before = int(field.text)
        browser.execute_script("window.__notReloaded = true;")
        run.collect(lambda row: graded())  # a writer records the rest
        started = time.monotonic()
        _wait(
            browser,
            lambda b: (
                int(b.find_element(By.CSS_SELECTOR, "[data-field=complete]").text)
                > before
            ),
        )
        assert time.monotonic() - started < 5
        assert browser.execute_script("return window.__notReloaded === true;")
        after = int(browser.find_element(By.CSS_SELECTOR, "[data-field=complete]").text)
        assert after == _status(run.out)["metrics"]["complete"] == 6


def test_a_planted_script_leaves_the_page_working(browser: Any, tmp_path: Path) -> None:
    (tmp_path / "planted").mkdir()
    run = CliRun(tmp_path / "planted", tasks=2, rollouts=2)
    run.create()
    bad = failed("x", answer=True)
    bad |= {"_ng_failure_class": PAYLOAD, "_ng_failure_message": PAYLOAD}
    run.collect(by_key({(0, 0): bad}))  # a class nobody registered: held
    approve = ("--task", "0", "--rollout", "0", "--attempt", "0", "--reason", PAYLOAD)
    run.ok("approve", run.out, *approve)
    with serving([tmp_path]) as served:
        _open_run(browser, served, "planted")
        assert browser.title != "pwned"
        browser.find_element(By.CSS_SELECTOR, "a.open").click()
        panel = _wait(browser, _panel)
        assert PAYLOAD in panel.text  # shown as text, not run
        panel.find_element(By.CSS_SELECTOR, "details.audit summary").click()
        assert f"“{PAYLOAD}”" in panel.text  # the approval's reason
        assert browser.title != "pwned"


def test_the_compare_page_shows_the_difference_of_means(
    browser: Any, tmp_path: Path
) -> None:
    outs = []
    for name, reward in (("old", 1.0), ("new", 0.5)):
        (tmp_path / name).mkdir()
        run = CliRun(tmp_path / name, tasks=3, rollouts=2)
        run.create()
        run.collect(lambda row, r=reward: graded(r))
        outs.append(run)
    with serving([tmp_path]) as served:
        browser.get(served.base + "/")
        rows = browser.find_elements(By.CSS_SELECTOR, "table.runs tbody tr")
        ids = {
            name: r.get_attribute("data-run")
            for r in rows
            for name in ("old", "new")
            if f"/{name}/" in r.text
        }
        Select(browser.find_element(By.NAME, "a")).select_by_value(ids["old"])
        Select(browser.find_element(By.NAME, "b")).select_by_value(ids["new"])
        browser.find_element(By.CSS_SELECTOR, "form.compare button").click()
        _wait(browser, lambda b: "/compare/" in b.current_url)
        shown = _field(browser, "difference")
        assert shown == "-0.500"
        text = browser.find_element(By.TAG_NAME, "main").text
        assert "paired by task, 3 tasks" in text
        document = served.get(f"/api/compare/{ids['old']}/{ids['new']}").json()[
            "compare"
        ]
        assert document["difference"]["value"] == pytest.approx(-0.5)
