"""Issue 28: every hint a command prints runs as printed.

The hints of ``status``, ``check``, ``create``, ``import``, ``run``, the
report and the demo are collected from their output, each placeholder filled
with what a person would put there (a reason, the configuration files, the
collector's command), and run, each on a copy of its run: none exits 2 (a
usage error: the hint was not a command) or 3 (refused: the hint lacked what
the command needs).
"""

from __future__ import annotations

import html
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

COLLECTOR = (
    Path(__file__).resolve().parents[1] / "cli" / "examples" / "simulated_collector.py"
)
_BACKTICKED = re.compile(r"`(rollout-ledger [^`]+)`")
_BARE = re.compile(r"(?:^|: )(rollout-ledger [^`]+?)(?: \(the |$)")


def cli(
    folder: Path, *args: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, COLUMNS="200"),
    )


def hints(text: str) -> list[str]:
    """Every ``rollout-ledger ...`` command in ``text``, in order, once each."""
    found = _BACKTICKED.findall(text)
    for line in text.splitlines():
        line = line.strip()
        if "`" in line:
            continue
        found += [m.group(1) for m in _BARE.finditer(line)]
    return list(dict.fromkeys(h.strip() for h in found))


def report_hints(page: str) -> list[str]:
    commands = re.findall(r'class="cmd">([^<]+)<', page)
    return list(dict.fromkeys(html.unescape(c) for c in commands))


def filled(hint: str, folder: Path) -> list[str]:
    """``hint`` as a person completes it: its placeholders filled."""
    places = ["--plan", "{plan}", "--output", "{output}", "--failures", "{failures}"]
    collector = shlex.join([sys.executable, str(COLLECTOR), *places, "--seed", "1"])
    text = (
        hint.replace('"<why>"', '"checked by the hints test"')
        .replace("<collection.yaml>", str(folder / "collection.yaml"))
        .replace("<servers.yaml>", str(folder / "servers.yaml"))
        .replace("<your collector command, with {plan} and {output}>", collector)
    )
    assert "<" not in text, f"a placeholder is left in {text!r}"
    words = shlex.split(text)
    assert words[0] == "rollout-ledger"
    return words[1:]


def run_hint(hint: str, folder: Path, scratch: Path) -> int:
    """``hint`` run on a copy of ``folder``: its exit code (0 when it serves)."""
    copy = scratch / f"copy{len(list(scratch.iterdir()))}"
    shutil.copytree(folder, copy)
    args = filled(hint, copy)
    if args[0] == "view":  # a server: it answers until stopped
        with subprocess.Popen(
            [sys.executable, "-m", "cli", *args, "--port", "0"],
            cwd=copy,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        ) as server:
            try:
                return server.wait(timeout=3)
            except subprocess.TimeoutExpired:
                server.terminate()
                return 0
    return cli(copy, *args).returncode


def check_all(found: list[str], folder: Path, scratch: Path) -> list[str]:
    failed = []
    for hint in found:
        code = run_hint(hint, folder, scratch)
        if code in (2, 3):
            failed.append(f"{hint} -> exit {code}")
    return failed


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The demo's run (held, terminal and complete rollouts) and what it printed."""
    folder = tmp_path_factory.mktemp("demo")
    shown = cli(folder, "demo", ".", "--rollouts", "60")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    return folder, shown.stdout


def test_issue_28_the_demo_s_status_check_and_report_hints_run(
    demo_run: tuple[Path, str], tmp_path: Path
) -> None:
    folder, printed = demo_run
    status = cli(folder, "status", "rollouts.jsonl")
    check = cli(folder, "check", "rollouts.jsonl")
    report = cli(folder, "report", "rollouts.jsonl", "-o", str(tmp_path / "r.html"))
    assert report.returncode == 0, report.stderr
    found = {
        "demo": hints(printed),
        "status": hints(status.stdout),
        "check": hints(check.stdout + check.stderr),
        "report": report_hints((tmp_path / "r.html").read_text()),
    }
    for source, listed in found.items():
        assert listed, f"{source} printed no hint"
    # status names a command for each held rollout, and one for all of them
    held = [h for h in found["status"] if " approve " in h and "--task" in h]
    assert held
    assert any("--all-held" in h for h in found["status"])
    assert any("--add regrade_kinds=" in h for h in found["status"])
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    every = list(dict.fromkeys(h for listed in found.values() for h in listed))
    assert len(every) >= 6
    assert check_all(every, folder, scratch) == []


def test_issue_28_create_s_and_run_s_hints_run(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    demo = tmp_path / "demo"
    shown = cli(tmp_path, "demo", str(demo), "--rollouts", "12")
    assert shown.returncode == 0
    folder.mkdir()
    for name in ("collection.yaml", "servers.yaml"):
        shutil.copy(demo / name, folder / name)
    shutil.copy(demo / "rollouts_materialized_inputs.jsonl", folder / "inputs.jsonl")
    configs = ("--config", "collection.yaml", "--global-config", "servers.yaml")
    created = cli(
        folder, "create", "rollouts.jsonl", "--inputs", "inputs.jsonl", *configs
    )
    assert created.returncode == 0, created.stderr
    found = hints(created.stdout)
    assert [h.split()[1] for h in found] == ["run"]
    collector = [sys.executable, str(COLLECTOR), "--plan", "{plan}", "--output"]
    collector += ["{output}", "--failures", "{failures}", "--die-after", "3"]
    ran = cli(
        folder, "run", "rollouts.jsonl", *configs, "--max-rounds", "1", "--", *collector
    )
    assert ran.returncode == 75, ran.stdout + ran.stderr
    from_run = hints(ran.stdout + ran.stderr)
    # run's hint repeats the collector it was given, whole
    assert any("--die-after 3" in h for h in from_run), from_run
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    assert check_all(found + from_run, folder, scratch) == []


def test_issue_28_an_imported_run_s_hints_run_with_allow_unsafe(
    demo_run: tuple[Path, str], tmp_path: Path
) -> None:
    source, _ = demo_run
    folder = tmp_path / "older"
    folder.mkdir()
    for name in (
        "collection.yaml",
        "servers.yaml",
        "rollouts_materialized_inputs.jsonl",
    ):
        shutil.copy(source / name, folder / name)
    # an older collector's files: the demo's rows, no ledger, no terminal/held yet
    for name in ("rollouts.jsonl", "rollouts_failures.jsonl"):
        rows = [json.loads(line) for line in (source / name).read_text().splitlines()]
        for row in rows:
            row.pop("_ng_run_id", None)  # what the ledger added to its rows
        kept = rows[: len(rows) // 3]
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in kept))
    imported = cli(folder, "import", "rollouts.jsonl")
    assert imported.returncode == 0, imported.stderr
    found = hints(imported.stdout)
    assert [h for h in found if " run " in h]
    assert all("--allow-unsafe" in h for h in found if " run " in h)
    check = cli(folder, "check", "rollouts.jsonl")
    found += hints(check.stdout + check.stderr)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    assert check_all(list(dict.fromkeys(found)), folder, scratch) == []
