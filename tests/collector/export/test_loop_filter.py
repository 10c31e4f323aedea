"""toolscore's own evaluation spans and log records, looped back by a Collector, are not stored."""

from __future__ import annotations

import asyncio

from sqlalchemy import func, select

from toolscore.collector.ingest.writer import IngestWriter
from toolscore.storage.migrate import upgrade
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.records import LogRecordData, SpanRecord
from toolscore.storage.telemetry.spans import log_records_table, spans_table

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"


def _span(span_id: str, attributes: dict[str, object], scope: str, service: str) -> SpanRecord:
    return SpanRecord(
        trace_id=TRACE,
        span_id=span_id,
        parent_span_id=None,
        name="x",
        kind=1,
        start_ns=1,
        end_ns=2,
        attributes=attributes,
        resource_attributes={"service.name": service},
        scope_name=scope,
    )


def _log(attributes: dict[str, object], scope: str, service: str) -> LogRecordData:
    return LogRecordData(
        time_ns=1,
        observed_time_ns=1,
        trace_id=TRACE,
        span_id="00f067aa0ba902b7",
        severity_number=9,
        severity_text="INFO",
        event_name="gen_ai.evaluation.result",
        body=None,
        attributes=attributes,
        resource_attributes={"service.name": service},
        scope_name=scope,
    )


def test_ingest_drops_looped_back_evaluations_and_keeps_the_rest(sqlite_url: str) -> None:
    upgrade(sqlite_url)
    engine = create_engine(sqlite_url)

    async def go() -> None:
        writer = IngestWriter(engine)
        await writer.start()
        try:
            await writer.submit(
                [
                    _span("00f067aa0ba902b7", {"gen_ai.operation.name": "chat"}, "openai", "agent"),
                    _span("1111111111111111", {"toolscore.evaluation": True}, "toolscore", "x"),
                    _span(
                        "2222222222222222",
                        {"gen_ai.evaluation.name": "a"},
                        "toolscore",
                        "toolscore",
                    ),
                ],
                [
                    _log({"toolscore.evaluation": True}, "renamed", "renamed"),
                    _log({"gen_ai.evaluation.name": "judge"}, "other-evaluator", "agent"),
                ],
            )
            # a request made only of looped-back evaluations is acknowledged, stores nothing
            await writer.submit([_span("3333333333333333", {"toolscore.evaluation": True}, "", "")])
        finally:
            await writer.stop()

    asyncio.run(go())
    with engine.connect() as conn:
        span_ids = set(conn.execute(select(spans_table.c.span_id)).scalars())
        logs = conn.execute(select(func.count()).select_from(log_records_table)).scalar_one()
    engine.dispose()
    assert span_ids == {"00f067aa0ba902b7"}
    assert logs == 1  # another evaluator's result event is the user's data: kept
