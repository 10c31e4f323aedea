"""storage.plumbing.faults.data_fault tells data the database refuses from failures that may pass.

Every error here is provoked for real, on a SQLite file and on PostgreSQL, through the same
write paths the ingest writer uses; the descriptions must never quote the database's own text.
"""

from __future__ import annotations

import os
import socket
import sqlite3
from pathlib import Path

import orjson
import pytest
from sqlalchemy import Engine, text
from sqlalchemy import exc as sa_exc

from toolscore.storage.conversations.tables import conversations
from toolscore.storage.migrate import upgrade
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.plumbing.faults import data_fault, failure_reason, is_outage
from toolscore.storage.records import SpanRecord
from toolscore.storage.telemetry.spans import store_spans


def _engine(url: str) -> Engine:
    upgrade(url)
    return create_engine(url)


def _span(start_ns: int) -> SpanRecord:
    return SpanRecord("1" * 32, "2" * 16, None, "n", 1, start_ns, 1)


def _error_of_insert(engine: Engine, start_ns: int) -> BaseException:
    with pytest.raises(Exception) as info, engine.begin() as conn:
        store_spans(conn, [_span(start_ns)], 1)
    return info.value


def _conversation(conv_id: str) -> dict[str, object]:
    import datetime as dt

    at = dt.datetime.now(dt.UTC)
    return {
        "id": conv_id, "status": "open", "first_seen_at": at, "last_span_at": at,
        "last_span_received_ns": 1, "needs_scoring": True, "last_trace_id": "t", "revision": 0,
    }  # fmt: skip


def _error_of_conversation(engine: Engine, conv_id: str) -> BaseException:
    with pytest.raises(Exception) as info, engine.begin() as conn:
        conn.execute(conversations.insert(), [_conversation(conv_id)])
    return info.value


def _assert_safe(description: str | None, error: BaseException) -> None:
    assert description is not None, f"not recognised as a data fault: {error!r}"
    for internal in ("psycopg", "sqlite", "bigint", "btree", "2704", "5432", "127.0.0.1"):
        assert internal not in description


def test_an_integer_beyond_int64_is_a_data_fault(db_url: str) -> None:
    engine = _engine(db_url)
    error = _error_of_insert(engine, 2**63)
    description = data_fault(error)
    _assert_safe(description, error)
    assert description is not None and "out of range" in description
    engine.dispose()


def test_nul_in_postgresql_text_is_a_data_fault(postgres_url: str) -> None:
    engine = _engine(postgres_url)
    error = _error_of_conversation(engine, "conv\x00")
    description = data_fault(error)
    _assert_safe(description, error)
    assert description is not None and "NUL" in description
    engine.dispose()


def test_a_key_over_the_btree_limit_is_a_data_fault(postgres_url: str) -> None:
    engine = _engine(postgres_url)
    error = _error_of_conversation(engine, os.urandom(1600).hex())  # incompressible
    assert "btree" in str(error)  # what the database said...
    description = data_fault(error)
    _assert_safe(description, error)  # ...and what a client may read
    assert description is not None and "index" in description
    engine.dispose()


def test_json_the_encoder_refuses_is_a_data_fault() -> None:
    deep: list[object] = []
    for _ in range(300):
        deep = [deep]
    with pytest.raises(orjson.JSONEncodeError) as info:
        orjson.dumps(deep)
    assert data_fault(info.value) is not None


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_refused_connection_is_not_a_data_fault() -> None:
    engine = create_engine(f"postgresql+psycopg://postgres@127.0.0.1:{_closed_port()}/none")
    with pytest.raises(Exception) as info, engine.connect() as conn:
        conn.execute(text("SELECT 1"))
    assert data_fault(info.value) is None
    engine.dispose()


def test_a_sqlite_file_that_cannot_be_opened_is_not_a_data_fault(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite:///{tmp_path / 'missing' / 'dir' / 'x.db'}")
    with pytest.raises(Exception) as info, engine.connect() as conn:
        conn.execute(text("SELECT 1"))
    assert data_fault(info.value) is None
    engine.dispose()


def test_a_missing_table_and_our_own_bugs_are_not_data_faults(db_url: str) -> None:
    engine = create_engine(db_url)  # not migrated: no tables
    error = _error_of_conversation(engine, "c")
    assert data_fault(error) is None  # an operator can fix it: stays retryable
    assert data_fault(RuntimeError("injected")) is None
    assert data_fault(KeyError("x")) is None
    engine.dispose()


def test_a_full_sqlite_database_is_not_a_data_fault_and_its_reason_says_the_disk_is_full(
    tmp_path: Path,
) -> None:
    """``max_page_count`` makes SQLite answer SQLITE_FULL as it does when its disk is full."""
    engine = create_engine(f"sqlite:///{tmp_path / 'full.db'}")
    with pytest.raises(Exception) as info, engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (v TEXT)")
        pages = conn.exec_driver_sql("PRAGMA page_count").scalar_one()
        conn.exec_driver_sql(f"PRAGMA max_page_count = {pages + 2}")
        for _ in range(100):
            conn.exec_driver_sql("INSERT INTO t VALUES (?)", (os.urandom(8000).hex(),))
    assert data_fault(info.value) is None  # space may come back: retryable
    assert failure_reason(info.value) == "the database's disk is full"
    assert failure_reason(RuntimeError("x")) == "the database refused the commit (RuntimeError)"
    engine.dispose()


class _Sqlstate(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(sqlstate)
        self.sqlstate = sqlstate


@pytest.mark.parametrize(
    ("error", "outage"),
    [
        (sa_exc.OperationalError("SELECT 1", {}, ConnectionRefusedError()), True),
        (sa_exc.DBAPIError("SELECT 1", {}, _Sqlstate("57P01")), True),  # admin shutdown
        (_Sqlstate("08006"), True),  # connection failure
        (_Sqlstate("53100"), True),  # disk full
        (sqlite3.OperationalError("database is locked"), True),
        (sa_exc.IntegrityError("INSERT", {}, _Sqlstate("23505")), False),  # the data's fault
        (TypeError("a bug"), False),
    ],
    ids=["refused", "shutdown", "connection", "disk-full", "locked", "integrity", "bug"],
)
def test_an_outage_is_told_from_a_fault_of_the_data_or_of_the_code(
    error: BaseException, outage: bool
) -> None:
    assert is_outage(error) is outage
