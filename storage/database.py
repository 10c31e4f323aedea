"""Opening a database, and the handles the rest of toolscore holds without speaking SQL.

Every command opens its database with :func:`open_database` (``serve`` adds its deadlines through
the same function). ``collector/`` passes engines and connections from there to the storage
functions that use them; it names their types from here (its parts take a :class:`Database`), so
only ``storage/`` imports SQLAlchemy.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol

from sqlalchemy import Connection, Engine, inspect
from sqlalchemy.engine import Dialect

from toolscore.storage.plumbing.engine import create_engine

__all__ = ["Connection", "Database", "Engine", "MissingTableError", "open_database"]


class Database(Protocol):
    """What the service's parts (ingest writer, scoring rounds, write-back) need of a database:
    a transaction that commits on success, a connection for reads, and which database it is
    (how rows are encoded for it). An ``Engine`` is one."""

    @property
    def dialect(self) -> Dialect: ...

    def begin(self) -> AbstractContextManager[Connection]: ...

    def connect(self) -> Connection: ...


class MissingTableError(LookupError):
    """The database has not been migrated far enough for a command: ``table`` is missing."""

    def __init__(self, table: str) -> None:
        super().__init__(f"no {table} table")
        self.table = table


def open_database(
    url: str,
    *,
    must_exist: bool = False,
    upgrade: bool = False,
    table: str | None = None,
    **engine_args: Any,
) -> Engine:
    """An engine on database ``url`` (the caller disposes of it).

    ``must_exist`` (read-only commands): a SQLite file that does not exist raises
    ``storage.plumbing.engine.DatabaseMissingError`` instead of being created. ``upgrade``: migrate
    the
    database to the newest revision first. ``table``: connect once and raise
    :class:`MissingTableError` unless the database has that table. A malformed URL raises
    ``storage.plumbing.engine.DatabaseUrlError``; ``engine_args`` go to
    ``storage.plumbing.engine.create_engine``.
    """
    if upgrade:
        from toolscore.storage import migrate

        migrate.upgrade(url, "heads")
    engine = create_engine(url, must_exist=must_exist, **engine_args)
    if table is None:
        return engine
    try:
        with engine.connect() as conn:
            ready = inspect(conn).has_table(table)
    except BaseException:
        engine.dispose()
        raise
    if not ready:
        engine.dispose()
        raise MissingTableError(table)
    return engine
