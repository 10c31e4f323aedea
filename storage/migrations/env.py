"""Alembic environment: run by ``toolscore.storage.migrate`` with the URL in ``config.attributes``.

No ``alembic.ini`` and no reliance on the working directory: ``storage.migrate`` builds the
``Config`` programmatically. Revisions are self-contained (they never import the models).
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from toolscore.storage.migrations.lock import migration_lock
from toolscore.storage.plumbing.engine import create_engine

config = context.config


def _run(connection: Connection) -> None:
    # Several processes may migrate one database at once (replicas starting together, `db
    # upgrade` beside a starting serve): one migrates, the others wait and then find the schema
    # current. The current revision is read only once the lock is held.
    with migration_lock(connection):
        context.configure(
            connection=connection,
            target_metadata=None,
            render_as_batch=connection.dialect.name == "sqlite",
        )
        with context.begin_transaction():
            context.run_migrations()


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
