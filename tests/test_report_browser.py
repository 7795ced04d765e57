"""Issue 16: the report in a real browser, headless Chromium, network off.

Debian's ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them),
driven by Selenium. The page is opened from disk with every connection sent
to a closed port, and the tests read what Chromium rendered: no request left
the page (only ``file:`` and ``data:`` resources), the headline equals
``status --json`` (CLI-6), every grid cell is ``decide``'s decision (REC-20),
clicking a rollout opens its trail with the rule id for auditors (CLI-8), a
large run's listed rollouts open theirs too (P-4), and the screenshot is not
blank. Issue 27: ``<!--<script>`` planted in a failure class and an approval
reason leaves the page's script working, each trail shows what its row holds,
a long text folded, and the header names the agent and model.
"""

from __future__ import annotations

import json
import statistics
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import projections
from ledger import open_run
from projections import decide, evaluated, replay
from tests.browser_support import chromium
from tests.prerequisites import unavailable
from tests.report_support import PLANT, demo_run, invoke, planted_run, report_of

try:
    from selenium.webdriver.common.by import By
except ImportError:  # pragma: no cover - the dev extra installs it
    unavailable("selenium is not installed: pip install -e '.[dev]'")

WIDTH, HEIGHT = 1200, 900


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    # Network off: every connection goes to a closed port, no name resolves.
    flags = [
        "--proxy-server=http://127.0.0.1:9",
        "--proxy-bypass-list=<-loopback>",
        "--host-resolver-rules=MAP * ~NOTFOUND",
    ]
    with chromium(WIDTH, HEIGHT, flags) as driver:
        yield driver


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("demo")
    out = demo_run(folder)
    page = folder.parent / "report.html"
    report_of(out, page)
    return out, page


def _open(browser: Any, page: Path) -> None:
    browser.get(page.resolve().as_uri())
    assert browser.execute_script("return document.readyState") == "complete"


def test_report_opens_from_disk_and_no_request_leaves(
    browser: Any, demo: tuple[Path, Path]
) -> None:
    _open(browser, demo[1])
    names = browser.execute_script(
        "return [location.href].concat(performance.getEntriesByType('resource')"
        ".map(function (e) { return e.name; }))"
    )
    assert names[0].startswith("file:")
    assert all(name.split(":", 1)[0] in ("file", "data") for name in names), names
    # The page's own policy would block a request silently: nothing asks for one.
    asking = browser.execute_script(
        "return document.querySelectorAll('[src], [href], link, iframe, object,"
        " embed, img, script[src]').length"
    )
    assert asking == 0
    assert browser.find_element(By.TAG_NAME, "svg").is_displayed()


def test_cli6_rendered_headline_equals_status_json(
    browser: Any, demo: tuple[Path, Path]
) -> None:
    out, page = demo
    _open(browser, page)
    found = json.loads(invoke("status", str(out), "--json").output)["coverage"]

    def shown(name: str) -> str:
        return str(browser.find_element(By.CSS_SELECTOR, f"[data-testid={name}]").text)

    assert int(shown("complete")) == found["decisions"]["complete"]
    assert int(shown("expected")) == found["expected"]
    finished = found["decisions"]["complete"] + found["decisions"]["omitted"]
    assert int(shown("remaining")) == found["expected"] - finished
    share = 100 * found["decisions"]["complete"] / found["expected"]
    assert shown("percent") == f"{share:.1f}"


def test_rec20_rendered_grid_cells_equal_decide(
    browser: Any, demo: tuple[Path, Path]
) -> None:
    out, page = demo
    _open(browser, page)
    cells = browser.execute_script(
        "return Array.from(document.querySelectorAll('#grid .cell')).map("
        "function (c) { return [c.dataset.key, c.dataset.value,"
        " getComputedStyle(c).backgroundColor]; })"
    )
    with open_run(out) as led:
        state = replay(led)
    assert len(cells) == state.expected
    assert len({key for key, _, _ in cells}) == state.expected
    colours: dict[str, set[str]] = {}
    for key, value, colour in cells:
        task, rollout = map(int, key.split("-"))
        assert value == decide(state, task, rollout).value, key
        colours.setdefault(value, set()).add(colour)
    # One colour per decision, different decisions in different colours.
    assert all(len(found) == 1 for found in colours.values())
    assert len({next(iter(found)) for found in colours.values()}) == len(colours)


def test_cli8_clicking_a_rollout_opens_its_trail(
    browser: Any, demo: tuple[Path, Path]
) -> None:
    out, page = demo
    _open(browser, page)
    assert not browser.find_element(By.ID, "trail").is_displayed()
    held = browser.find_element(By.CSS_SELECTOR, "#grid .cell[data-value=held]")
    task, rollout = map(int, held.get_attribute("data-key").split("-"))
    held.click()
    trail = browser.find_element(By.ID, "trail")
    assert trail.is_displayed()
    with open_run(out) as led:
        state = replay(led)
    decision = decide(state, task, rollout)
    title = browser.find_element(By.ID, "trail-title").text
    assert title == f"Task {task}, rollout {rollout}: held"
    attempts = trail.find_elements(By.CSS_SELECTOR, ".attempt h3")
    numbers = [a.attempt for a in state.rollout(task, rollout).attempts]
    assert [a.text for a in attempts] == [f"Attempt {n}" for n in numbers]
    assert "result saved" in trail.text
    assert browser.find_element(By.ID, "trail-rule").text == decision.rule
    assert browser.find_element(By.ID, "trail-words").text.startswith("held: ")


def _pixels(data: bytes) -> tuple[int, int, list[int]]:
    """A PNG's width, height and channel values (8-bit RGB or RGBA), stdlib only."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, width, height, channels, idat = 8, 0, 0, 4, b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        chunk = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", chunk[:10])
            assert depth == 8
            assert colour in (2, 6)
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw, stride = zlib.decompress(idat), width * channels
    out: list[int] = []
    above = [0] * stride
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], list(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = above[i], above[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                near = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + near) & 255
        out += line
        above = line
    return width, height, out


def test_screenshot_of_the_report_is_not_blank(
    browser: Any, demo: tuple[Path, Path]
) -> None:
    """The headline and the grid as Chromium painted them: not one flat colour."""
    _open(browser, demo[1])
    for part in ("headline", "grid"):
        element = browser.find_element(By.ID, part)
        width, height, values = _pixels(element.screenshot_as_png)
        assert width > 100
        assert height > 20
        assert statistics.pvariance(values) > 100, part
    browser.get("about:blank")
    _, _, blank = _pixels(browser.find_element(By.TAG_NAME, "body").screenshot_as_png)
    assert statistics.pvariance(blank) == 0


def test_p4_large_run_bands_open_the_listed_trails(
    browser: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """P-4: past the grid's limit, the unfinished rollouts' rows open trails."""
    out = demo_run(tmp_path / "run", rollouts=80)
    monkeypatch.setattr(projections.report.context, "GRID_LIMIT", 20)
    page = tmp_path / "report.html"
    report_of(out, page)
    _open(browser, page)
    assert not browser.find_elements(By.CSS_SELECTOR, ".cell")
    links = browser.find_elements(By.CSS_SELECTOR, "#grid .row-link")
    assert links
    key = links[-1].get_attribute("data-key")
    links[-1].click()
    task, rollout = key.split("-")
    assert browser.find_element(By.ID, "trail").is_displayed()
    assert browser.find_element(By.ID, "trail-title").text.startswith(
        f"Task {task}, rollout {rollout}: "
    )


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("planted")
    page = folder / "report.html"
    report_of(planted_run(folder / "run"), page)
    return page


def _trail_of(browser: Any, key: str) -> Any:
    browser.find_element(By.CSS_SELECTOR, f'#grid .cell[data-key="{key}"]').click()
    trail = browser.find_element(By.ID, "trail")
    assert trail.is_displayed()
    return trail


def test_planted_script_leaves_the_page_s_script_working(
    browser: Any, planted: Path
) -> None:
    """``<!--<script>`` in a failure class and a reason: squares open trails."""
    _open(browser, planted)
    trail = _trail_of(browser, "0-0")
    title = browser.find_element(By.ID, "trail-title").text
    assert title == "Task 0, rollout 0: retry"
    content = trail.find_element(By.CSS_SELECTOR, ".content").text
    assert f"failure kind {PLANT}; class {PLANT}" in content
    assert f"{PLANT} failed {PLANT}" in content
    trail = _trail_of(browser, "0-1")
    assert f"rerun approved ({PLANT})" in trail.text
    assert "response:\n42" in trail.find_element(By.CSS_SELECTOR, ".content").text
    # Nothing the rows held became an element: the page's own two scripts only.
    assert browser.execute_script("return document.scripts.length") == 2


def test_a_long_answer_is_folded_with_the_whole_text_a_click_away(
    browser: Any, planted: Path
) -> None:
    _open(browser, planted)
    trail = _trail_of(browser, "1-0")
    shown = trail.find_element(By.CSS_SELECTOR, ".content pre")
    assert shown.text.startswith("The answer is 42.")
    assert len(shown.text) <= 301
    folded = trail.find_element(By.CSS_SELECTOR, ".content details")
    assert folded.get_attribute("open") is None
    summary = folded.find_element(By.TAG_NAME, "summary")
    assert summary.text.startswith("the whole text (")
    summary.click()
    whole = folded.find_element(By.TAG_NAME, "pre").text
    assert whole.endswith("My key is <redacted>. </script></script></script>")


def test_header_shows_the_agent_and_model_evaluated(
    browser: Any, demo: tuple[Path, Path]
) -> None:
    out, page = demo
    _open(browser, page)
    with open_run(out) as led:
        found = evaluated(led, replay(led))
    header = browser.find_element(By.ID, "evaluated")
    assert header.is_displayed()
    shown = header.find_element(By.CSS_SELECTOR, "[data-testid=agent]").text
    assert shown == found.agent
    shown = header.find_element(By.CSS_SELECTOR, "[data-testid=model]").text
    assert shown == found.model


def test_past_the_grid_the_list_filters_and_the_trail_opens_beside_it(
    browser: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 27: past the grid's limit, a filter and a paged list, the trail beside."""
    from selenium.webdriver.support.ui import Select

    out = demo_run(tmp_path / "run", rollouts=200)
    monkeypatch.setattr(projections.report.context, "GRID_LIMIT", 20)
    page = tmp_path / "report.html"
    report_of(out, page)
    _open(browser, page)
    rows = browser.find_elements(By.CSS_SELECTOR, "#grid tr.listed")
    assert len(rows) > 1
    values = {r.get_attribute("data-value") for r in rows}
    assert len(values) > 1  # two kinds of unfinished rollouts to filter between
    wanted = sorted(values)[0]
    Select(browser.find_element(By.ID, "list-decision")).select_by_value(wanted)
    shown = [r for r in rows if r.is_displayed()]
    assert shown
    assert {r.get_attribute("data-value") for r in shown} == {wanted}
    assert len(shown) < len(rows)
    assert (
        f"{len(shown)} of {len(rows)} listed"
        in browser.find_element(By.ID, "list-count").text
    )
    link = shown[0].find_element(By.CSS_SELECTOR, ".row-link")
    link.click()
    trail = browser.find_element(By.ID, "trail")
    assert trail.is_displayed()
    table = browser.find_element(By.ID, "grid")
    assert trail.location["x"] > table.location["x"] + table.size["width"] - 5  # beside
    assert abs(trail.location["y"] - table.location["y"]) < 400  # not a page below
