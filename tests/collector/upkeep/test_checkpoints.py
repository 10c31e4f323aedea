"""serve checkpoints SQLite's write-ahead log itself, off the commit path.

Real SQLite files (and PostgreSQL, where there is nothing to do): an engine made with
``autocheckpoint=False`` never copies the log into the file on commit, so the log keeps growing
until :class:`WalCheckpointer` copies it; the component then reports what it copied on
``/metrics``.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import Engine, text

from toolscore.collector.upkeep.checkpoints import CheckpointMetrics, WalCheckpointer
from toolscore.storage.plumbing.engine import NEW_FILE_PAGE_SIZE, create_engine

PAGE = NEW_FILE_PAGE_SIZE  # what a new file gets (storage/plumbing/engine.py)
ROWS = 600  # ~2,400 pages of 4 KiB: past SQLite's default autocheckpoint (1,000 pages)


def _write(engine: Engine, rows: int = ROWS) -> None:
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE IF NOT EXISTS blobs (id INTEGER PRIMARY KEY, b BLOB)"))
    for _ in range(rows):  # one commit each: autocheckpoint gets its chances
        with engine.begin() as conn:
            conn.execute(text("INSERT INTO blobs (b) VALUES (:b)"), {"b": os.urandom(4 * PAGE)})


def _wal_pages(path: Path) -> int:
    wal = Path(f"{path}-wal")
    return wal.stat().st_size // PAGE if wal.exists() else 0


def _value(registry: CollectorRegistry, name: str) -> float:
    value = registry.get_sample_value(name)
    assert value is not None, name
    return value


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "wal.db"


@pytest.fixture
def engine(db_path: Path) -> Iterator[Engine]:
    eng = create_engine(f"sqlite:///{db_path}", autocheckpoint=False)
    try:
        yield eng
    finally:
        eng.dispose()


def test_by_default_commits_keep_the_log_near_a_thousand_pages(db_path: Path) -> None:
    eng = create_engine(f"sqlite:///{db_path}")
    try:
        _write(eng)
        assert _wal_pages(db_path) < 1_200  # checkpointed and reused from the start
    finally:
        eng.dispose()


def test_without_autocheckpoint_commits_leave_the_log_to_its_owner(
    engine: Engine, db_path: Path
) -> None:
    _write(engine)
    assert _wal_pages(db_path) > 2_000  # every page written is still in the log


def test_a_checkpoint_copies_the_whole_log_into_the_file_and_counts_it(
    engine: Engine, db_path: Path
) -> None:
    registry = CollectorRegistry()
    checkpointer = WalCheckpointer(engine, CheckpointMetrics(registry))
    _write(engine)
    result = checkpointer.run_once()
    assert result is not None
    pages, copied = result
    assert pages > 2_000 and copied == pages
    assert _value(registry, "toolscore_sqlite_checkpointed_pages_total") == copied
    assert _value(registry, "toolscore_sqlite_wal_pages") == 0
    size_before = db_path.stat().st_size
    wal_bytes = Path(f"{db_path}-wal").stat().st_size
    _write(engine, 50)  # the next writer starts the log again from its beginning
    assert Path(f"{db_path}-wal").stat().st_size == wal_bytes  # reused, not grown
    again = checkpointer.run_once()
    assert again is not None and 0 < again[1] < pages
    assert _value(registry, "toolscore_sqlite_checkpointed_pages_total") == copied + again[1]
    assert db_path.stat().st_size > size_before


def test_the_component_checkpoints_every_interval_until_stopped(
    engine: Engine, db_path: Path
) -> None:
    registry = CollectorRegistry()

    async def scenario() -> None:
        checkpointer = WalCheckpointer(engine, CheckpointMetrics(registry), interval_s=0.05)
        await checkpointer.start()
        await asyncio.to_thread(_write, engine, 300)
        for _ in range(100):
            await asyncio.sleep(0.05)
            if registry.get_sample_value("toolscore_sqlite_wal_pages") == 0:
                break
        await checkpointer.stop()

    asyncio.run(scenario())
    assert _value(registry, "toolscore_sqlite_checkpointed_pages_total") >= 1_000
    assert _value(registry, "toolscore_sqlite_wal_pages") == 0
    assert _value(registry, "toolscore_sqlite_failed_checkpoints_total") == 0


def test_a_failing_checkpoint_is_counted_logged_once_and_retried(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    registry = CollectorRegistry()
    folder = tmp_path / "not-yet"  # SQLite cannot open a file in a missing folder
    eng = create_engine(f"sqlite:///{folder / 'wal.db'}", autocheckpoint=False)
    failures: list[float] = []

    async def scenario() -> None:
        checkpointer = WalCheckpointer(eng, CheckpointMetrics(registry), interval_s=0.02)
        await checkpointer.start()
        await asyncio.sleep(0.3)
        failures.append(_value(registry, "toolscore_sqlite_failed_checkpoints_total"))
        folder.mkdir()
        await asyncio.sleep(0.3)
        failures.append(_value(registry, "toolscore_sqlite_failed_checkpoints_total"))
        await asyncio.sleep(0.3)
        failures.append(_value(registry, "toolscore_sqlite_failed_checkpoints_total"))
        await checkpointer.stop()

    try:
        asyncio.run(scenario())
    finally:
        eng.dispose()
    assert failures[0] >= 3  # one a try, every interval
    assert failures[1] == failures[2]  # the folder exists: checkpoints succeed again
    lines = [r for r in caplog.records if "checkpoint of the write-ahead log failed" in r.message]
    assert len(lines) == 1  # one line for the streak, not one per try


def test_postgresql_has_nothing_to_checkpoint(postgres_url: str) -> None:
    registry = CollectorRegistry()
    eng = create_engine(postgres_url, autocheckpoint=False)
    try:
        assert WalCheckpointer(eng, CheckpointMetrics(registry)).run_once() is None
    finally:
        eng.dispose()
    assert _value(registry, "toolscore_sqlite_checkpointed_pages_total") == 0


def test_on_postgresql_the_loop_ends_after_its_first_answer(postgres_url: str) -> None:
    registry = CollectorRegistry()
    eng = create_engine(postgres_url, autocheckpoint=False)
    checkpointer = WalCheckpointer(eng, CheckpointMetrics(registry), interval_s=0.01)
    done: list[bool] = []

    async def scenario() -> None:
        await checkpointer.start()
        for _ in range(200):  # ended on its own, without stop()
            if checkpointer.done:
                break
            await asyncio.sleep(0.01)
        done.append(checkpointer.done)
        await checkpointer.stop()

    try:
        asyncio.run(scenario())
    finally:
        eng.dispose()
    assert done == [True]
    assert _value(registry, "toolscore_sqlite_failed_checkpoints_total") == 0


def test_a_checkpoint_a_reader_held_back_is_tried_again_at_once(
    engine: Engine, db_path: Path
) -> None:
    registry = CollectorRegistry()
    _write(engine, 5)
    behind: list[float | None] = []

    async def scenario() -> None:
        checkpointer = WalCheckpointer(engine, CheckpointMetrics(registry), interval_s=1.0)
        reader = sqlite3.connect(db_path, isolation_level=None)
        reader.execute("BEGIN")
        reader.execute("SELECT COUNT(*) FROM blobs").fetchall()  # a snapshot the log must keep
        await asyncio.to_thread(_write, engine, 100)
        await checkpointer.start()
        await asyncio.sleep(1.3)  # the first try (at 1 s), stopped short by the reader
        behind.append(registry.get_sample_value("toolscore_sqlite_wal_pages"))
        reader.execute("ROLLBACK")
        reader.close()
        await asyncio.sleep(0.3)  # before the next turn (at 2 s): only a retry copies it
        behind.append(registry.get_sample_value("toolscore_sqlite_wal_pages"))
        await checkpointer.stop()

    asyncio.run(scenario())
    assert behind[0] is not None and behind[0] > 300  # the reader held the checkpoint back
    assert behind[1] == 0


def test_a_log_past_the_limit_is_emptied_once_readers_are_done(
    engine: Engine, db_path: Path
) -> None:
    registry = CollectorRegistry()
    checkpointer = WalCheckpointer(engine, CheckpointMetrics(registry), truncate_pages=1_000)
    _write(engine, 100)  # ~400 pages: under the limit, only copied
    checkpointer.run_once()
    assert _wal_pages(db_path) > 300
    assert _value(registry, "toolscore_sqlite_wal_truncations_total") == 0
    _write(engine)  # ~2,400 pages more
    checkpointer.run_once()
    assert _wal_pages(db_path) == 0  # the file itself is emptied
    assert _value(registry, "toolscore_sqlite_wal_truncations_total") == 1
    assert _value(registry, "toolscore_sqlite_wal_pages") == 0
    with engine.connect() as conn:
        assert conn.execute(text("SELECT COUNT(*) FROM blobs")).scalar_one() == 100 + ROWS


def test_a_long_reader_holds_writers_back_for_a_fifth_of_a_second_at_most(
    engine: Engine, db_path: Path
) -> None:
    registry = CollectorRegistry()
    checkpointer = WalCheckpointer(engine, CheckpointMetrics(registry), truncate_pages=100)
    _write(engine, 5)
    reader = sqlite3.connect(db_path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT COUNT(*) FROM blobs").fetchall()  # a long report, say
    _write(engine, 100)
    started = time.monotonic()
    result = checkpointer.run_once()
    assert time.monotonic() - started < 1.0
    assert result is not None and result[0] > 100  # not emptied: the reader still needs it
    assert _value(registry, "toolscore_sqlite_wal_truncations_total") == 0
    reader.execute("ROLLBACK")
    reader.close()
    checkpointer.run_once()
    assert _value(registry, "toolscore_sqlite_wal_truncations_total") == 1
    assert _wal_pages(db_path) == 0
