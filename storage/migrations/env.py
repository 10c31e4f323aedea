"""Alembic environment: run by ``toolscore.storage.migrate`` with the URL in ``config.attributes``.

No ``alembic.ini`` and no reliance on the working directory: ``storage.migrate`` builds the
``Config`` programmatically. Revisions are self-contained (they never import the models).
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from toolscore.storage.plumbing.engine import create_engine

config = context.config
PAGE_SIZE = 8192  # bytes; new SQLite files only


def _run(connection: Connection) -> None:
    if connection.dialect.name == "sqlite":
        _incremental_vacuum_if_new(connection)
    context.configure(
        connection=connection,
        target_metadata=None,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


def _incremental_vacuum_if_new(connection: Connection) -> None:
    """A new SQLite file gets 8 KiB pages and ``auto_vacuum=INCREMENTAL`` (both only possible
    before its first table). 8 KiB pages store a span in 14 % less space than the default 4 KiB
    (fewer overflow pages for spans with message content: docs/benchmarks.md); incremental
    vacuum lets span retention give the pages it frees back to the file system
    (storage/plumbing/dialect.py release_free_pages). Older files keep their settings and reuse
    their
    free pages."""
    tables = connection.exec_driver_sql("SELECT count(*) FROM sqlite_master").scalar_one()
    connection.commit()  # end the implicit transaction: VACUUM and the migrations need none
    if tables == 0:
        # WAL mode (set on connect) fixes the page size: leave it, set both, VACUUM (instant on
        # an empty file) to apply them, and come back
        connection.exec_driver_sql("PRAGMA journal_mode=DELETE")
        connection.exec_driver_sql(f"PRAGMA page_size={PAGE_SIZE}")
        connection.exec_driver_sql("PRAGMA auto_vacuum=INCREMENTAL")
        connection.exec_driver_sql("VACUUM")
        connection.exec_driver_sql("PRAGMA journal_mode=WAL")
        connection.commit()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = create_engine(config.attributes["url"])
    try:
        with engine.connect() as conn:
            _run(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():  # pragma: no cover - we only migrate online
    raise SystemExit("offline (SQL script) migrations are not supported")
run_migrations_online()
