"""``serve`` with span retention: a real server (OTLP/HTTP from the real OTel SDK, the pipeline
scoring, the retention component pruning) on a SQLite file and on PostgreSQL."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from sqlalchemy import func, select

from tests.collector.pipeline.e2e import genai_agent_trace, import_refs, otlp_provider, wait_scored
from tests.integration.serve_harness import RunningServer, server_settings
from toolscore.collector.cli import main
from toolscore.collector.pipeline.extension import pipeline_extension
from toolscore.collector.pipeline.options import PipelineOptions
from toolscore.collector.retention import RetentionOptions, retention_extension
from toolscore.storage.engine import create_engine
from toolscore.storage.expectations import ExpectationData
from toolscore.storage.pipeline import conversation_traces, tool_calls
from toolscore.storage.telemetry import spans_table

WEATHER = {"name": "get_weather", "args": {"city": "Paris"}}
TIME = {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}}


def spans_of(db_url: str, conversation_id: str) -> int:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            traces = select(conversation_traces.c.trace_id).where(
                conversation_traces.c.conversation_id == conversation_id
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
        retention_extension(RetentionOptions(retention_s=3.0, interval_s=0.3)),
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
        deadline = time.monotonic() + 4.5
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
