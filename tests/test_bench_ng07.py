"""Issue 15's bench case NG07: import and decide of a run of NeMo Gym 0.7.0 rows.

Never a timing assertion: the case runs at tiny size and prints both figures
and their ratio, and the run it writes holds 0.7.0's shapes (nemo_gym_0_7.md:
ROW-60's ``_ng_failure_stage``, ROW-61's placeholders, ROW-64's stages, ID-41's
``_ng_environment_server``) routed as 0.7.0's collector routes them.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from bench.scenario import make_plan
from bench.shapes import fixtures_070_dir, shapes_070, write_run
from bench.targets import select

ROOT = Path(__file__).resolve().parents[1]
FIGURE = re.compile(r"^[0-9.]+[kM]? \([0-9.]+[kM]?-[0-9.]+[kM]?\) (ms|s)$")
RATIO = re.compile(r"^[0-9.e+-]+x \([0-9.e+-]+-[0-9.e+-]+\)$")

if not (fixtures_070_dir() / "c10_episode_result_reward").is_dir():
    pytest.skip(
        f"no NeMo Gym 0.7.0 runs at {fixtures_070_dir()}", allow_module_level=True
    )


def rows(path: Path) -> list[dict[str, object]]:
    return [msgspec.json.decode(line) for line in path.read_bytes().splitlines()]


def test_ng07_runs_at_tiny_size_with_both_figures_and_a_ratio(tmp_path: Path) -> None:
    """NG07 alone (``--only NG07``): ours, the older rows' baseline, the ratio."""
    out = tmp_path / "RESULTS.md"
    command = [sys.executable, "-m", "bench", "--quick", "--tiny", "--only", "NG07"]
    command += ["--out", str(out), "--workdir", str(tmp_path / "work")]
    done = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("| NG07 ")]
    _, _, ours, baseline, ratio, _, rss, met = line.strip("|").split(" | ")
    assert FIGURE.match(ours), ours
    assert FIGURE.match(baseline), baseline
    assert RATIO.match(ratio), ratio
    assert re.match(r"^[0-9]+ / [0-9]+ MiB$", rss), rss
    assert met.strip() in ("yes", "NO")
    text = out.read_text()
    for side in ("ours", "baseline"):
        (detail,) = [x for x in text.splitlines() if x.startswith(f"- NG07 {side}: ")]
        imported = re.search(
            r"; ([0-9]+) rows imported, [0-9]+ rejected; 40 rollouts", detail
        )
        assert imported is not None, detail
        assert int(imported[1]) > 0, detail
    assert "- ng07_run: 40 rollouts" in text
    assert "- ng07_older: 40 rollouts" in text
    notes = [x for x in text.splitlines() if x.startswith("- ng07")]
    assert all(str(ROOT.parent) not in x for x in notes)  # relative paths only


def test_ng07_is_its_own_target() -> None:
    assert [t.id for t in select("ng07")] == ["NG07"]


def test_ng07_run_holds_070_shapes_routed_as_its_collector_routes_them(
    tmp_path: Path,
) -> None:
    """ROW-60, ROW-61, ROW-64, ID-41: the shapes are there, keyed and routed."""
    plan = make_plan(400, seed=5)
    written = write_run(tmp_path / "a" / "rollouts.jsonl", plan, shapes_070(), seed=5)
    again = write_run(tmp_path / "b" / "rollouts.jsonl", plan, shapes_070(), seed=5)
    folder = written.out.parent
    inputs = rows(folder / "rollouts_materialized_inputs.jsonl")
    main, sidecar = rows(written.out), rows(folder / "rollouts_failures.jsonl")
    assert written.rollouts == len(inputs) == 400
    assert (written.main_rows, written.sidecar_rows) == (len(main), len(sidecar))
    for name in ("rollouts.jsonl", "rollouts_failures.jsonl"):
        assert (folder / name).read_bytes() == (again.out.parent / name).read_bytes()
    keys = {(r["_ng_task_index"], r["_ng_rollout_index"]) for r in inputs}
    assert len(keys) == 400
    assert all((r["_ng_task_index"], r["_ng_rollout_index"]) in keys for r in main)
    assert all((r["_ng_task_index"], r["_ng_rollout_index"]) in keys for r in sidecar)
    assert all("_ng_attempt_index" in r for r in main + sidecar)
    assert any("_ng_environment_server" in r for r in inputs)  # ID-41's task rows
    assert all("_ng_failure_class" not in r for r in main if "mask_sample" in r)
    assert any("_ng_failure_stage" in r for r in sidecar)  # ROW-60
    assert any(r.get("_ng_failure_terminal") is True for r in sidecar)
    ids = [
        str(r["response"].get("id"))
        for r in sidecar
        if isinstance(r.get("response"), dict)
    ]
    assert any(i.startswith("tau2-failure") for i in ids)  # ROW-61: tau2 placeholder
    assert any(i.endswith("-permanent-failure") for i in ids)  # ROW-61: stirrup id
    assert any("stage_index" in r for r in main)  # ROW-64: a multistage attempt
    assert any(r.get("mask_sample") is True for r in main)
