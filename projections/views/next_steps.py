"""The commands a person is told to run next, whole, as they run (issue 28).

Every hint the commands print (``check``'s "next:", ``status``'s line per held
rollout, ``create``'s, ``import``'s, ``run``'s and the report's) is built here,
with the run's ``OUT`` and the options the command needs: ``run``, not
``resume``, with the configuration files and the collector ``run`` was last
given (``commands.json`` in the ledger folder, kept by the command line), and
``--allow-unsafe`` on an imported run's first round; ``approve`` with the
held rollout's task, rollout and attempt. A placeholder in angle brackets
(``"<why>"``, ``<collection.yaml>``) stands only for what only the person
knows.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable
from pathlib import Path

import msgspec

from ledger import Ledger, RunPaths
from projections.fold.state import RunState

__all__ = [
    "ANSWER_REASONS",
    "COMMANDS_FILE",
    "REASON_PLACEHOLDER",
    "GradeSaved",
    "HeldChoices",
    "HeldRollout",
    "NextSteps",
    "NotedCommands",
    "held_choices",
    "read_noted",
]

#: The file in the ledger folder that remembers how the run was last driven.
COMMANDS_FILE = "commands.json"
#: What a person fills in: why they approve, change or extend.
REASON_PLACEHOLDER = '"<why>"'
#: The collector's command, where ``run`` was never given one here.
COLLECTOR_PLACEHOLDER = "<your collector command, with {plan} and {output}>"
CONFIG_PLACEHOLDER = "<collection.yaml>"
SERVERS_PLACEHOLDER = "<servers.yaml>"


class NotedCommands(msgspec.Struct, frozen=True, omit_defaults=True):
    """How the run was last driven: absolute paths, the collector's arguments.

    ``collector`` is ``None`` where ``run`` never ran here, or where its
    command held something credential-shaped (never written, issue 28).
    """

    config: str | None = None
    global_configs: list[str] = []
    collector: list[str] | None = None
    cwd: str | None = None


def read_noted(paths: RunPaths) -> NotedCommands:
    """The noted commands of the run at ``paths`` (empty when none or unreadable)."""
    try:
        data = (paths.ledger_dir / COMMANDS_FILE).read_bytes()
        return msgspec.json.decode(data, type=NotedCommands)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return NotedCommands()


def _shown(path: str) -> str:
    """``path`` relative to here when it is below here, else as it is."""
    if "://" in path:  # a run URL: never a path (relpath would fold its "//")
        return path
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return path if relative.startswith("..") else relative


def _quoted(words: Iterable[str]) -> str:
    return " ".join(shlex.quote(word) for word in words)


class NextSteps:
    """The runnable commands for one run (``of`` a ledger, or from its parts)."""

    def __init__(
        self,
        target: str,
        noted: NotedCommands | None = None,
        *,
        unsafe_first_round: bool = False,
        extension: int = 0,
    ) -> None:
        self.target = shlex.quote(_shown(target))
        self.noted = NotedCommands() if noted is None else noted
        self.unsafe_first_round = unsafe_first_round
        self.extension = extension

    @classmethod
    def of(cls, ledger: Ledger, state: RunState | None = None) -> NextSteps:
        """The steps of ``ledger``'s run; ``state`` says whether it was imported."""
        unsafe = False
        extension = 0
        if state is not None:
            unsafe = bool(state.manifest.get("legacy_import")) and not state.overrides
            extension = state.extension
        target = str(ledger.target)
        noted = read_noted(ledger.paths) if ledger.folder is not None else None
        return cls(target, noted, unsafe_first_round=unsafe, extension=extension)

    @classmethod
    def at(cls, out: Path | str) -> NextSteps:
        """The steps of the run at ``out`` (a path, or a run URL) without opening it."""
        noted = read_noted(RunPaths.of(out)) if isinstance(out, Path) else None
        return cls(str(out), noted)

    # -- the commands -------------------------------------------------------------

    def configs(self) -> str:
        """``--config C --global-config G ...`` as ``run`` was last given them."""
        noted = self.noted
        if noted.config is None:
            return (
                f"--config {CONFIG_PLACEHOLDER} --global-config {SERVERS_PLACEHOLDER}"
            )
        words = ["--config", _shown(noted.config)]
        for path in noted.global_configs:
            words += ["--global-config", _shown(path)]
        return _quoted(words)

    def collector(self) -> str:
        """The collector's command as ``run`` was last given it, else a placeholder."""
        argv = self.noted.collector
        return COLLECTOR_PLACEHOLDER if not argv else _quoted(argv)

    def run(self) -> str:
        """``run`` as it goes on: the configuration, the collector, and
        ``--allow-unsafe`` on an imported run's first round."""
        unsafe = " --allow-unsafe" if self.unsafe_first_round else ""
        return (
            f"rollout-ledger run {self.target} {self.configs()}{unsafe} "
            f"-- {self.collector()}"
        )

    def approve(self, task: int, rollout: int, attempt: int) -> str:
        """Sample one held rollout again (its saved answer, if any, discarded)."""
        return (
            f"rollout-ledger approve {self.target} --task {task} --rollout {rollout} "
            f"--attempt {attempt} --reason {REASON_PLACEHOLDER}"
        )

    def approve_all(self, *, dry_run: bool = True) -> str:
        """Every held rollout; ``dry_run``: listed, nothing recorded."""
        dry = " --dry-run" if dry_run else ""
        return (
            f"rollout-ledger approve {self.target} --all-held "
            f"--reason {REASON_PLACEHOLDER}{dry}"
        )

    def regrade(self, kind: str, *, dry_run: bool = True) -> str:
        """Grade the saved answers of rollouts held by ``kind`` (judge them again)."""
        dry = " --dry-run" if dry_run else ""
        return (
            f"rollout-ledger policy {self.target} --add "
            f"{shlex.quote(f'regrade_kinds={kind}')} "
            f"--reason {REASON_PLACEHOLDER}{dry}"
        )

    def extend(self) -> str:
        """One more attempt for every rollout (the total extension, plus one)."""
        return (
            f"rollout-ledger extend-attempts {self.target} {self.extension + 1} "
            f"--reason {REASON_PLACEHOLDER}"
        )

    def history(self, task: int | None = None, rollout: int | None = None) -> str:
        """The audit trail, of one rollout when named."""
        one = "" if task is None else f" --task {task} --rollout {rollout}"
        return f"rollout-ledger history {self.target}{one}"

    def command(self, name: str, *args: str) -> str:
        """``rollout-ledger NAME OUT ARGS`` (status, report, verify, ...)."""
        rest = "".join(f" {arg}" for arg in args)
        return f"rollout-ledger {name} {self.target}{rest}"

    def for_unfinished(
        self, values: Iterable[str], terminal: tuple[int, int] | None = None
    ) -> list[str]:
        """What to run for rollouts left with these decisions, in a stable order.

        ``terminal``: a terminal rollout, whose history says why it failed.
        """
        wanted = set(values)
        steps = []
        if wanted & {"pending", "retry", "rejudge"}:
            steps.append(self.run())
        if "held" in wanted:
            steps.append(self.command("status"))  # each held one, with its commands
        if "exhausted" in wanted:
            steps.append(self.extend())
        if "terminal" in wanted:
            steps.append(self.history(*terminal) if terminal else self.history())
        return steps


#: Held reasons whose rollout kept an answer that a judge could still grade.
ANSWER_REASONS = frozenset(
    {"kept_answer", "masked_without_artifact", "route_kept_response"}
)


class HeldRollout(msgspec.Struct, frozen=True):
    """One held rollout and the command that samples it again (issue 28)."""

    task: int
    rollout: int
    attempt: int
    reason: str
    kind: str | None
    kept_answer: bool
    sample_again: str


class GradeSaved(msgspec.Struct, frozen=True):
    """The other choice for held rollouts that kept an answer: grade it.

    One per failure kind: adding the kind to ``regrade_kinds`` moves every
    such rollout from held to re-judged (its ``--dry-run`` names each).
    """

    kind: str
    rollouts: int
    command: str


class HeldChoices(msgspec.Struct, frozen=True):
    """Every held rollout's choices: sample again, or grade the saved answer."""

    rollouts: list[HeldRollout]
    grade_saved: list[GradeSaved]
    approve_all: str

    @property
    def kept_answers(self) -> int:
        """How many held rollouts kept an answer (have both choices)."""
        return sum(1 for held in self.rollouts if held.kept_answer)


def held_choices(
    steps: NextSteps, held: Iterable[tuple[int, int, int, str, str | None]]
) -> HeldChoices:
    """The choices for ``held`` (task, rollout, attempt, reason, kind) rollouts."""
    rollouts = []
    kinds: dict[str, int] = {}
    for task, rollout, attempt, reason, kind in held:
        kept = reason in ANSWER_REASONS and kind is not None
        if kept and kind is not None:
            kinds[kind] = kinds.get(kind, 0) + 1
        rollouts.append(
            HeldRollout(
                task,
                rollout,
                attempt,
                reason,
                kind,
                kept,
                steps.approve(task, rollout, attempt),
            )
        )
    grade = [GradeSaved(k, n, steps.regrade(k)) for k, n in sorted(kinds.items())]
    return HeldChoices(rollouts, grade, steps.approve_all())
