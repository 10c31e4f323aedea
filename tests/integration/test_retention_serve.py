"""``serve`` with span retention: a real server (OTLP/HTTP from the real OTel SDK, the pipeline
scoring, the retention component pruning) on a SQLite file and on PostgreSQL."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import pytest
from sqlalchemy import func, select, text

from tests.collector.pipeline.e2e import genai_agent_trace, import_refs, otlp_provider, wait_scored
from tests.integration.serve_harness import RunningServer, server_settings
from toolscore.collector.cli import main
from toolscore.collector.pipeline.extension import pipeline_extension
from toolscore.collector.pipeline.options import PipelineOptions
from toolscore.collector.upkeep.retention_runner import RetentionOptions, retention_extension
from toolscore.storage.conversations.tables import tool_calls
from toolscore.storage.expectations.repository import ExpectationData
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.telemetry.spans import spans_table
from toolscore.storage.telemetry.traces import traces_table

WEATHER = {"name": "get_weather", "args": {"city": "Paris"}}
TIME = {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}}


def spans_of(db_url: str, conversation_id: str) -> int:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            traces = select(traces_table.c.trace_id).where(
                traces_table.c.conversation_id == conversation_id
            )
            query = select(func.count()).where(spans_table.c.trace_id.in_(traces))
            return int(conn.execute(query.select_from(spans_table)).scalar_one())
    finally:
        engine.dispose()


def calls_of(db_url: str, conversation_id: str, revision: int) -> list[str]:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            t = tool_calls.c
            query = (
                select(t.name)
                .where(t.conversation_id == conversation_id, t.revision == revision)
                .order_by(t.position)
            )
            return list(conn.execute(query).scalars())
    finally:
        engine.dispose()


def wait_for(check: Any, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_serve_prunes_scored_conversations_and_keeps_their_history(
    db_url: str, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    import_refs(db_url, ExpectationData(id="w", reference_tool_calls=[WEATHER, TIME]))
    extensions = [
        pipeline_extension(PipelineOptions(settle_s=0.5, root_idle_s=0.3)),
        # 6 s: the new turn below is scored and shown before its own spans are that old, even
        # on a loaded machine (at 3 s a busy CI pruned it too before `show` ran)
        retention_extension(RetentionOptions(retention_s=6.0, interval_s=0.3)),
    ]
    caplog.set_level(logging.INFO, logger="toolscore.retention")
    with RunningServer(server_settings(db_url), extensions) as srv:
        provider = otlp_provider(srv)
        tracer = provider.get_tracer("app")
        ref = {"toolscore.reference.id": "w"}
        genai_agent_trace(tracer, "old", [WEATHER], "Weather in Paris?", ref)
        provider.force_flush()
        wait_scored(db_url, ["old"])
        stored = spans_of(db_url, "old")
        assert stored >= 4
        # a conversation kept busy: its last span is always recent, it is never pruned
        deadline = time.monotonic() + 7.5
        while time.monotonic() < deadline:
            genai_agent_trace(tracer, "busy", [WEATHER], "Weather?", ref)
            provider.force_flush()
            time.sleep(0.5)
        wait_for(lambda: spans_of(db_url, "old") == 0)
        assert spans_of(db_url, "busy") > 0
        registry = srv.app.metrics.registry
        pruned = registry.get_sample_value(
            "toolscore_retention_pruned_rows_total", {"table": "spans"}
        )
        assert pruned == stored
        assert registry.get_sample_value("toolscore_retention_pruned_conversations_total") == 1
        # a new turn of the pruned conversation: a new revision with both turns' calls
        genai_agent_trace(tracer, "old", [TIME], "And the time in Tokyo?", ref)
        provider.force_flush()
        wait_scored(db_url, ["old"], revision=2)
        provider.shutdown()
    assert calls_of(db_url, "old", 2) == ["get_weather", "get_time"]
    lines = [r.getMessage() for r in caplog.records if r.name == "toolscore.retention"]
    assert any(f"deleted {stored} spans" in line for line in lines), lines

    assert main(["show", "old", "--db", db_url]) == 0
    shown = capsys.readouterr().out
    assert "spans pruned" in shown and "messages received after the pruning" in shown
    assert "get_weather" in shown and "get_time" in shown


def test_postgres_partitions_created_and_dropped_while_a_real_server_ingests(
    postgres_url: str,
) -> None:
    """serve creates the coming days' partitions and drops an old day while OTel SDK exporters
    send to it; every span they were told was stored is stored."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tests.collector.upkeep.test_retention import NS, T_OLD, conversation, score_all, store
    from toolscore.storage.telemetry import partitions as parts

    import_refs(postgres_url, ExpectationData(id="w", reference_tool_calls=[WEATHER, TIME]))
    engine = create_engine(postgres_url)
    old_day, today = parts.day_start(T_OLD), parts.day_start(time.time_ns())
    ahead = [parts.partition_name("spans", today + i * parts.DAY_NS) for i in (1, 2, 3)]
    with engine.begin() as conn:
        parts.create_ahead(conn, old_day, days=0)
        for name in ahead:  # the server must create these itself
            conn.execute(text(f"DROP TABLE {name}"))
    shift = old_day - 1_767_225_600 * NS + 3600 * NS
    for i in range(3):
        store(engine, *conversation(f"old{i}", f"a{i}", start_shift_ns=shift), T_OLD)
    score_all(engine, T_OLD + 10 * NS)

    def names() -> set[str]:
        with engine.connect() as conn:
            return {p.name for p in parts.partitions(conn, "spans")}

    assert parts.partition_name("spans", old_day) in names()
    acknowledged: list[str] = []
    stop = threading.Event()

    def export_loop(url: str) -> None:
        exporter = OTLPSpanExporter(endpoint=f"{url}/v1/traces")
        i = 0
        while not stop.is_set():
            memory = InMemorySpanExporter()
            provider = TracerProvider()
            provider.add_span_processor(SimpleSpanProcessor(memory))
            genai_agent_trace(provider.get_tracer("t"), f"live{i}", [WEATHER], "Weather?")
            spans = memory.get_finished_spans()
            if exporter.export(spans) is SpanExportResult.SUCCESS:
                acknowledged.append(format(spans[0].context.trace_id, "032x"))
            i += 1
        exporter.shutdown()

    extensions = [
        pipeline_extension(PipelineOptions(settle_s=0.5, root_idle_s=0.3)),
        retention_extension(RetentionOptions(retention_s=86_400.0, interval_s=0.3)),
    ]
    with RunningServer(server_settings(postgres_url), extensions) as srv:
        load = threading.Thread(target=export_loop, args=(srv.http_url,))
        load.start()
        try:
            wait_for(lambda: parts.partition_name("spans", old_day) not in names())
            wait_for(lambda: set(ahead) <= names())
            time.sleep(0.5)
        finally:
            stop.set()
            load.join(30)
    with engine.connect() as conn:
        stored = set(conn.execute(select(spans_table.c.trace_id).distinct()).scalars())
        live_spans = conn.execute(
            select(func.count())
            .select_from(spans_table)
            .where(spans_table.c.trace_id.in_(acknowledged))
        ).scalar_one()
        old_left = conn.execute(text("SELECT count(*) FROM spans WHERE received_at_ns < :t"),
                                {"t": T_OLD + NS}).scalar_one()  # fmt: skip
    engine.dispose()
    assert len(acknowledged) >= 3
    assert set(acknowledged) <= stored, "every acknowledged span's trace stored"
    assert live_spans == 4 * len(acknowledged), "all 4 spans of each acknowledged trace"
    assert old_left == 0


def test_serve_deletes_old_conversations_with_history_retention(
    db_url: str, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """Span retention 2 s, history retention 3 s: a finished conversation goes from every table
    in the background, its scores stay in the rollup; a busy one stays; a new span of the
    deleted one starts a new conversation."""
    from toolscore.storage.conversations.tables import conversations, evaluations
    from toolscore.storage.retention.rollup import daily_score_rollup

    def count(table: Any, where: Any) -> int:
        engine = create_engine(db_url)
        try:
            with engine.connect() as conn:
                query = select(func.count()).select_from(table).where(where)
                return int(conn.execute(query).scalar_one())
        finally:
            engine.dispose()

    import_refs(db_url, ExpectationData(id="w", reference_tool_calls=[WEATHER, TIME]))
    extensions = [
        pipeline_extension(PipelineOptions(settle_s=0.5, root_idle_s=0.3)),
        retention_extension(RetentionOptions(retention_s=2.0, interval_s=0.3, history_s=3.0)),
    ]
    caplog.set_level(logging.INFO, logger="toolscore.retention")
    with RunningServer(server_settings(db_url), extensions) as srv:
        provider = otlp_provider(srv)
        tracer = provider.get_tracer("app")
        ref = {"toolscore.reference.id": "w"}
        genai_agent_trace(tracer, "old", [WEATHER], "Weather in Paris?", ref)
        provider.force_flush()
        wait_scored(db_url, ["old"])
        assert count(evaluations, evaluations.c.conversation_id == "old") == 2
        deadline = time.monotonic() + 4.5
        while time.monotonic() < deadline:  # kept busy: never deleted
            genai_agent_trace(tracer, "busy", [WEATHER], "Weather?", ref)
            provider.force_flush()
            time.sleep(0.5)
        wait_for(lambda: count(conversations, conversations.c.id == "old") == 0)
        assert count(evaluations, evaluations.c.conversation_id == "old") == 0
        assert count(tool_calls, tool_calls.c.conversation_id == "old") == 0
        assert count(traces_table, traces_table.c.conversation_id == "old") == 0
        assert count(conversations, conversations.c.id == "busy") == 1
        assert count(daily_score_rollup, daily_score_rollup.c.evaluations > 0) >= 1
        registry = srv.app.metrics.registry
        deleted = registry.get_sample_value("toolscore_retention_deleted_conversations_total")
        assert deleted == 1
        genai_agent_trace(tracer, "old", [TIME], "And the time in Tokyo?", ref)
        provider.force_flush()
        wait_scored(db_url, ["old"], revision=1)
        provider.shutdown()
    assert calls_of(db_url, "old", 1) == ["get_time"], "a new conversation: only the new call"
    lines = [r.getMessage() for r in caplog.records if r.name == "toolscore.retention"]
    assert any("history retention: deleted 1 conversations" in line for line in lines), lines
