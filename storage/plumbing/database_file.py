"""Questions about the database file itself: SQLite's size and free pages, its write-ahead
log, where each index's pages lie. PostgreSQL keeps its files to itself (None or 0 there), apart
from the size of the span tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import Connection
from sqlalchemy.exc import OperationalError

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


class NoPageList(RuntimeError):
    """SQLite was built without the ``dbstat`` table, which lists each index's pages."""


@dataclass(frozen=True, slots=True)
class IndexPages:
    """Where the pages of some indexes lie in a SQLite database file."""

    path: str  # the database file
    page_size: int
    pages: tuple[int, ...]  # page numbers (the first page is 1), index by index in the order asked


def index_pages(conn: Connection, names: Sequence[str]) -> IndexPages | None:
    """The pages of the indexes ``names`` (those that exist) in SQLite's file, read from the
    ``dbstat`` table (every page of each index is read); None on PostgreSQL and for a database
    in memory; raises :class:`NoPageList` where SQLite was built without ``dbstat``."""
    if conn.dialect.name != "sqlite":
        return None
    path = next(
        (str(f) for _, n, f in conn.exec_driver_sql("PRAGMA database_list") if n == "main"), ""
    )
    if not path:
        return None
    pages: list[int] = []
    try:
        for name in names:
            rows = conn.exec_driver_sql("SELECT pageno FROM dbstat WHERE name = ?", (name,))
            pages += (int(p) for (p,) in rows)
    except OperationalError as exc:
        if "dbstat" in str(exc):
            raise NoPageList("this SQLite was built without the dbstat table") from exc
        raise
    page_size = int(conn.exec_driver_sql("PRAGMA page_size").scalar_one())
    return IndexPages(path, page_size, tuple(pages))
