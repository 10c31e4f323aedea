"""SQLite's random-keyed index pages kept mapped in memory (storage/plumbing/residency.py).

Real SQLite files, migrated as serve migrates them; what is mapped is read back from the
kernel (``/proc/self/smaps``: the resident size of this process's map of the file).
"""

from __future__ import annotations

import mmap
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from tests.proc_maps import mapped_bytes, mapped_pages
from toolscore.storage.migrate import upgrade
from toolscore.storage.plumbing.database_file import IndexPages, index_pages
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.plumbing.residency import RANDOM_KEYED_INDEXES, ResidentPages, _populate
from toolscore.storage.telemetry.traces import number_traces

pytestmark = pytest.mark.skipif(not hasattr(mmap.mmap, "madvise"), reason="Linux only")


def _add_traces(engine: Engine, count: int) -> None:
    with engine.begin() as conn:
        number_traces(conn, [uuid.uuid4().hex for _ in range(count)])


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "toolscore.db"


@pytest.fixture
def engine(path: Path) -> Iterator[Engine]:
    upgrade(f"sqlite:///{path}")
    eng = create_engine(f"sqlite:///{path}")
    _add_traces(eng, 20_000)
    with eng.connect() as conn:  # the pages in the file, where the map sees them
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    try:
        yield eng
    finally:
        eng.dispose()


def _index(engine: Engine) -> IndexPages:
    with engine.connect() as conn:
        found = index_pages(conn, RANDOM_KEYED_INDEXES)
    assert found is not None
    return found


def _index_bytes(engine: Engine) -> int:
    found = _index(engine)
    return len(found.pages) * found.page_size


def test_the_trace_id_index_is_listed_page_by_page(engine: Engine, path: Path) -> None:
    with engine.connect() as conn:
        found = index_pages(conn, ["sqlite_autoindex_traces_1", "no_such_index"])
    assert found is not None and found.path == str(path)
    # 20,000 ids of 32 characters: over 80 pages of 8 KiB, each listed once
    assert len(found.pages) > 80 and len(set(found.pages)) == len(found.pages)
    assert max(found.pages) * found.page_size <= path.stat().st_size


def test_refresh_maps_every_page_of_the_indexes_within_the_budget(
    engine: Engine, path: Path
) -> None:
    pages = ResidentPages(budget=1 << 30)
    try:
        with engine.connect() as conn:
            kept = pages.refresh(conn)
        assert kept is not None
        assert kept.resident_bytes == kept.index_bytes == _index_bytes(engine)
        index = _index(engine)
        assert mapped_pages(path, index.pages, index.page_size) == list(index.pages)
        assert mapped_bytes(path) == kept.resident_bytes  # and nothing around them
    finally:
        pages.close()
    assert mapped_bytes(path) == 0  # closed: nothing of the file stays mapped


def test_a_smaller_budget_maps_that_much_and_no_more(engine: Engine, path: Path) -> None:
    pages = ResidentPages(budget=64 * 1024)
    try:
        with engine.connect() as conn:
            kept = pages.refresh(conn)
        assert kept is not None and kept.index_bytes > 64 * 1024
        assert kept.resident_bytes == 64 * 1024
        index = _index(engine)
        first = list(index.pages[: 64 * 1024 // index.page_size])  # the trace ids' first
        assert mapped_pages(path, first, index.page_size) == first
        assert mapped_bytes(path) == kept.resident_bytes  # the rest is not mapped
    finally:
        pages.close()


def test_pages_added_since_are_mapped_at_the_next_refresh(engine: Engine, path: Path) -> None:
    pages = ResidentPages(budget=1 << 30)
    try:
        with engine.connect() as conn:
            first = pages.refresh(conn)
        _add_traces(engine, 20_000)
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            second = pages.refresh(conn)
        assert first is not None and second is not None
        assert second.resident_bytes > first.resident_bytes
        assert second.resident_bytes == _index_bytes(engine) == mapped_bytes(path)
        index = _index(engine)
        assert mapped_pages(path, index.pages, index.page_size) == list(index.pages)
    finally:
        pages.close()


def test_a_file_that_shrank_is_mapped_again_at_its_new_size(engine: Engine, path: Path) -> None:
    pages = ResidentPages(budget=1 << 30)
    try:
        with engine.connect() as conn:
            assert pages.refresh(conn) is not None
        with engine.begin() as conn:
            conn.execute(text("DELETE FROM traces"))
        with engine.connect() as conn:
            conn.exec_driver_sql("VACUUM")
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
            kept = pages.refresh(conn)
        assert kept is not None and kept.resident_bytes == _index_bytes(engine)
        assert mapped_bytes(path) == kept.resident_bytes  # the old map's pages are gone
    finally:
        pages.close()


def test_populating_past_the_end_of_a_truncated_file_is_no_crash(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.write_bytes(os.urandom(8 * mmap.PAGESIZE))
    with data.open("rb") as f:
        mapping = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)
    try:
        os.truncate(data, 2 * mmap.PAGESIZE)
        assert _populate(mapping, 4 * mmap.PAGESIZE, mmap.PAGESIZE) == 0  # no SIGBUS
        assert _populate(mapping, 0, mmap.PAGESIZE) == mmap.PAGESIZE
    finally:
        mapping.close()


def test_nothing_is_kept_for_a_database_in_memory() -> None:
    eng = create_engine("sqlite://")
    try:
        with eng.connect() as conn:
            assert ResidentPages(budget=1 << 20).refresh(conn) is None
    finally:
        eng.dispose()


def test_nothing_is_kept_on_postgresql(postgres_url: str) -> None:
    upgrade(postgres_url)
    eng = create_engine(postgres_url)
    try:
        with eng.connect() as conn:
            assert ResidentPages(budget=1 << 20).refresh(conn) is None
    finally:
        eng.dispose()


def test_pages_only_in_the_write_ahead_log_wait_for_the_file(engine: Engine, path: Path) -> None:
    _add_traces(engine, 20_000)  # not checkpointed: new pages lie past the file's end
    pages = ResidentPages(budget=1 << 30)
    try:
        with engine.connect() as conn:
            kept = pages.refresh(conn)
        assert kept is not None and 0 < kept.resident_bytes < kept.index_bytes
    finally:
        pages.close()
