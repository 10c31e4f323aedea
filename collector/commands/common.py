"""Arguments shared by every command that touches the database."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from toolscore.collector.configuration import add_options
from toolscore.collector.settings import DB, DB_ENV, DEFAULT_DB_URL, resolve_db_url

if TYPE_CHECKING:
    from sqlalchemy import Engine

__all__ = [
    "DB_ENV",
    "DEFAULT_DB_URL",
    "add_db_argument",
    "open_migrated_database",
    "resolve_db_url",
]


def add_db_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--db URL`` (default: env ``TOOLSCORE_DB``, then ``sqlite:///./toolscore.db``)."""
    add_options(parser, [DB])


def open_migrated_database(
    args: argparse.Namespace,
    table: str,
    *,
    prog: str,
    hint: str = "run `toolscore db upgrade`",
) -> Engine | None:
    """An engine on the ``--db`` database if it has ``table``, else None with the error printed.

    Messages go to stderr as ``{prog}: ...``; a database without the table gets ``hint``.
    """
    from sqlalchemy import inspect

    from toolscore.storage.engine import DatabaseUrlError, create_engine, redact
    from toolscore.storage.url_safety import without_password

    url = resolve_db_url(args, os.environ)
    try:
        engine = create_engine(url, must_exist=True)
        with engine.connect() as conn:
            ready = inspect(conn).has_table(table)
    except DatabaseUrlError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return None
    except Exception as exc:  # a driver's message may quote parts of the URL
        print(f"{prog}: {redact(url)}: {without_password(str(exc), url)}", file=sys.stderr)
        return None
    if not ready:
        engine.dispose()
        print(f"{prog}: {redact(url)} has no {table} table: {hint}", file=sys.stderr)
        return None
    return engine
