"""What ``bench_retention_soak.py`` reads of its database every period: sizes and row counts,
from the SQLite file (pages, free pages, ``dbstat``) or from PostgreSQL
(``pg_total_relation_size`` of ``spans`` and ``log_records`` with their day partitions, of the
history tables, and ``pg_database_size``); and the fresh PostgreSQL database the soak runs on."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import make_url

from toolscore.storage.plumbing.engine import create_engine

HISTORY = ("conversations", "traces", "tool_calls", "evaluations")
COUNTS = (
    "(SELECT count(*) FROM spans), (SELECT count(*) FROM log_records), "
    "(SELECT count(*) FROM conversations)"
)


def sqlite_sample(path: Path) -> dict[str, float]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60) as db:

        def one(sql: str, *params: str) -> int:
            return int(db.execute(sql, params).fetchone()[0])

        page = one("PRAGMA page_size")
        names = db.execute(
            f"SELECT name FROM sqlite_master WHERE tbl_name IN ({','.join('?' * len(HISTORY))})"
            " AND type IN ('table', 'index')",
            HISTORY,
        ).fetchall()
        history = sum(
            one("SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name = ? AND aggregate = 1", n)
            for (n,) in names
        )
        spans, logs, convs = db.execute(f"SELECT {COUNTS}").fetchone()
        row = {
            "pages": one("PRAGMA page_count"), "free": one("PRAGMA freelist_count"),
            "spans": spans, "logs": logs, "convs": convs, "history": history, "page": page,
        }  # fmt: skip
    wal = path.with_name(path.name + "-wal")
    row["size"] = path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    return row


def sqlite_tables(path: Path) -> list[tuple[str, int]]:
    """(table, bytes with its indexes), largest first."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return db.execute(
            "SELECT coalesce(m.tbl_name, s.name), sum(s.pgsize) FROM dbstat s "
            "LEFT JOIN sqlite_master m ON m.name = s.name GROUP BY 1 ORDER BY 2 DESC"
        ).fetchall()


def _with_partitions(table: str) -> str:
    return (
        "(SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
        f"WHERE c.oid = '{table}'::regclass OR c.oid IN "
        f"(SELECT inhrelid FROM pg_inherits WHERE inhparent = '{table}'::regclass))"
    )


def postgres_sample(engine: Any) -> dict[str, float]:
    history = " + ".join(f"pg_total_relation_size('{t}')" for t in HISTORY)
    with engine.connect() as conn:
        r = conn.exec_driver_sql(
            f"SELECT pg_database_size(current_database()), {_with_partitions('spans')}, "
            f"{_with_partitions('log_records')}, {history}, {COUNTS}"
        ).one()
    keys = ("size", "spans_bytes", "logs_bytes", "history", "spans", "logs", "convs")
    return {k: float(v) for k, v in zip(keys, r, strict=True)}


def postgres_tables(engine: Any) -> list[tuple[str, int]]:
    """(table, bytes with indexes and TOAST; a partitioned table with its partitions)."""
    with engine.connect() as conn:
        return [
            (str(name), int(size))
            for name, size in conn.exec_driver_sql(
                "SELECT coalesce(p.relname, c.relname), sum(pg_total_relation_size(c.oid)) "
                "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "LEFT JOIN pg_inherits i ON i.inhrelid = c.oid "
                "LEFT JOIN pg_class p ON p.oid = i.inhparent "
                "WHERE n.nspname = 'public' AND c.relkind = 'r' GROUP BY 1 ORDER BY 2 DESC"
            )
        ]


def create_database(admin_url: str) -> str:
    """A new empty database next to ``admin_url``'s; its URL."""
    name = f"soak_{uuid.uuid4().hex[:8]}"
    admin = create_engine(admin_url)
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def drop_database(admin_url: str, url: str) -> None:
    name = make_url(url).database or ""
    admin = create_engine(admin_url)
    with admin.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()
