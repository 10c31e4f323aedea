"""The group-commit ingest writer, against a real SQLite file and a real PostgreSQL database."""

from __future__ import annotations

import asyncio
import math

import pytest
from sqlalchemy import Connection, func, select

from toolscore.collector.errors import QueueFull, ShuttingDown, StorageUnavailable
from toolscore.collector.ingest.writer import IngestConfig, IngestWriter, StoredBatch
from toolscore.storage.migrate import upgrade
from toolscore.storage.plumbing.dialect import json_text
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.records import LogRecordData, SpanEvent, SpanLink, SpanRecord
from toolscore.storage.telemetry.row_encode import log_row
from toolscore.storage.telemetry.spans import load_logs, load_spans, spans_table


def _span(trace: int, span: int, **kw: object) -> SpanRecord:
    return SpanRecord(
        trace_id=f"{trace:032x}",
        span_id=f"{span:016x}",
        parent_span_id=None,
        name=f"span {span}",
        kind=1,
        start_ns=1_700_000_000_000_000_000 + span,
        end_ns=1_700_000_000_000_000_999 + span,
        **kw,  # type: ignore[arg-type]
    )


class RecordingHook:
    def __init__(self, fail_times: int = 0) -> None:
        self.calls: list[tuple[int, int, int]] = []
        self.fail_times = fail_times

    def on_batch(self, conn: Connection, batch: StoredBatch) -> None:
        # runs inside the transaction: the batch's rows are visible to it
        stored = conn.execute(select(func.count()).select_from(spans_table)).scalar_one()
        self.calls.append((len(batch.spans), len(batch.logs), stored))
        if self.fail_times:
            self.fail_times -= 1
            raise RuntimeError("injected failure before commit")


def _count(url: str) -> int:
    engine = create_engine(url)
    with engine.connect() as conn:
        n = conn.execute(select(func.count()).select_from(spans_table)).scalar_one()
    engine.dispose()
    return int(n)


async def _with_writer(url: str, body, config: IngestConfig | None = None, hooks=()):  # type: ignore[no-untyped-def]
    upgrade(url)
    engine = create_engine(url)
    writer = IngestWriter(engine, config or IngestConfig(), hooks=hooks)
    await writer.start()
    try:
        return await body(writer)
    finally:
        await writer.stop()
        engine.dispose()


def test_round_trip_preserves_every_value(db_url: str) -> None:
    attrs = {
        "s": "text\x00with nul",
        "b": False,
        "i": 2**63 - 1,
        "d": 1.5,
        "nan": math.inf,
        "raw": b"\x00\x01",
        "arr": [1, "two", [3.0], {"k": b"v"}],
        "kv": {"nested": {"deep": None}},
    }
    span = _span(
        1,
        2,
        attributes=attrs,
        resource_attributes={"service.name": "agent"},
        scope_name="scope",
        scope_version="9",
        status_code=2,
        status_message="failed",
        events=(SpanEvent("ev", 123, {"x": b"y"}),),
        links=(SpanLink("ab" * 16, "cd" * 8, {"l": 1}),),
    )
    record = LogRecordData(
        time_ns=5,
        observed_time_ns=6,
        trace_id=span.trace_id,
        span_id=span.span_id,
        severity_number=9,
        severity_text="INFO",
        event_name="gen_ai.choice",
        body={"message": {"content": "hi"}, "raw": b"\xff"},
        attributes={"a": 1},
    )

    async def body(writer: IngestWriter) -> None:
        await writer.submit([span], [record])

    asyncio.run(_with_writer(db_url, body))
    engine = create_engine(db_url)
    with engine.connect() as conn:
        (loaded,) = load_spans(conn, [span.trace_id])
        (loaded_log,) = load_logs(conn, [span.trace_id])
    engine.dispose()
    assert loaded == span
    assert loaded.attributes["i"] == 2**63 - 1 and type(loaded.attributes["b"]) is bool
    assert loaded_log == record


def test_long_strings_are_stored_as_pieces_and_load_as_received(db_url: str) -> None:
    history = '[{"role":"user","content":"Weather in Paris? é 東京"}]' * 40
    span = _span(
        3,
        4,
        attributes={
            "gen_ai.input.messages": history,
            "with nul": "a\x00" * 400,
            "arr": [history, "short"],
            "kv": {"deep": {"history": history}},
            "gen_ai.conversation.id": "conv-1",
        },
        events=(SpanEvent("gen_ai.choice", 7, {"content": history}),),
    )
    record = LogRecordData(
        time_ns=5, observed_time_ns=6, trace_id=span.trace_id, span_id=span.span_id,
        severity_number=9, severity_text="INFO", event_name="gen_ai.user.message",
        body={"content": history}, attributes={"history": history},
    )  # fmt: skip

    async def body(writer: IngestWriter) -> None:
        await writer.submit([span], [record])

    asyncio.run(_with_writer(db_url, body))
    engine = create_engine(db_url)
    with engine.connect() as conn:
        (loaded,) = load_spans(conn, [span.trace_id])
        (loaded_log,) = load_logs(conn, [span.trace_id])
        stored = conn.execute(
            select(json_text(spans_table.c.attributes), json_text(spans_table.c.events))
        ).one()
    engine.dispose()
    assert loaded == span
    assert loaded_log == record
    assert '"conv-1"' in stored[0]  # short values stay readable by SQL
    # the span's histories are references to pieces stored once (storage/telemetry/contents.py)
    assert "Paris" not in stored[0] and "Paris" not in stored[1]
    assert '"$zrefs"' in stored[0] and len(stored[0]) < len(history)


def test_a_log_record_has_one_hash_packed_or_not() -> None:
    history = "a long message history " * 40
    record = LogRecordData(
        time_ns=5, observed_time_ns=6, trace_id=None, span_id=None, severity_number=9,
        severity_text="INFO", event_name="gen_ai.user.message", body={"content": history},
        attributes={"history": history},
    )  # fmt: skip
    plain, packed = log_row(record, 1), log_row(record, 1, compress=True)
    assert packed["body"] != plain["body"] and packed["attributes"] != plain["attributes"]
    # a record stored before packing, or by another database, is not stored twice when resent
    assert packed["record_hash"] == plain["record_hash"]


def test_concurrent_requests_share_transactions_and_duplicates_are_ignored(db_url: str) -> None:
    hook = RecordingHook()

    async def body(writer: IngestWriter) -> None:
        requests = [[_span(t, t * 100 + i) for i in range(50)] for t in range(40)]
        await asyncio.gather(*(writer.submit(r) for r in requests))
        await asyncio.gather(*(writer.submit(r) for r in requests[:10]))  # a resend

    asyncio.run(_with_writer(db_url, body, hooks=[hook]))
    assert _count(db_url) == 2000
    assert sum(c[0] for c in hook.calls) == 2500  # hooks see resends too (must be idempotent)
    assert len(hook.calls) < 40 + 10  # group commit: fewer transactions than requests


def test_a_batch_mixing_stored_and_new_spans_stores_the_new_ones_once(db_url: str) -> None:
    # PostgreSQL copies straight into the table and falls back to a staging table on a
    # duplicate key: the batch's new spans must survive that fallback, in the same transaction.
    hook = RecordingHook()
    first = [_span(1, i) for i in range(1, 101)]
    mixed = [_span(1, i) for i in range(51, 151)] + [_span(2, i) for i in range(1, 51)]

    async def body(writer: IngestWriter) -> None:
        await writer.submit(first)
        await writer.submit(mixed)
        await writer.submit(mixed)

    asyncio.run(_with_writer(db_url, body, hooks=[hook]))
    assert _count(db_url) == 200
    assert [c[2] for c in hook.calls] == [100, 200, 200]  # rows visible to hooks each time
    engine = create_engine(db_url)
    with engine.connect() as conn:
        stored = load_spans(conn, [f"{2:032x}"])
    engine.dispose()
    assert stored == sorted(mixed[100:], key=lambda s: (s.start_ns, s.span_id))


def test_failed_transaction_acknowledges_nothing_and_a_retry_stores_once(db_url: str) -> None:
    hook = RecordingHook(fail_times=1)
    spans = [_span(7, i) for i in range(1, 11)]

    async def body(writer: IngestWriter) -> None:
        with pytest.raises(StorageUnavailable) as info:
            await writer.submit(spans)
        assert info.value.retry_after_s > 0
        assert _count(db_url) == 0  # rolled back, although the insert had run
        await writer.submit(spans)  # the client's retry
        await writer.submit(spans)

    asyncio.run(_with_writer(db_url, body, hooks=[hook]))
    assert hook.calls[0] == (10, 0, 10)  # the failing hook saw the rows inside the transaction
    assert _count(db_url) == 10


def test_queue_bound_refuses_with_a_retryable_error(sqlite_url: str) -> None:
    config = IngestConfig(max_queued_items=100, retry_after_s=0.5)

    class SlowHook:
        def on_batch(self, conn: Connection, batch: object) -> None:
            import time

            time.sleep(0.3)

    async def body(writer: IngestWriter) -> None:
        first = asyncio.create_task(writer.submit([_span(1, i) for i in range(1, 81)]))
        await asyncio.sleep(0.05)  # first batch is committing, still counted as queued
        with pytest.raises(QueueFull) as info:
            await writer.submit([_span(2, i) for i in range(1, 31)])
        assert info.value.retry_after_s == 0.5
        await first
        await writer.submit([_span(2, i) for i in range(1, 31)])  # room again

    asyncio.run(_with_writer(sqlite_url, body, config, hooks=[SlowHook()]))
    assert _count(sqlite_url) == 110


def test_stop_drains_queued_requests_then_refuses(sqlite_url: str) -> None:
    upgrade(sqlite_url)
    engine = create_engine(sqlite_url)

    async def main() -> None:
        writer = IngestWriter(engine)
        await writer.start()
        pending = [asyncio.create_task(writer.submit([_span(3, i)])) for i in range(1, 21)]
        await asyncio.sleep(0)
        await writer.stop()
        await asyncio.gather(*pending)  # every queued request was committed, none failed
        with pytest.raises(ShuttingDown):
            await writer.submit([_span(4, 1)])

    asyncio.run(main())
    engine.dispose()
    assert _count(sqlite_url) == 20
