"""Where a run lives, decided in one place: a folder beside ``OUT`` or a store URL.

Every entry point that takes ``OUT`` (``Ledger.create``, ``Ledger.open``,
``RunLock``, the commands) asks here which backend holds the run; nothing above
this module asks which backend it has.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from ledger.errors import ConfigError
from ledger.paths import check_out_path
from ledger.postgres.url import (
    STORE_ENV,
    RunUrl,
    is_postgres_url,
    require_postgres,
    resolve_run,
)
from ledger.store.folder import FolderHome
from ledger.store.memory.runs import MemoryHome, is_memory_url
from ledger.store.port import RunHome

__all__ = ["home_for", "resolve_out"]

# Any "scheme://" (SQLAlchemy's "mysql+pymysql://" too): a URL, never a path.
_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*)://")


def _refuse_url(text: str) -> None:
    """Refuse a URL of no store this ledger has, before it is taken for a path.

    As a path it would create folders named after its parts (a password among
    them) and keep the run on local disk; the message names the scheme only.
    """
    url = _URL.match(text)
    if url is not None:
        raise ConfigError(
            f"OUT is a {url.group(1)}:// URL, which names no store of this ledger: "
            "name a run's results file (results/rollouts.jsonl) or a run on "
            "PostgreSQL (postgresql://USER@HOST:PORT/DB?run=NAME)",
            key="OUT",
        )


def resolve_out(
    text: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None
) -> Path | str:
    """``OUT`` as a person names it, as the library takes it.

    A path becomes a ``Path``; a run URL (checked, never echoed with a
    password) stays a string. A bare run name (no ``/``, not ending in
    ``.jsonl``) names a run in the store ``ROLLOUT_LEDGER_STORE`` holds, when
    that is set and no file of that name exists. A folder holding exactly one
    run (what ``export --files DIR`` writes) names that run.
    """
    if isinstance(text, os.PathLike):
        text = os.fspath(text)
    env = os.environ if environ is None else environ
    if is_memory_url(text):
        return text
    if is_postgres_url(text):
        return str(resolve_run(text))
    _refuse_url(text)
    check_out_path(text)
    if (
        env.get(STORE_ENV)
        and "/" not in text
        and not text.endswith(".jsonl")
        and not Path(text).exists()
    ):
        return str(resolve_run(text, environ=env))
    if Path(text).is_dir():
        return _run_in(Path(text))
    return Path(text)


def _run_in(folder: Path) -> Path:
    stems = sorted(
        db.parent.name.removesuffix("_ledger")
        for db in folder.glob("*_ledger/ledger.db")
    )
    if len(stems) == 1:
        return folder / f"{stems[0]}.jsonl"
    found = f" (it holds the runs {', '.join(stems)})" if stems else ""
    raise ConfigError(
        f"{folder} is a folder{found}; OUT names the run's JSONL file",
        key="OUT",
        path=folder,
    )


def home_for(out: Path | str) -> RunHome:
    """The home of the run ``out`` names: the one place a backend is chosen.

    A ``postgresql://`` URL names a run on PostgreSQL (SC-1), ``memory://NAME``
    a run kept in this process (for tests); anything else is ``OUT``, a run in
    a folder.
    """
    if is_memory_url(out):
        return MemoryHome.of(str(out))
    if isinstance(out, str) and is_postgres_url(out):
        require_postgres()
        from ledger.postgres.home import PostgresHome  # psycopg only when used

        return PostgresHome(RunUrl.parse(out))
    if isinstance(out, str):
        _refuse_url(out)
    check_out_path(out)
    return FolderHome.of(out)
