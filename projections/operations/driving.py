"""How the run was last driven, noted for the hints (issue 28).

``create``, ``resume`` and ``run`` note their configuration files and ``run``
its collector's command in ``commands.json`` in the ledger folder, so that a
hint (``check``'s, ``status``'s, the report's) prints the command whole. A
collector command with anything credential-shaped in it is not noted at all
(no credential byte is written anywhere): the hints then show a placeholder.
A note that cannot be written costs a placeholder, never the command.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path

import msgspec

from ledger import RunPaths, credential_named, redact_secrets
from projections.views.next_steps import COMMANDS_FILE, NotedCommands, read_noted

__all__ = ["note_commands", "speaks_of_credentials"]


def speaks_of_credentials(argv: Sequence[str]) -> bool:
    """Whether any argument names or holds something credential-shaped."""
    for arg in argv:
        key, sep, _ = arg.lstrip("+-").partition("=")
        named = (sep or arg.startswith("-")) and key
        if named and credential_named(key.rsplit(".", 1)[-1]):
            return True
        if redact_secrets(arg) != arg:
            return True
    return False


def note_commands(
    paths: RunPaths,
    *,
    config: Path | str | None,
    global_configs: Sequence[Path | str] = (),
    collector: Sequence[str] | None = None,
) -> None:
    """Note the configuration files (and ``run``'s collector) for the hints."""
    kept = read_noted(paths)
    argv = kept.collector if collector is None else list(collector)
    if argv is not None and speaks_of_credentials(argv):
        argv = None
    noted = NotedCommands(
        config=None if config is None else str(Path(config).absolute()),
        global_configs=[str(Path(p).absolute()) for p in global_configs],
        collector=argv,
        cwd=os.getcwd(),
    )
    target = paths.ledger_dir / COMMANDS_FILE
    temporary = target.with_name(f".{COMMANDS_FILE}.tmp")
    with suppress(OSError):
        temporary.write_bytes(msgspec.json.encode(noted))
        os.replace(temporary, target)
