"""Run URLs (SC-1): ``postgresql://USER@HOST:PORT/DB?run=NAME`` names a run.

The SQLAlchemy spelling with a driver, ``postgresql+psycopg://`` (any
``+driver``, and ``postgres://``), names the same run: the driver part is
dropped, since libpq takes only ``postgresql://``.

A run on PostgreSQL is addressed by a URL instead of a file path. Credentials
never come from the URL: libpq reads them from its environment (``PGPASSWORD``,
``PGPASSFILE``) or ``~/.pgpass``, so nothing that is logged or recorded holds
one. A URL with a password is refused, and the refusal never repeats it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import SplitResult, parse_qsl, quote, urlencode, urlsplit

from ledger.errors import ConfigError

__all__ = ["STORE_ENV", "RunUrl", "is_postgres_url", "require_postgres", "resolve_run"]

#: The environment variable that may hold the store URL when only a run name
#: is given (SC-1).
STORE_ENV = "ROLLOUT_LEDGER_STORE"

_SCHEMES = ("postgresql", "postgres")
_FORM = "postgresql://USER@HOST:PORT/DB?run=NAME"
# Query keys that carry a secret; libpq would accept them, we never do (SC-1).
_SECRET_KEYS = frozenset({"password", "sslpassword"})
# A run name appears in URLs, messages and exported file names: keep it plain.
_RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")
_KEEP_OUT = (
    "keep credentials out of the URL: libpq reads them from PGPASSWORD, "
    "PGPASSFILE or ~/.pgpass"
)


@dataclass(frozen=True)
class RunUrl:
    """A parsed run URL: libpq conninfo (never with a password) and the run name."""

    conninfo: str
    run: str

    @classmethod
    def parse(cls, text: str, *, source: str = "the run URL") -> RunUrl:
        """Parse ``postgresql://USER@HOST:PORT/DB?run=NAME``; refuse any password."""
        conninfo, run = _split(text, source)
        if run is None:
            raise ConfigError(
                f"{source} {conninfo} names no run; add ?run=NAME ({_FORM})",
                key="run",
            )
        return cls(conninfo, run)

    def with_run(self, run: str) -> RunUrl:
        """The same store, another run."""
        return RunUrl(self.conninfo, _checked_name(run, "the run name"))

    def __str__(self) -> str:
        """The URL as given, safe to log: it never holds a password."""
        joiner = "&" if "?" in self.conninfo else "?"
        return f"{self.conninfo}{joiner}run={quote(self.run, safe='')}"


def is_postgres_url(text: str | os.PathLike[str]) -> bool:
    """Whether ``text`` is a PostgreSQL run URL rather than a file path."""
    if isinstance(text, os.PathLike):
        return False  # a Path has lost the "//" of a URL; only strings qualify
    scheme, sep, _ = text.partition("://")
    return bool(sep) and scheme.lower().partition("+")[0] in _SCHEMES


def resolve_run(
    name_or_url: str, *, environ: Mapping[str, str] | None = None
) -> RunUrl:
    """A run URL as given, or a run name in the store ``ROLLOUT_LEDGER_STORE`` names.

    The store URL in the environment may carry a ``run`` of its own; the name
    given wins, since the variable names the store and the command the run.
    """
    if is_postgres_url(name_or_url):
        return RunUrl.parse(name_or_url)
    name = _checked_name(name_or_url, "the run name")
    store = (os.environ if environ is None else environ).get(STORE_ENV, "")
    if not store:
        raise ConfigError(
            f"{name!r} is a run name, but {STORE_ENV} is not set; set "
            f"{STORE_ENV}=postgresql://USER@HOST:PORT/DB or pass the whole URL "
            f"({_FORM})",
            key=STORE_ENV,
        )
    if not is_postgres_url(store):
        raise ConfigError(
            f"{STORE_ENV} does not hold a postgresql:// URL; set it to "
            "postgresql://USER@HOST:PORT/DB",
            key=STORE_ENV,
        )
    conninfo, _ = _split(store, STORE_ENV)
    return RunUrl(conninfo, name)


def _split(text: str, source: str) -> tuple[str, str | None]:
    """``(conninfo, run)`` of a URL; every message is built from checked parts."""
    if not is_postgres_url(text):
        raise ConfigError(f"{source} is not a postgresql:// URL ({_FORM})", key="url")
    parsed = _parse(text)
    if parsed is None or "@" in parsed[0].path:
        # The text may be a URL whose password broke the parse (an unescaped
        # "/" or ":" in it): never echo it, nor chain the parser's error.
        raise ConfigError(
            f"{source} is not a valid URL (check its host, port and database; "
            f"{_FORM}); {_KEEP_OUT}",
            key="url",
        )
    parts, port = parsed
    query = parse_qsl(parts.query, keep_blank_values=True)
    _refuse_secrets(parts, port, query, source)
    return _conninfo(parts, query, source), _run_of(query, source)


def _parse(text: str) -> tuple[SplitResult, int | None] | None:
    try:
        parts = urlsplit(text)
        return parts, parts.port
    except ValueError:
        return None


def _refuse_secrets(
    parts: SplitResult, port: int | None, query: list[tuple[str, str]], source: str
) -> None:
    # SC-1: a password in the URL would end up in logs, manifests and shell
    # history; refuse it before anything else looks at (or prints) the URL.
    secrets = sorted({key for key, _ in query if key.lower() in _SECRET_KEYS})
    if parts.password is None and not secrets:
        return
    where = f"{parts.hostname or 'localhost'}:{port or 5432}{parts.path}"
    what = "a password" if parts.password is not None else f"{secrets[0]}="
    raise ConfigError(
        f"{source} for {where} holds {what}; refusing it: {_KEEP_OUT}, "
        f"and name the run as {_FORM}",
        key="url",
    )


def _conninfo(parts: SplitResult, query: list[tuple[str, str]], source: str) -> str:
    if parts.fragment:
        raise ConfigError(f"{source} has a #fragment; remove it ({_FORM})", key="url")
    if parts.path in ("", "/"):
        raise ConfigError(
            f"{source} names no database; add /DB after the host ({_FORM})",
            key="url",
        )
    options = [(key, value) for key, value in query if key != "run"]
    rest = f"?{urlencode(options)}" if options else ""
    return f"postgresql://{parts.netloc}{parts.path}{rest}"


def _run_of(query: list[tuple[str, str]], source: str) -> str | None:
    runs = [value for key, value in query if key == "run"]
    if len(runs) > 1:
        raise ConfigError(f"{source} names more than one run; keep one ?run=NAME")
    return _checked_name(runs[0], f"the run name in {source}") if runs else None


def _checked_name(name: str, source: str) -> str:
    if not _RUN_NAME.fullmatch(name):
        raise ConfigError(
            f"{source} {name!r} is not a run name: use letters, digits, '.', '_' "
            "and '-' (at most 200, starting with a letter or digit)",
            key="run",
        )
    return name


def require_postgres() -> None:
    """Refuse a run URL clearly when psycopg (the ``postgres`` extra) is missing."""
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            "runs on PostgreSQL need psycopg: pip install 'rollout-ledger[postgres]'"
        ) from exc
