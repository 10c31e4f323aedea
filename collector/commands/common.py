"""What every command that touches the database shares: ``--db`` and opening the database.

Errors are raised (``collector/errors.py``), never printed here: ``collector/cli.py`` prints
them and turns them into the exit status.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from toolscore.collector.configuration import add_options
from toolscore.collector.errors import Failure
from toolscore.collector.settings import DB, DB_ENV, DEFAULT_DB_URL, resolve_db_url

if TYPE_CHECKING:
    from toolscore.storage.database import Engine

__all__ = [
    "DB_ENV",
    "DEFAULT_DB_URL",
    "add_db_argument",
    "database_errors",
    "database_url",
    "open_database",
    "resolve_db_url",
]


def add_db_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--db URL`` (default: env ``TOOLSCORE_DB``, then ``sqlite:///./toolscore.db``)."""
    add_options(parser, [DB])


def database_url(args: argparse.Namespace) -> str:
    """``--db``, else ``TOOLSCORE_DB``, else the default, checked (UsageError naming both)."""
    from toolscore.storage.plumbing.engine import DatabaseUrlError, normalize_url

    url = resolve_db_url(args, os.environ)
    try:
        normalize_url(url)
    except DatabaseUrlError as exc:
        raise DB.error(str(exc)) from None
    return url


@contextmanager
def database_errors(url: str, doing: str = "") -> Iterator[None]:
    """What the database raised inside, as a :class:`Failure` naming the database with its
    password hidden (also in the driver's message, which may quote parts of the URL);
    ``doing`` (``"import failed, nothing imported"``) goes between them."""
    from toolscore.storage.database import MissingTableError
    from toolscore.storage.plumbing.engine import DatabaseMissingError, DatabaseUrlError, redact
    from toolscore.storage.plumbing.url_safety import without_password

    try:
        yield
    except (Failure, BrokenPipeError, MissingTableError):
        raise
    except DatabaseMissingError as exc:
        raise Failure(str(exc)) from None
    except DatabaseUrlError as exc:
        raise DB.error(str(exc)) from None
    except Exception as exc:
        middle = f"{doing}: " if doing else ""
        raise Failure(f"{redact(url)}: {middle}{without_password(str(exc), url)}") from None


def open_database(
    args: argparse.Namespace,
    table: str | None = None,
    *,
    hint: str = "run `toolscore db upgrade`",
    upgrade: bool = False,
) -> Engine:
    """An engine on the ``--db`` database: migrated first with ``upgrade``, else it must exist
    (read-only commands never create one) and, with ``table``, have that table (else ``hint``).

    Raises :class:`UsageError` for a malformed URL, :class:`Failure` otherwise; the caller
    disposes of the engine.
    """
    from toolscore.storage.database import MissingTableError, open_database
    from toolscore.storage.plumbing.engine import redact

    url = database_url(args)
    try:
        with database_errors(url):
            return open_database(url, must_exist=not upgrade, upgrade=upgrade, table=table)
    except MissingTableError:
        raise Failure(f"{redact(url)} has no {table} table: {hint}") from None
