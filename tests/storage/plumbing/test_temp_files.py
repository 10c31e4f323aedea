"""``create_engine(temp_in_memory=True)``: serve's SQLite transactions make no temporary files.

A multi-row write that follows another in the same transaction keeps a statement journal of the
pages it changes; past 64 KiB SQLite moves it to a new, already unlinked temporary file, open
until the transaction ends. Every ingest transaction made one, larger as the indexes grew (at 5
million stored spans it cost a request more than everything else that grew with the data).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest
from sqlalchemy import Connection, text

from toolscore.storage.plumbing.engine import create_engine

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads open files from /proc/self/fd"
)

ROWS = 2_000  # rows of ~200 bytes: ~100 pages changed again by the second statement


def _temporary_files() -> list[str]:
    """SQLite's temporary files this process holds open (deleted ones included)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if "etilqs_" in target:
            found.append(target)
    return found


def _second_big_write(conn: Connection) -> list[str]:
    """Two multi-row writes in one transaction; the temporary files open before it ends."""
    conn.execute(
        text("INSERT INTO t (k, v) VALUES (:k, :v)"),
        [{"k": i, "v": "x" * 200} for i in range(ROWS)],
    )
    conn.execute(text("UPDATE t SET v = upper(v) WHERE k >= 0"))
    return _temporary_files()


@pytest.fixture
def table(sqlite_url: str) -> Iterator[str]:
    engine = create_engine(sqlite_url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (k INTEGER UNIQUE NOT NULL, v TEXT NOT NULL)"))
    engine.dispose()
    yield sqlite_url


def test_by_default_a_large_statement_journal_goes_to_a_temporary_file(table: str) -> None:
    engine = create_engine(table, temp_in_memory=False)
    with engine.begin() as conn:
        assert _second_big_write(conn)  # the comparison below is not vacuous
    engine.dispose()


def test_serve_keeps_its_statement_journals_in_memory(table: str) -> None:
    engine = create_engine(table, temp_in_memory=True)
    with engine.begin() as conn:
        assert conn.exec_driver_sql("PRAGMA temp_store").scalar_one() == 2  # MEMORY
        assert _second_big_write(conn) == []
        assert conn.execute(text("SELECT count(*) FROM t WHERE v = upper(v)")).scalar() == ROWS
    engine.dispose()


def test_a_statement_that_fails_still_rolls_back_alone_in_memory(table: str) -> None:
    """The journal is still kept: a failed statement undoes only its own changes."""
    engine = create_engine(table, temp_in_memory=True)
    with engine.begin() as conn:
        _second_big_write(conn)
        with pytest.raises(Exception, match="UNIQUE"):
            # changes every row before the last one collides with the first one's new key
            last = ROWS - 1
            moved = f"CASE WHEN k = {last} THEN 0 ELSE k END + 100000"
            conn.execute(text(f"UPDATE t SET v = lower(v), k = {moved}"))
        assert conn.execute(text("SELECT count(*) FROM t WHERE v = upper(v)")).scalar() == ROWS
    engine.dispose()
