"""``toolscore db upgrade`` killed (SIGKILL) in the middle of a migration that rewrites the spans
(0014, numbering the stored traces) of a database written before it: the schema is whole (still
the previous revision, every span there), and the next upgrade completes with every span kept.
The upgrade is one transaction on both databases (SQLite: the file's write lock is held for all
of it, storage/migrations/lock.py; PostgreSQL: transactional DDL)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from sqlalchemy import func, inspect, select

from tests.storage.old_schema import store_unnumbered
from toolscore.storage.migrate import current_revision, head_revision, upgrade
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.records import SpanRecord
from toolscore.storage.telemetry.spans import spans_table

TRACES = 8_000
SPANS_PER_TRACE = 5  # 40,000 spans: migration 0014 takes seconds to rewrite them


def _old_database(db_url: str) -> int:
    upgrade(db_url, "0013")
    engine = create_engine(db_url)
    try:
        spans = [
            SpanRecord(trace, f"{i + 1:016x}", None, "s", 1, 10 + i, 20 + i)
            for trace in (uuid.uuid4().hex for _ in range(TRACES))
            for i in range(SPANS_PER_TRACE)
        ]
        for i in range(0, len(spans), 5_000):
            store_unnumbered(engine, spans[i : i + 5_000], [], 1)
    finally:
        engine.dispose()
    return len(spans)


def _spans(db_url: str) -> int:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(spans_table)).scalar_one())
    finally:
        engine.dispose()


def _kill_during_0014(db_url: str, log: Path) -> None:
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "toolscore", "db", "upgrade", "--db", db_url],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    deadline = time.monotonic() + 120
    while "numbering the stored traces" not in log.read_text():
        assert proc.poll() is None, f"the upgrade ended first: {log.read_text()}"
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert "rebuilding the span key" not in log.read_text(), "killed too late to tell"


def test_an_upgrade_killed_mid_migration_leaves_a_whole_schema(db_url: str, tmp_path: Path) -> None:
    stored = _old_database(db_url)
    _kill_during_0014(db_url, tmp_path / "upgrade.log")

    assert current_revision(db_url) == "0013"
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            assert "traces" not in inspect(conn).get_table_names(), "0014 half applied"
            if conn.dialect.name == "sqlite":
                assert conn.exec_driver_sql("PRAGMA integrity_check").scalar_one() == "ok"
    finally:
        engine.dispose()
    assert _spans(db_url) == stored

    upgrade(db_url)
    assert current_revision(db_url) == head_revision()
    assert _spans(db_url) == stored
