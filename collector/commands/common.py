"""Arguments shared by every command that touches the database."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from toolscore.collector.configuration import add_options
from toolscore.collector.settings import DB, DB_ENV, DEFAULT_DB_URL, resolve_db_url

if TYPE_CHECKING:
    from toolscore.storage.database import Engine

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
    from toolscore.storage.database import MissingTableError, open_database
    from toolscore.storage.engine import DatabaseUrlError, redact
    from toolscore.storage.url_safety import without_password

    url = resolve_db_url(args, os.environ)
    try:
        return open_database(url, must_exist=True, table=table)
    except DatabaseUrlError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
    except MissingTableError:
        print(f"{prog}: {redact(url)} has no {table} table: {hint}", file=sys.stderr)
    except Exception as exc:  # a driver's message may quote parts of the URL
        print(f"{prog}: {redact(url)}: {without_password(str(exc), url)}", file=sys.stderr)
    return None
