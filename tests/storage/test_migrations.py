"""Migrations: upgrade, downgrade and upgrade again on both dialects; models match the schema."""

from __future__ import annotations

import re
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

from toolscore.storage import migrate
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.schema import metadata


def _tables(url: str) -> set[str]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return set(inspect(conn).get_table_names()) - {"alembic_version"}
    finally:
        engine.dispose()


_PARTITION = re.compile(r"^(spans|log_records|span_contents)_(p\d{8}|default)")


def _not_a_partition(obj: Any, name: str | None, kind: str, *_: Any) -> bool:
    """PostgreSQL's day partitions of spans, log_records (migration 0008) and span_contents
    (0021) are not models."""
    table = name if kind == "table" else getattr(getattr(obj, "table", None), "name", "")
    return not _PARTITION.match(table or "")


def _schema_diff(url: str) -> list[Any]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            opts = {"compare_type": True, "include_object": _not_a_partition}
            ctx = MigrationContext.configure(conn, opts=opts)
            diff = list(compare_metadata(ctx, metadata))
            if conn.dialect.name == "postgresql":
                # partitioned tables: unique keys hold the partition key
                # (storage/telemetry/partitions.py); a day's spans are found by their partition,
                # not ix_spans_start_ns (SQLite only, migration 0021)
                skipped = {"uq_log_records_record_hash", "ix_spans_start_ns"}
                diff = [d for d in diff if getattr(d[1], "name", "") not in skipped]
            return diff
    finally:
        engine.dispose()


def test_upgrade_downgrade_upgrade(db_url: str) -> None:
    migrate.upgrade(db_url)
    assert migrate.current_revision(db_url) == migrate.head_revision()
    assert {"spans", "log_records"} <= _tables(db_url)

    migrate.downgrade(db_url, "base")
    assert migrate.current_revision(db_url) is None
    assert _tables(db_url) == set()
    assert _schema_diff(db_url), "an empty database must differ from the models"

    migrate.upgrade(db_url)
    assert migrate.current_revision(db_url) == migrate.head_revision()


def test_models_match_migrated_schema(db_url: str) -> None:
    migrate.upgrade(db_url)
    assert _schema_diff(db_url) == []


def test_upgrade_is_idempotent(sqlite_url: str) -> None:
    migrate.upgrade(sqlite_url)
    migrate.upgrade(sqlite_url)
    assert migrate.current_revision(sqlite_url) == migrate.head_revision()


def test_sqlite_runs_in_wal_mode(sqlite_url: str) -> None:
    engine = create_engine(sqlite_url)
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
            # the WAL gives its space back after a burst (64 MiB kept at most)
            assert conn.exec_driver_sql("PRAGMA journal_size_limit").scalar() == 64 * 1024 * 1024
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    ("given", "driver"),
    [
        ("postgresql://u@h:5432/d", "postgresql+psycopg"),
        ("postgres://u@h/d", "postgresql+psycopg"),
        ("postgresql+psycopg://u@h/d", "postgresql+psycopg"),
        ("sqlite:///x.db", "sqlite"),
    ],
)
def test_urls_are_normalised_to_our_drivers(given: str, driver: str) -> None:
    from toolscore.storage.plumbing.engine import normalize_url

    assert normalize_url(given).drivername == driver


def test_unsupported_database_is_a_clear_error() -> None:
    from toolscore.storage.plumbing.engine import DatabaseUrlError, normalize_url

    with pytest.raises(DatabaseUrlError, match="unsupported database 'mysql'"):
        normalize_url("mysql://u:secret@h/d")
    with pytest.raises(DatabaseUrlError, match="invalid database URL"):
        normalize_url("not a url")
