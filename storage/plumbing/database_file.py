"""Questions about the database file itself: SQLite's size and free pages, its write-ahead
log. PostgreSQL keeps its files to itself (None or 0 there), apart from the size of the span
tables.
"""

from __future__ import annotations

from sqlalchemy import Connection

from toolscore.storage.plumbing.dialect import take_write_lock


def database_bytes(conn: Connection) -> tuple[int, int] | None:
    """(size, free) in bytes: SQLite the file's pages and the free ones among them (reused by
    later writes); PostgreSQL the size of ``spans`` and ``log_records`` with their indexes and
    TOAST (free space inside them is not measurable cheaply: 0). None when unknown."""
    name = conn.dialect.name
    if name == "sqlite":
        page = int(conn.exec_driver_sql("PRAGMA page_size").scalar_one())
        pages = int(conn.exec_driver_sql("PRAGMA page_count").scalar_one())
        free = int(conn.exec_driver_sql("PRAGMA freelist_count").scalar_one())
        return pages * page, free * page
    if name == "postgresql":
        size = conn.exec_driver_sql(
            "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "WHERE c.relname IN ('spans', 'log_records') OR c.oid IN (SELECT inhrelid FROM "
            "pg_inherits WHERE inhparent IN ('spans'::regclass, 'log_records'::regclass))"
        ).scalar_one()
        return int(size), 0
    return None


def release_free_pages(conn: Connection, pages: int) -> int:
    """SQLite with ``auto_vacuum=INCREMENTAL``: give up to ``pages`` free pages back to the file
    system (``PRAGMA incremental_vacuum``); returns how many were released. Elsewhere (and on
    SQLite files created without it) nothing: free pages are reused by later writes."""
    if conn.dialect.name != "sqlite":
        return 0
    if int(conn.exec_driver_sql("PRAGMA auto_vacuum").scalar_one()) != 2:
        return 0
    before = int(conn.exec_driver_sql("PRAGMA freelist_count").scalar_one())
    take_write_lock(conn)  # one transaction for the whole batch, not one commit per page
    # Python's sqlite3 steps a statement without result columns once, and each step of
    # incremental_vacuum releases one page: so one execution per page.
    for _ in range(min(pages, before)):
        conn.exec_driver_sql("PRAGMA incremental_vacuum(1)")
    after = int(conn.exec_driver_sql("PRAGMA freelist_count").scalar_one())
    return before - after


def checkpoint_wal(conn: Connection, *, truncate: bool = False) -> tuple[int, int] | None:
    """SQLite: copy what the write-ahead log holds into the database file without waiting for or
    blocking readers and writers (a PASSIVE checkpoint); (pages in the log, pages copied so
    far), equal once it is all copied. ``truncate``: wait for readers on older snapshots, holding
    new writers back meanwhile, then copy everything and empty the log file. PostgreSQL
    checkpoints on its own: None."""
    if conn.dialect.name != "sqlite":
        return None
    if not truncate:
        _busy, log, copied = conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)").one()
        return max(0, int(log)), max(0, int(copied))  # -1 when the file is not in WAL mode
    # Writers wait while it waits for readers: give up after 0.2 s (a long report) and retry.
    was = conn.exec_driver_sql("PRAGMA busy_timeout").scalar_one()
    conn.exec_driver_sql("PRAGMA busy_timeout=200")
    try:
        _busy, log, copied = conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").one()
    finally:
        conn.exec_driver_sql(f"PRAGMA busy_timeout={int(was)}")
    return max(0, int(log)), max(0, int(copied))  # -1 when the file is not in WAL mode
