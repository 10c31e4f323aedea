"""The health watchdog (collector/upkeep/watchdog.py) and the guarded writer
(collector/ingest/guard.py)
with a real SQLite file: an ingest transaction held open by a hook stands in for a commit stuck
on a silent database (a real silent PostgreSQL is in tests/integration/test_half_open_database.py).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
import time

import pytest
from sqlalchemy import Connection, func, select

from toolscore.collector.errors import ShuttingDown, StorageUnavailable
from toolscore.collector.ingest.guard import GuardedWriter
from toolscore.collector.ingest.metrics import Metrics
from toolscore.collector.ingest.writer import StoredBatch
from toolscore.collector.upkeep.watchdog import Probe, Watchdog
from toolscore.storage.migrate import upgrade
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.records import SpanRecord
from toolscore.storage.telemetry.spans import spans_table


def _span(trace: int) -> SpanRecord:
    return SpanRecord(
        trace_id=f"{trace:032x}",
        span_id=f"{1:016x}",
        parent_span_id=None,
        name="watched",
        kind=1,
        start_ns=1,
        end_ns=2,
    )


class BlockingHook:
    """Holds the ingest transaction open until released (a commit that does not end)."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def on_batch(self, conn: Connection, batch: StoredBatch) -> None:
        self.entered.set()
        self.release.wait(30)


async def _until(predicate: object, timeout: float = 10) -> None:
    ends = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < ends, "condition not reached"
        await asyncio.sleep(0.02)


def test_a_stuck_writer_is_reported_refused_and_recovers(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    upgrade(sqlite_url)
    engine = create_engine(sqlite_url)
    hook = BlockingHook()
    metrics = Metrics()
    changes: list[bool] = []

    async def on_change(serving: bool) -> None:
        changes.append(serving)

    async def scenario() -> None:
        writer = GuardedWriter(engine, hooks=[hook], metrics=metrics)
        await writer.start()
        dog = Watchdog(lambda: None, writer, metrics, stuck_after_s=0.3, on_change=on_change)
        await dog.start()
        waiting = asyncio.ensure_future(writer.submit([_span(1)]))
        await asyncio.to_thread(hook.entered.wait, 5)
        await _until(lambda: not dog.healthy)
        assert await dog.check() is False
        assert metrics.healthy._value.get() == 0
        assert metrics.ingest_busy_seconds._value.get() > 0.3
        with pytest.raises(StorageUnavailable, match="database not answering"):
            await waiting  # answered at once, not when the commit ends
        with pytest.raises(StorageUnavailable):
            await writer.submit([_span(2)])  # refused without queueing
        hook.release.set()
        await _until(lambda: dog.healthy)
        assert metrics.ingest_busy_seconds._value.get() == 0
        await writer.submit([_span(3)])
        await dog.stop()
        await writer.stop()

    with caplog.at_level(logging.INFO, logger="toolscore.health"):
        asyncio.run(scenario())
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and warnings[0].startswith("unhealthy: ingest writer stuck")
    assert any(r.getMessage().startswith("healthy again") for r in caplog.records)
    assert changes == [False, True]
    with engine.connect() as conn:
        traces = set(conn.execute(select(spans_table.c.trace_id)).scalars())
        assert conn.execute(select(func.count()).select_from(spans_table)).scalar_one() == 2
    engine.dispose()
    # the stuck commit went on and stored its span (a resend is deduplicated); the refused
    # request was never queued
    assert traces == {f"{1:032x}", f"{3:032x}"}


def test_a_probe_that_never_answers_is_unhealthy_and_never_piles_up() -> None:
    blocked = threading.Event()
    calls: list[float] = []

    def silent_ping() -> None:
        calls.append(time.monotonic())
        blocked.wait(30)

    async def scenario() -> list[bool]:
        probe = Probe(silent_ping)
        started = time.monotonic()
        verdicts = [(await probe.answer(0.3)).ok for _ in range(5)]
        assert time.monotonic() - started < 1.0  # overdue probes answer at once
        blocked.set()
        await _until(lambda: probe._pending is not None and probe._pending.done())
        verdicts.append((await probe.answer(0.3)).ok)  # a new probe, answered
        return verdicts

    try:
        verdicts = asyncio.run(scenario())
    finally:
        blocked.set()
    assert verdicts == [False] * 5 + [True]
    assert len(calls) == 2  # one probe for the five checks while silent, then one more


def test_a_failing_probe_is_unhealthy() -> None:
    def refused() -> None:
        raise ConnectionRefusedError("no database")

    verdict = asyncio.run(Probe(refused).answer(1.0))
    assert (verdict.ok, verdict.reason) == (False, "database probe failed")


def test_shutting_out_answers_waiting_requests_unavailable_for_good(sqlite_url: str) -> None:
    upgrade(sqlite_url)
    engine = create_engine(sqlite_url)
    hook = BlockingHook()

    async def scenario() -> None:
        writer = GuardedWriter(engine, hooks=[hook])
        await writer.start()
        waiting = asyncio.ensure_future(writer.submit([_span(1)]))
        await asyncio.to_thread(hook.entered.wait, 5)
        writer.shut_out()
        with pytest.raises(ShuttingDown):
            await waiting
        writer.refuse(None)  # shutting down wins over a recovering watchdog
        with pytest.raises(ShuttingDown):
            await writer.submit([_span(2)])
        hook.release.set()
        await writer.stop()

    asyncio.run(scenario())
    engine.dispose()


class FullDisk:
    """Fails every ingest transaction the way SQLite does on a full disk, until ``freed``."""

    def __init__(self) -> None:
        self.freed = False

    def on_batch(self, conn: Connection, batch: StoredBatch) -> None:
        if not self.freed:
            error = sqlite3.OperationalError("database or disk is full")
            error.sqlite_errorcode = sqlite3.SQLITE_FULL
            raise error


def test_failing_commits_make_the_service_unhealthy_saying_why_until_one_succeeds(
    sqlite_url: str,
) -> None:
    upgrade(sqlite_url)
    engine = create_engine(sqlite_url)
    disk = FullDisk()
    metrics = Metrics()

    async def scenario() -> None:
        writer = GuardedWriter(engine, hooks=[disk], metrics=metrics)
        await writer.start()
        dog = Watchdog(lambda: None, writer, metrics, stuck_after_s=5)
        assert await dog.reason() is None
        with pytest.raises(StorageUnavailable):
            await writer.submit([_span(1)])
        reason = await dog.reason()
        assert reason is not None and "the database's disk is full" in reason
        assert metrics.healthy._value.get() == 0
        disk.freed = True
        await writer.submit([_span(1)])
        assert await dog.reason() is None
        assert metrics.healthy._value.get() == 1
        await writer.stop()

    asyncio.run(scenario())
    engine.dispose()
