"""CLI-16 help on every command, the README CLI reference in sync, P-6 lazy imports."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from click.testing import CliRunner

from cli import main
from ledger import errors

ROOT = Path(__file__).parents[1]
COMMANDS = sorted(main.commands)


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_cli_reference", ROOT / "tools" / "gen_cli_reference.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_16_the_commands_of_cli_md_are_registered() -> None:
    assert set(COMMANDS) >= {
        "create",
        "resume",
        "record",
        "status",
        "check",
        "history",
        "verify",
        "approve",
        "reset-budget",
        "extend-attempts",
        "policy",
        "diff-config",
        "results",
        "export",
        "head",
        "doctor",
        "report",
    }


@pytest.mark.parametrize("name", COMMANDS)
def test_cli_16_help_has_a_summary_the_options_and_an_example(name: str) -> None:
    result = CliRunner().invoke(
        main, [name, "--help"], prog_name="rollout-ledger", catch_exceptions=False
    )
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"Usage: rollout-ledger {name} [OPTIONS]")
    assert lines[2].strip().endswith(".")  # the one-line summary
    assert "\nOptions:\n" in result.stdout
    example = result.stdout.split("Example:\n", 1)[1]
    assert example.lstrip().startswith(f"rollout-ledger {name} ")


def test_cli_16_the_group_help_lists_every_command_with_its_summary() -> None:
    result = CliRunner().invoke(main, ["--help"], catch_exceptions=False)
    assert COMMANDS  # the loop below checks each
    for name in COMMANDS:
        summary = main.commands[name].get_short_help_str(limit=200)
        assert f"  {name} " in result.stdout
        assert not summary.endswith("...")


def test_cli_16_the_readme_cli_reference_is_the_commands_help() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    tool = generator()
    section = tool.render()
    assert section in readme, "run: .venv/bin/python tools/gen_cli_reference.py"
    assert COMMANDS  # the loop below checks each
    for name in COMMANDS:
        assert tool.command_help(name) in readme


def test_cli_1_the_readme_exit_code_table_matches_the_errors() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^## [^\n]*[Ee]xit codes\n(.*?)(?=^## )", readme, re.M | re.S)
    assert section is not None
    codes = set(re.findall(r"^\| (\d+) \|", section.group(1), flags=re.MULTILINE))
    assert codes == {"0", "1", "2", "3", "4", "5", "75", "76"}
    classes = [
        errors.ConfigError,
        errors.IdentityMismatch,
        errors.RowError,
        errors.LockHeld,
        errors.ConcurrencyConflict,
        errors.CorruptLedger,
        errors.UnknownEvent,
        errors.LedgerError,
    ]
    assert {str(cls.exit_code) for cls in classes} == {"3", "4", "5"}


def test_p_6_help_imports_neither_the_library_nor_its_dependencies() -> None:
    code = (
        "import sys\n"
        "from cli import main\n"
        "try:\n"
        "    main(['resume', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "heavy = {'ledger', 'projections', 'omegaconf', 'msgspec', 'pydantic',"
        " 'sqlite3', 'yaml'}\n"
        "print(sorted(heavy & {m.split('.')[0] for m in sys.modules}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines()[-1] == "[]"
