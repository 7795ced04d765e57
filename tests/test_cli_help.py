"""CLI-16 help on every command, the README CLI reference in sync, P-6 lazy imports.

Issue 28, "Help": help fits ``COLUMNS`` (80 without it or a terminal) and never
splits a word at its hyphen; run's help lists its placeholders and exit codes
one a line; what --config and --global-config take is said once (`rollout-ledger
explain config`); no help says a thing twice, and no two options read alike.
"""

from __future__ import annotations

import importlib.util
import os
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


# -- issue 28, "Help": it fits the terminal, says each thing once ------------------

#: The group's help (no name) and every command's.
EVERY_HELP = [(), *((name,) for name in COMMANDS)]


def help_at(columns: str | None, *names: str) -> str:
    """``rollout-ledger NAMES... --help`` with ``COLUMNS`` set to ``columns``."""
    env = {} if columns is None else {"COLUMNS": columns}
    result = CliRunner().invoke(
        main, [*names, "--help"], prog_name="rollout-ledger", env=env
    )
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize("columns", [60, 80])
@pytest.mark.parametrize("names", EVERY_HELP, ids=lambda n: " ".join(n) or "group")
def test_help_fits_columns(names: tuple[str, ...], columns: int) -> None:
    """Every line, the examples and the group's list of commands too, fits
    ``COLUMNS`` and leaves click's and argparse's margin of 2."""
    text = help_at(str(columns), *names)
    too_long = [line for line in text.splitlines() if len(line) > columns - 2]
    assert too_long == []


@pytest.mark.parametrize("columns", [60, 80])
@pytest.mark.parametrize("names", EVERY_HELP, ids=lambda n: " ".join(n) or "group")
def test_help_never_breaks_a_word_at_its_hyphen(
    names: tuple[str, ...], columns: int
) -> None:
    """``rollout-ledger``, ``--global-config``, ``extend-attempts`` stay whole."""
    text = help_at(str(columns), *names)
    assert "-" in text  # the words the rule is about are there
    broken = [line for line in text.splitlines() if re.search(r"\w-$", line)]
    assert broken == []


def test_help_is_as_wide_as_columns_says() -> None:
    """Wider than 80 when ``COLUMNS`` says so; click alone stops at 78."""
    wide = help_at("120", "run")
    assert max(len(line) for line in wide.splitlines()) > 100
    assert max(len(line) for line in wide.splitlines()) <= 118


def test_help_width_is_kept_between_40_and_200_columns() -> None:
    assert help_at("10", "status") == help_at("40", "status")
    assert help_at("1000", "status") == help_at("200", "status")
    assert help_at("ten", "status") == help_at(None, "status")  # not a width


def test_help_is_80_columns_wide_without_columns_or_a_terminal() -> None:
    """A pipe and no ``COLUMNS`` (CI, ``| less``): 80 columns, margin kept."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    done = subprocess.run(
        [sys.executable, "-m", "cli", "status", "--help"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert done.stdout == help_at("80", "status")
    widest = max(len(line) for line in done.stdout.splitlines())
    assert 70 < widest <= 78


def test_run_help_has_placeholders_and_exit_codes_sections() -> None:
    """run --help: short paragraphs, then one line per placeholder, variable
    and exit code (issue 28), each readable at a glance."""
    text = help_at("80", "run")
    paragraphs = text.split("\n\n")
    prose = [p for p in paragraphs if p.startswith("  ") and ":\n" not in p]
    assert max(len(p.splitlines()) for p in prose) <= 6
    placeholders = text.split("  Placeholders", 1)[1].split("\n\n", 1)[0]
    for placeholder, variable in (
        ("{plan}", "ROLLOUT_LEDGER_PLAN"),
        ("{output}", "ROLLOUT_LEDGER_OUTPUT"),
        ("{failures}", "ROLLOUT_LEDGER_FAILURES"),
    ):
        assert re.search(
            rf"^    {re.escape(placeholder)} +{variable}$", placeholders, re.M
        )
    codes = text.split("  Exit codes:\n", 1)[1].split("\n\n", 1)[0]
    assert re.findall(r"^    (\d+) ", codes, re.M) == ["0", "3", "75", "76"]


CONFIG_COMMANDS = ["create", "diff-config", "resume", "run"]


def test_the_configuration_files_are_explained_once() -> None:
    """--config and --global-config: one line each in a command's help, pointing
    at `rollout-ledger explain`, which says it all (docs/glossary.md too)."""
    assert set(CONFIG_COMMANDS) <= set(COMMANDS)
    for name in CONFIG_COMMANDS:
        said = " ".join(help_at("200", name).split())
        assert "see `rollout-ledger explain config`" in said
        assert "See `rollout-ledger explain global-config`" in said
        assert "num_samples_in_parallel" not in said
        assert "config_paths" not in said
    glossary = (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8")
    for term in ("config", "global-config"):
        explained = CliRunner().invoke(main, ["explain", term]).stdout
        words = explained.split(f"--{term} (configuration files): ", 1)[1].strip()
        assert "ng_run" in words or "ng_collect_rollouts" in words
        assert words in glossary


def _words(sentence: str) -> set[str]:
    """A sentence's words of four letters or more, lowercase, without a plural."""
    found = re.findall(r"[a-z][a-z_-]{3,}", sentence.lower().replace("'s", ""))
    return {word.removesuffix("s") for word in found}


@pytest.mark.parametrize("names", EVERY_HELP, ids=lambda n: " ".join(n) or "group")
def test_no_help_says_its_summary_twice(names: tuple[str, ...]) -> None:
    """doctor's help said "Check locking, SQLite and free space here." and then
    "Checks file locking, SQLite's journal safety and free space." (issue 28):
    no later sentence shares half its words with the summary (5 of 9 there)."""
    text = help_at("200", *names).split("\n\n", 1)[1].split("\nOptions:")[0]
    summary, rest = text.strip().split("\n", 1)
    said = _words(summary)
    for sentence in re.split(r"(?<=\.)\s", " ".join(rest.split())):
        again = _words(sentence)
        assert len(said & again) < 0.5 * len(said | again), sentence


def test_no_two_options_of_a_command_read_alike() -> None:
    """approve's filters do not echo --reason, and --kind names one thing."""
    approve = help_at("80", "approve")
    assert "--held-because REASON" in approve
    assert "--failure-kind KIND" in approve
    assert "--reason-held" not in approve
    assert "--kind" not in approve
    history = help_at("80", "history")
    assert "--event KIND" in history
    assert "--kind" not in history


@pytest.mark.parametrize("columns", [60, 80])
def test_the_group_help_lists_each_summary_whole(columns: int) -> None:
    """At any width a command's summary is wrapped, never cut with "..."."""
    text = help_at(str(columns))
    listing = " ".join(text.split("\nCommands:\n", 1)[1].split())
    assert COMMANDS  # the loop below checks each
    for name in COMMANDS:
        summary = main.commands[name].get_short_help_str(limit=1000)
        assert f"{name} {summary}" in listing
    assert "..." not in listing
