"""Arguments shared by every command that touches the database."""

from __future__ import annotations

import argparse
from collections.abc import Mapping

DB_ENV = "TOOLSCORE_DB"
DEFAULT_DB_URL = "sqlite:///./toolscore.db"


def add_db_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--db URL`` (default: env ``TOOLSCORE_DB``, then ``sqlite:///./toolscore.db``)."""
    parser.add_argument(
        "--db",
        metavar="URL",
        default=None,
        help=(
            "database URL, e.g. sqlite:///./toolscore.db or "
            f"postgresql+psycopg://user@host:5432/name (env {DB_ENV}; default {DEFAULT_DB_URL})"
        ),
    )


def resolve_db_url(args: argparse.Namespace, environ: Mapping[str, str]) -> str:
    """The database URL: ``--db`` beats ``TOOLSCORE_DB`` beats the default SQLite file."""
    flag = getattr(args, "db", None)
    if flag:
        return str(flag)
    env = environ.get(DB_ENV, "").strip()
    return env or DEFAULT_DB_URL
