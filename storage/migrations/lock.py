"""One migration at a time per database, across processes.

PostgreSQL: a session-level advisory lock on a fixed key, held by the connection Alembic migrates
with (so it is released when that connection ends, even if the process is killed). SQLite: the
file's write lock (``BEGIN IMMEDIATE``), held for the whole upgrade, which also makes the upgrade
one transaction: a process killed mid-migration leaves the previous schema. Either way the lock is
taken before Alembic reads the current revision, so a process that waited finds the schema
current and migrates nothing.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, text

log = logging.getLogger("toolscore.migrate")

#: The advisory lock key of toolscore's migrations ("toolscor" in ASCII): one per database.
ADVISORY_LOCK_KEY = 0x746F6F6C73636F72
_POLL_S = 0.05


@contextmanager
def migration_lock(connection: Connection) -> Iterator[None]:
    """Hold the database's migration lock on ``connection`` for the body."""
    if connection.dialect.name == "postgresql":
        with _advisory_lock(connection):
            yield
    elif connection.dialect.name == "sqlite":
        with _sqlite_write_lock(connection):
            yield
    else:  # pragma: no cover - only the two supported databases
        yield


@contextmanager
def _advisory_lock(connection: Connection) -> Iterator[None]:
    key = {"key": ADVISORY_LOCK_KEY}
    got = connection.execute(text("SELECT pg_try_advisory_lock(:key)"), key).scalar_one()
    if not got:
        log.info("another process is migrating the database: waiting for it")
        # a waiting replica must outwait a long migration, whatever the URL's timeouts say
        connection.execute(text("SET LOCAL statement_timeout = 0"))
        connection.execute(text("SET LOCAL lock_timeout = 0"))
        connection.execute(text("SELECT pg_advisory_lock(:key)"), key)
    connection.commit()  # a session lock: it outlives this transaction
    try:
        yield
    finally:
        if connection.in_transaction():
            connection.rollback()  # after a failed migration; a committed one is unaffected
        connection.execute(text("SELECT pg_advisory_unlock(:key)"), key)
        connection.commit()


@contextmanager
def _sqlite_write_lock(connection: Connection) -> Iterator[None]:
    if connection.in_transaction():
        connection.commit()
    connection.begin()  # Alembic then sees a transaction of ours and leaves it to us
    dbapi = connection.connection.driver_connection
    assert dbapi is not None
    waited = False
    while True:
        try:
            dbapi.execute("BEGIN IMMEDIATE")
            break
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc):
                raise
            if not waited:
                log.info("another process is writing the database: waiting for its lock")
                waited = True
            time.sleep(_POLL_S)
    try:
        yield
    except BaseException:
        connection.rollback()
        raise
    connection.commit()
