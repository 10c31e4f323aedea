"""Engine construction: the only place that knows how to connect to each database.

SQLite gets WAL (readers never block the writer), a busy timeout (concurrent processes wait
instead of failing at once), ``synchronous=NORMAL`` (durable across process crashes in WAL mode,
much faster than FULL) and enforced foreign keys. PostgreSQL goes through psycopg 3.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy
from sqlalchemy import event
from sqlalchemy.engine import URL, Engine, make_url

from toolscore.storage.jsoncodec import json_dumps, json_loads

SQLITE_BUSY_TIMEOUT_MS = 10_000


class DatabaseUrlError(ValueError):
    """The database URL is malformed or names an unsupported backend."""


def normalize_url(url: str | URL) -> URL:
    """Parse ``url`` and pick our drivers: ``postgresql://`` becomes ``postgresql+psycopg://``."""
    try:
        parsed = make_url(url)
    except Exception as exc:  # sqlalchemy raises ArgumentError with a terse message
        raise DatabaseUrlError(f"invalid database URL {url!r}: {exc}") from exc
    backend = parsed.get_backend_name()
    if backend in ("postgresql", "postgres"):
        return parsed.set(drivername="postgresql+psycopg")
    if backend == "sqlite":
        if parsed.drivername not in ("sqlite", "sqlite+pysqlite"):
            raise DatabaseUrlError(
                f"unsupported SQLite driver {parsed.drivername!r}; use sqlite://"
            )
        return parsed
    raise DatabaseUrlError(
        f"unsupported database {backend!r} in {redact(parsed)}: use sqlite:///PATH or "
        "postgresql+psycopg://USER@HOST:PORT/NAME"
    )


def redact(url: str | URL) -> str:
    """The URL as text with any password hidden (safe to log)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<invalid database URL>"


def _sqlite_on_connect(dbapi_conn: Any, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
    finally:
        cursor.close()


def create_engine(url: str | URL, **kwargs: Any) -> Engine:
    """A SQLAlchemy engine for ``url`` (SQLite file or PostgreSQL), configured for this service."""
    parsed = normalize_url(url)
    kwargs.setdefault("json_serializer", json_dumps)
    kwargs.setdefault("json_deserializer", json_loads)
    if parsed.get_backend_name() == "sqlite":
        engine = sqlalchemy.create_engine(parsed, **kwargs)
        event.listen(engine, "connect", _sqlite_on_connect)
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    return sqlalchemy.create_engine(parsed, **kwargs)
