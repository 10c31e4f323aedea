"""PostgreSQL: spans and log records partitioned by day; whole days dropped by retention."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, func, select, text

from tests.collector.upkeep.test_retention import (
    NS,
    REFERENCE,
    T_OLD,
    conversation,
    expect,
    score_all,
    store,
)
from tests.storage.old_schema import store_unnumbered
from toolscore.storage.migrate import upgrade
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.retention.span_pruning import PruneLimits, prune
from toolscore.storage.telemetry import partitions as parts
from toolscore.storage.telemetry.spans import log_records_table, spans_table

DAY = parts.DAY_NS


@pytest.fixture
def engine(migrated_postgres_url: str) -> Iterator[Engine]:
    eng = create_engine(migrated_postgres_url)
    try:
        yield eng
    finally:
        eng.dispose()


def _count(engine: Engine, table: object = spans_table) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())  # type: ignore[arg-type]


def _names(engine: Engine, table: str = "spans") -> set[str]:
    with engine.connect() as conn:
        return {p.name for p in parts.partitions(conn, table)}


def test_an_existing_database_is_converted_and_resends_stay_out(postgres_url: str) -> None:
    upgrade(postgres_url, "0007")
    engine = create_engine(postgres_url)
    now = time.time_ns()
    recent, _ = conversation("recent", "e1", start_shift_ns=now - 1_767_225_600 * NS)
    absurd, logs = conversation("absurd", "e2", start_shift_ns=-(10**18))  # 1970
    store_unnumbered(engine, recent, [], now)
    store_unnumbered(engine, absurd, logs, now)
    upgrade(postgres_url)
    with engine.connect() as conn:
        assert parts.partitioned(conn, "spans") and parts.partitioned(conn, "log_records")
        in_default = conn.execute(text("SELECT count(*) FROM spans_default")).scalar_one()
    assert _count(engine) == 10 and _count(engine, log_records_table) == 1
    assert in_default == 5, "the 1970 spans: DEFAULT partition"
    assert parts.partition_name("spans", parts.day_start(now)) in _names(engine)
    store(engine, recent + absurd, logs, now + NS)  # a resend
    assert _count(engine) == 10 and _count(engine, log_records_table) == 1
    engine.dispose()


def test_partitions_created_and_dropped_while_ingest_runs(engine: Engine) -> None:
    """Old days are dropped whole; every span committed meanwhile is still stored."""
    old_day = parts.day_start(T_OLD)
    with engine.begin() as conn:
        parts.create_ahead(conn, old_day, days=1)  # the days the old spans started on
    names = [f"old{i}" for i in range(6)]
    expect(engine, REFERENCE, *names)
    shift = old_day - 1_767_225_600 * NS + 3600 * NS  # fixture times -> 01:00 on the old day
    for i, name in enumerate(names):
        spans, logs = conversation(name, f"a{i:x}", start_shift_ns=shift)
        logs = [dataclasses.replace(r, time_ns=old_day + 7200 * NS) for r in logs]
        store(engine, spans, logs, T_OLD)
    score_all(engine, T_OLD + 10 * NS)
    old_partition = parts.partition_name("spans", old_day)
    assert old_partition in _names(engine)

    acknowledged: list[str] = []
    stop = threading.Event()

    def ingest() -> None:  # a conversation every few ms, today, as received now
        i = 0
        while not stop.is_set():
            now = time.time_ns()
            spans, _ = conversation(f"live{i}", f"f{i:x}", start_shift_ns=now - 1_767_225_600 * NS)
            store(engine, spans, [], now)
            acknowledged.append(spans[0].trace_id)
            i += 1

    writer = threading.Thread(target=ingest)
    writer.start()
    try:
        time.sleep(0.3)
        with engine.begin() as conn:  # the coming days, while ingest runs
            created = parts.create_ahead(conn, time.time_ns() + 5 * DAY, days=2)
        result = prune(engine, T_OLD + 5 * DAY, limits=PruneLimits(pause_s=0))
        time.sleep(0.3)
    finally:
        stop.set()
        writer.join(30)
    assert len(created) == 6, created  # 3 days x (spans, log_records)
    assert old_partition not in _names(engine), "dropped whole"
    assert parts.partition_name("log_records", old_day) not in _names(engine, "log_records")
    assert (result.conversations, result.spans, result.log_records) == (6, 30, 6)
    with engine.connect() as conn:
        stored = set(conn.execute(select(spans_table.c.trace_id).distinct()).scalars())
    assert len(acknowledged) > 5
    assert stored == set(acknowledged), "every acknowledged span of the retained window stored"
    assert _count(engine) == 5 * len(acknowledged)


def test_a_day_with_an_unfinished_conversation_is_not_dropped(engine: Engine) -> None:
    old_day = parts.day_start(T_OLD)
    with engine.begin() as conn:
        parts.create_ahead(conn, old_day, days=0)
    shift = old_day - 1_767_225_600 * NS + 3600 * NS
    expect(engine, REFERENCE, "done", "open")
    store(engine, *conversation("done", "a1", start_shift_ns=shift), T_OLD)
    score_all(engine, T_OLD + 10 * NS)
    store(engine, *conversation("open", "b1", start_shift_ns=shift), T_OLD)  # not scored
    result = prune(engine, T_OLD + 5 * DAY)
    assert parts.partition_name("spans", old_day) in _names(engine), "kept: 'open' needs it"
    assert (result.conversations, result.spans) == (1, 5), "'done' deleted row by row"
    with engine.connect() as conn:
        left = set(conn.execute(select(spans_table.c.trace_id).distinct()).scalars())
    assert {t.lstrip("0") for t in left} == {"b1"}
