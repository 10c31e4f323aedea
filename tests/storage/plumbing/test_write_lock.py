"""``take_write_lock``: a scoring transaction on SQLite starts holding the write lock, asked for
every half millisecond rather than at the busy handler's growing steps (issue 14: during a burst
those steps missed the gaps between ingest's transactions and scoring fell 2 s behind)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, text

from toolscore.storage.plumbing.engine import Deadlines, create_engine, take_write_lock


@pytest.fixture
def engine(sqlite_url: str) -> Iterator[Engine]:
    engine = create_engine(sqlite_url, deadlines=Deadlines(lock_s=0.3))
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE t (x INTEGER)"))
    yield engine
    engine.dispose()


def other_writer(engine: Engine) -> sqlite3.Connection:
    path = engine.url.database
    assert path is not None
    return sqlite3.connect(path, timeout=0, isolation_level=None, check_same_thread=False)


def test_the_transaction_holds_the_write_lock_from_its_start(engine: Engine) -> None:
    other = other_writer(engine)
    with engine.begin() as conn:
        take_write_lock(conn)
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            other.execute("INSERT INTO t VALUES (2)")
        conn.execute(text("INSERT INTO t VALUES (1)"))
    other.execute("INSERT INTO t VALUES (2)")  # free once committed
    with engine.connect() as conn:
        assert conn.execute(text("SELECT x FROM t ORDER BY x")).scalars().all() == [1, 2]


def test_it_waits_for_a_writer_and_goes_on_once_that_one_commits(engine: Engine) -> None:
    other = other_writer(engine)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO t VALUES (1)")
    threading.Timer(0.15, other.execute, ("COMMIT",)).start()
    started = time.monotonic()
    with engine.begin() as conn:
        take_write_lock(conn)
        waited = time.monotonic() - started
        conn.execute(text("INSERT INTO t VALUES (2)"))
    assert waited >= 0.1, "it had to wait for the other writer"
    with engine.connect() as conn:
        assert conn.execute(text("SELECT x FROM t ORDER BY x")).scalars().all() == [1, 2]


def test_it_gives_up_after_the_busy_timeout_and_keeps_that_timeout(engine: Engine) -> None:
    other = other_writer(engine)
    other.execute("BEGIN IMMEDIATE")
    started = time.monotonic()
    with pytest.raises(sqlite3.OperationalError, match="locked"), engine.begin() as conn:
        take_write_lock(conn)
    assert time.monotonic() - started >= 0.3, "gave up before the lock deadline (lock_s=0.3)"
    other.execute("ROLLBACK")
    with engine.connect() as conn:
        assert conn.execute(text("PRAGMA busy_timeout")).scalar_one() == 300


def test_postgresql_transactions_are_left_as_they_are(postgres_url: str) -> None:
    engine = create_engine(postgres_url)
    try:
        with engine.begin() as conn:
            take_write_lock(conn)  # row locks there: nothing to take
            assert conn.execute(text("SELECT 1")).scalar_one() == 1
    finally:
        engine.dispose()
