"""serve keeps SQLite's random-keyed indexes mapped in memory (collector/upkeep/residency.py).

A real SQLite file and a real PostgreSQL database: the component's first refresh maps the
indexes and reports them on ``/metrics``; a budget short of the indexes says so in the log,
once; PostgreSQL has nothing to keep and the component ends.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import Engine

from toolscore.collector.upkeep.residency import IndexResidency, ResidencyMetrics
from toolscore.storage.migrate import upgrade
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.telemetry.traces import number_traces


def _gauge(registry: CollectorRegistry, name: str) -> float:
    value = registry.get_sample_value(name)
    assert value is not None, name
    return value


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    url = f"sqlite:///{tmp_path / 'toolscore.db'}"
    upgrade(url)
    eng = create_engine(url)
    with eng.begin() as conn:
        number_traces(conn, [uuid.uuid4().hex for _ in range(20_000)])
    with eng.connect() as conn:  # into the file, as serve's checkpoints do within a second
        conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    try:
        yield eng
    finally:
        eng.dispose()


async def _first_refresh(engine: Engine, budget: int) -> CollectorRegistry:
    registry = CollectorRegistry()
    residency = IndexResidency(engine, ResidencyMetrics(registry), budget)
    await residency.start()
    try:
        for _ in range(200):
            if registry.get_sample_value("toolscore_sqlite_random_index_bytes"):
                break
            await asyncio.sleep(0.02)
    finally:
        await residency.stop()
    return registry


def test_the_indexes_are_kept_and_reported(engine: Engine) -> None:
    registry = asyncio.run(_first_refresh(engine, 1 << 30))
    index = _gauge(registry, "toolscore_sqlite_random_index_bytes")
    assert index > 80 * 8192  # 20,000 trace ids: over 80 pages of 8 KiB
    assert _gauge(registry, "toolscore_sqlite_resident_index_bytes") == index


def test_a_short_budget_keeps_what_it_can_and_says_so(
    engine: Engine, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="toolscore.residency"):
        registry = asyncio.run(_first_refresh(engine, 64 * 1024))
    assert _gauge(registry, "toolscore_sqlite_resident_index_bytes") == 64 * 1024
    said = [r.getMessage() for r in caplog.records if "--sqlite-resident-bytes" in r.getMessage()]
    assert len(said) == 1 and "more than --sqlite-resident-bytes (0 MiB)" in said[0]


def test_on_postgresql_there_is_nothing_to_keep(postgres_url: str) -> None:
    upgrade(postgres_url)
    eng = create_engine(postgres_url)

    async def run() -> bool:
        residency = IndexResidency(eng, ResidencyMetrics(CollectorRegistry()), 1 << 20)
        await residency.start()
        assert residency._task is not None
        await asyncio.wait_for(residency._task, 10)  # ends on its own
        return residency._task.done()

    try:
        assert asyncio.run(run())
    finally:
        eng.dispose()
