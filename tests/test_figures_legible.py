"""Issue 28, figures that add up and charts that read: pass@k says which tasks
it covers when fewer than pass@1's (status, ``--json``, the report, the
viewer); the report's histogram of per-task means has labelled axes; no label
of the report's charts lies over a bar (or over another label).

A label's box is estimated as the charts estimate it (``text_width``), so the
assertions read the SVG attributes the chart code wrote.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from tests.internals import failures_svg, per_task_svg, text_width
from tests.test_cli_support import CliRun, by_key, failed, graded
from tests.view_support import serving

_NS = "{http://www.w3.org/2000/svg}"
Box = tuple[float, float, float, float]  # left, top, right, bottom

#: 3 tasks x 4 rollouts: task 2 has 2 scored rollouts (2 others end terminal),
#: so pass@4 covers tasks 0 and 1 only. Task 0 has one reward of 0.
_SHORT_TASK = {
    (0, 0): graded(0.0),
    (2, 2): failed("agent_crashed", terminal=True),
    (2, 3): failed("agent_crashed", terminal=True),
}
_PASS_LINE = (
    "pass@1 0.92, pass@2 1.00 (3 tasks), pass@4 1.00 (2 of 3 tasks: the other "
    "has fewer than 4 scored rollouts); correct: reward ≥ 1"
)


@pytest.fixture(scope="module")
def short_task(tmp_path_factory: pytest.TempPathFactory) -> CliRun:
    run = CliRun(tmp_path_factory.mktemp("short"), tasks=3, rollouts=4)
    run.create()
    run.collect(by_key(_SHORT_TASK))
    return run


def test_status_says_which_tasks_pass_at_k_leaves_out(short_task: CliRun) -> None:
    lines = short_task.ok("status", short_task.out).stdout.splitlines()
    assert _PASS_LINE in lines


def test_status_json_counts_the_tasks_of_each_k(short_task: CliRun) -> None:
    document = json.loads(short_task.ok("status", short_task.out, "--json").stdout)
    values = document["metrics"]["pass_at_k"]["values"]
    assert [
        (v["k"], v["tasks"], v["of_tasks"], v["tasks_left_out"]) for v in values
    ] == [(1, 3, 3, 0), (2, 3, 3, 0), (4, 2, 3, 1)]
    assert values[0]["value"] == pytest.approx((0.75 + 1 + 1) / 3)
    for v in values:
        assert v["tasks"] + v["tasks_left_out"] == v["of_tasks"]


def test_the_report_says_which_tasks_pass_at_k_leaves_out(short_task: CliRun) -> None:
    page = short_task.folder / "page.html"
    short_task.ok("report", short_task.out, "-o", page)
    found = re.search(r'data-testid="pass-at-k">(.*?)</p>', page.read_text(), re.S)
    assert found is not None
    words = " ".join(found.group(1).split())
    assert "pass@1 = 0.9167 over 3 tasks" in words
    assert (
        "pass@4 = 1.0000 over 2 of 3 tasks: the other has fewer than 4 scored "
        "rollouts" in words
    )


def test_the_viewer_says_which_tasks_pass_at_k_leaves_out(short_task: CliRun) -> None:
    with serving([short_task.folder]) as served:
        (card,) = served.get("/api/runs").json()["runs"]
        document = served.get(f"/api/runs/{card['id']}").json()
        page = served.get(f"/runs/{card['id']}").text
    assert _PASS_LINE in document["figures"]
    assert f"<li>{_PASS_LINE}</li>" in page


def test_counted_zeros_fill_the_short_task_and_the_note_goes(
    short_task: CliRun,
) -> None:
    """With the failed rollouts counted as zero every task has 4 values."""
    lines = short_task.ok(
        "status", short_task.out, "--count-failure-classes-as-zero"
    ).stdout.splitlines()
    (line,) = [ln for ln in lines if ln.startswith("pass@1")]
    assert "of 3 tasks" not in line
    assert line.endswith("(correct: reward ≥ 1; 3 tasks; 2 rollouts counted as zero)")


# -- the charts ------------------------------------------------------------------


def _svg(text: str) -> ET.Element:
    return ET.fromstring(text)


def _text_box(node: ET.Element) -> Box:
    x, y = float(node.attrib["x"]), float(node.attrib["y"])
    size = float(node.attrib["font-size"])
    width = text_width(node.text or "")
    anchor = node.attrib.get("text-anchor", "start")
    left = {"start": x, "middle": x - width / 2, "end": x - width}[anchor]
    return left, y - size, left + width, y + size / 4  # ascent, then descent


def _rect_box(node: ET.Element) -> Box:
    x, y = float(node.attrib["x"]), float(node.attrib["y"])
    return x, y, x + float(node.attrib["width"]), y + float(node.attrib["height"])


def _overlap(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _labels(svg: ET.Element) -> list[tuple[str, Box]]:
    return [(t.text or "", _text_box(t)) for t in svg.iter(f"{_NS}text")]


def _assert_legible(svg: ET.Element) -> None:
    """No label over a bar or another label; every label inside the picture."""
    labels = _labels(svg)
    bars = [_rect_box(r) for r in svg.iter(f"{_NS}rect")]
    assert bars
    assert labels
    width, height = float(svg.attrib["width"]), float(svg.attrib["height"])
    for text, box in labels:
        left, top, right, bottom = box
        assert left >= 0, text
        assert top >= 0, text
        assert right <= width, text
        assert bottom <= height, text
        for bar in bars:
            assert not _overlap(box, bar), (text, box, bar)
    for i, (text, box) in enumerate(labels):
        for other, second in labels[i + 1 :]:
            assert not _overlap(box, second), (text, other)


def _titles(svg: ET.Element) -> list[str]:
    return [(r.findtext(f"{_NS}title") or "") for r in svg.iter(f"{_NS}rect")]


def _means(values: list[float]) -> dict[str, Any]:
    return {
        "per_task": {
            "tasks": [
                {"task": i, "rollouts": 4, "mean": m} for i, m in enumerate(values)
            ]
        }
    }


@pytest.mark.parametrize(
    "means",
    [
        [i / 24 for i in range(25)],
        [0.0] * 500 + [1.0] * 3,  # the tallest column first, a 3-digit count
        [-1.0 + i / 700 for i in range(1400)] + [0.875],  # wide tick labels
        [0.5] * 30,  # one value: every task in one column
    ],
)
def test_the_histogram_has_labelled_axes_and_no_label_over_a_bar(
    means: list[float],
) -> None:
    svg = _svg(per_task_svg(_means(means)))
    _assert_legible(svg)
    texts = [text for text, _ in _labels(svg)]
    assert "tasks" in texts  # the y axis: tasks in a column
    assert "mean reward of a task" in texts  # the x axis
    assert f"{min(means):.3g}" in texts  # the x axis's left end
    counts = [int(title.split()[0]) for title in _titles(svg)]
    assert sum(counts) == len(means)
    assert str(max(counts)) in texts  # the y axis: its top
    assert "0" in texts  # and 0


def test_the_failures_chart_keeps_its_labels_off_the_bars() -> None:
    """The tallest column first (where the count's label used to sit)."""
    early = [("2026-01-01T00:00:00Z", "infrastructure")] * 1234
    later = [("2026-01-01T00:10:00Z", "model"), ("2026-01-01T00:20:00Z", "unknown")]
    svg = _svg(failures_svg(early + later))
    _assert_legible(svg)
    texts = [text for text, _ in _labels(svg)]
    assert {"failures", "0", "1234", "2026-01-01 00:00:00", "2026-01-01 00:20:00"} <= {
        *texts
    }
    assert "time (one column: 40 s)" in texts
    one = _svg(failures_svg([("2026-01-01T00:00:00Z", "model")]))
    _assert_legible(one)
    assert "time (every failure in the same second)" in [t for t, _ in _labels(one)]


def test_the_report_s_charts_are_legible_static_svg(tmp_path: Path) -> None:
    """The report of a run of 24 tasks draws both charts, inline, with no script."""
    run = CliRun(tmp_path, tasks=24, rollouts=2)
    run.create()
    run.collect(
        lambda row: (
            failed("agent_crashed", terminal=True)
            if row["_ng_rollout_index"] == 1 and row["_ng_task_index"] % 3 == 0
            else graded(row["_ng_task_index"] / 23)
        )
    )
    page_path = tmp_path / "page.html"
    run.ok("report", run.out, "-o", page_path)
    page = page_path.read_text(encoding="utf-8")
    charts = {}
    for label in ("tasks by mean reward", "failures over time by side"):
        found = re.search(rf'<svg [^>]*aria-label="{label}".*?</svg>', page, re.S)
        assert found is not None, label
        assert "<script" not in found.group(0)
        assert "href" not in found.group(0)
        charts[label] = _svg(found.group(0))
        _assert_legible(charts[label])
    texts = [text for text, _ in _labels(charts["tasks by mean reward"])]
    assert {"tasks", "mean reward of a task", "0", "1"} <= set(texts)
