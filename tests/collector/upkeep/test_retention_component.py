"""The retention component of ``serve``: when a pass stops at its cap, the next runs at once."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import Engine, func, select

from tests.collector.upkeep.test_retention import (  # the store and scoring helpers, not its tests
    NS,
    T_OLD,
    conversation,
    score_all,
    store,
)
from tests.collector.upkeep.test_retention import (  # the fixture, on SQLite and PostgreSQL
    engine as engine,
)
from toolscore.collector.upkeep.retention_runner import RetentionComponent, RetentionMetrics
from toolscore.storage.conversations.tables import conversations
from toolscore.storage.retention.span_pruning import PruneLimits


def _pruned(engine: Engine) -> int:
    with engine.connect() as conn:
        query = select(func.count()).where(conversations.c.pruned_through_ns.is_not(None))
        return int(conn.execute(query).scalar_one())


async def _run_until(component: RetentionComponent, engine: Engine, want: int) -> int:
    await component.start()
    component._periodic.wake()  # the first pass now, not after the hour-long interval
    deadline = time.monotonic() + 20
    while _pruned(engine) < want and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)  # a pass that would run past the backlog has had its chance
    await component.stop()
    return _pruned(engine)


def test_a_backlog_past_the_cap_is_pruned_in_back_to_back_passes(
    engine: Engine,
    caplog: pytest.LogCaptureFixture,
) -> None:
    for i in range(5):  # unmatched (no expectation): prunable once old
        store(engine, *conversation(f"old-{i}", f"a{i}"), T_OLD)
    score_all(engine, T_OLD + 10 * NS)
    component = RetentionComponent(
        engine,
        86_400.0,  # T_OLD is years ago
        RetentionMetrics(CollectorRegistry()),
        interval_s=3600.0,
        limits=PruneLimits(conversations_per_mark=1, marks_per_pass=2, pause_s=0),
    )

    with caplog.at_level(logging.INFO, logger="toolscore.retention"):
        pruned = asyncio.run(_run_until(component, engine, 5))

    assert pruned == 5, "passes of 2, 2 and 1 without waiting the interval between them"
    said = [r.getMessage() for r in caplog.records]
    assert "retention: more than 2 conversations eligible: passes run back to back" in said
    assert "retention: caught up: a pass every 3600 s" in said
