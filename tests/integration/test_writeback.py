"""Write-back end to end: agent → OTLP → ``toolscore serve`` (pipeline + export) → a real OTLP sink.

The sink is a gRPC TraceService + LogsService on an ephemeral port. It must receive, per
evaluation, one span in the agent's trace parented to the agent's root span and one
``gen_ai.evaluation.result`` log record; after an outage everything arrives, once.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import select

import toolscore
from tests.collector.export.sink import GrpcSink, attrs
from tests.collector.pipeline.e2e import (
    genai_agent_trace,
    import_refs,
    otlp_provider,
    wait_scored,
)
from tests.integration.serve_harness import RunningServer, count_rows, server_settings
from toolscore.collector.export.attributes import metric_config_hash
from toolscore.collector.export.extension import export_extension
from toolscore.collector.export.settings import resolve_export_settings
from toolscore.collector.pipeline.extension import pipeline_extension
from toolscore.collector.pipeline.options import PipelineOptions
from toolscore.storage.conversations.tables import evaluations
from toolscore.storage.expectations.repository import ExpectationData
from toolscore.storage.plumbing.engine import create_engine

WEATHER = {"name": "get_weather", "args": {"city": "Paris"}}
TIME = {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}}


def _server(db_url: str, endpoint: str, **pacing: float) -> RunningServer:
    settings = resolve_export_settings(
        endpoint=endpoint,
        protocol="grpc",
        timeout_s=pacing.pop("timeout_s", 2.0),
        environ={},
        poll_interval_s=0.2,
        **pacing,  # type: ignore[arg-type]
    )
    assert settings is not None
    pipeline = pipeline_extension(PipelineOptions(settle_s=1.0, root_idle_s=0.3))
    return RunningServer(
        server_settings(db_url), [pipeline, export_extension(settings, {"tool_call_f1": 0.5})]
    )


def _send(srv: RunningServer, conv_ids: list[str]) -> dict[str, ReadableSpan]:
    """One agent trace per conversation; returns each conversation's root span as sent."""
    provider = otlp_provider(srv, grpc=True)
    local = InMemorySpanExporter()  # a copy of what was sent, to learn the root span ids
    provider.add_span_processor(SimpleSpanProcessor(local))
    for conv in conv_ids:
        genai_agent_trace(
            provider.get_tracer("app"),
            conv,
            [WEATHER, TIME],
            "weather?",
            {"toolscore.reference.id": "w"},
        )
    provider.force_flush()
    provider.shutdown()
    roots = {}
    for span in local.get_finished_spans():
        if span.parent is None:
            assert span.attributes is not None
            roots[str(span.attributes["gen_ai.conversation.id"])] = span
    return roots


def _wait(predicate: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _evaluations(db_url: str) -> list[dict[str, Any]]:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            return [dict(r) for r in conn.execute(select(evaluations)).mappings()]
    finally:
        engine.dispose()


def test_running_server_writes_evaluations_back_into_the_agents_trace(db_url: str) -> None:
    import_refs(db_url, ExpectationData(id="w", reference_tool_calls=[WEATHER]))
    sink = GrpcSink().start()
    try:
        with _server(db_url, sink.endpoint) as srv:
            roots = _send(srv, ["wb-1", "wb-2"])
            wait_scored(db_url, roots)
            rows = _evaluations(db_url)
            _wait(
                lambda: (
                    len(sink.received.spans()) >= len(rows)
                    and len(sink.received.log_records()) >= len(rows)
                )
            )
    finally:
        sink.stop()
    assert len(rows) == 4  # 2 conversations x 2 default metrics
    spans = {
        attrs(s.attributes)["toolscore.evaluation.id"]: (res, scope, s)
        for res, scope, s in sink.received.spans()
    }
    logs = {
        attrs(r.attributes)["toolscore.evaluation.id"]: r
        for _res, _s, r in sink.received.log_records()
    }
    assert set(spans) == set(logs) == {r["id"] for r in rows}
    for row in rows:
        root = roots[row["conversation_id"]]
        assert root.context is not None
        res, scope, span = spans[row["id"]]
        assert span.trace_id == root.context.trace_id.to_bytes(16, "big")
        assert span.parent_span_id == root.context.span_id.to_bytes(8, "big")
        assert span.name == f"evaluation {row['metric']}"
        assert (res["service.name"], scope) == ("toolscore", "toolscore")
        a = attrs(span.attributes)
        assert a["gen_ai.evaluation.name"] == row["metric"]
        assert a["gen_ai.evaluation.score.value"] == row["score"]
        threshold = 0.5 if row["metric"] == "tool_call_f1" else 1.0
        assert a["gen_ai.evaluation.score.label"] == (
            "pass" if row["score"] >= threshold else "fail"
        )
        assert a["toolscore.conversation.id"] == row["conversation_id"]
        assert (a["toolscore.expectation.id"], a["toolscore.expectation.version"]) == ("w", 1)
        assert (
            a["toolscore.tool_calls.predicted_count"],
            a["toolscore.tool_calls.expected_count"],
        ) == (2, 1)
        assert a["gen_ai.evaluation.explanation"]
        assert a["gen_ai.evaluation.evaluator.id"] == f"toolscore.{row['metric_type']}"
        assert a["gen_ai.evaluation.evaluator.version"] == toolscore.__version__
        assert a["gen_ai.evaluation.evaluator.type"] == "deterministic"
        assert a["toolscore.metric.config_hash"] == metric_config_hash(
            row["metric_type"], row["metric_config"]
        )
        assert (
            a["gen_ai.evaluation.reference_set.id"],
            a["gen_ai.evaluation.reference_set.version"],
        ) == ("w", "1")
        record = logs[row["id"]]
        assert record.event_name == "gen_ai.evaluation.result"
        assert record.trace_id == span.trace_id
        assert record.span_id == root.context.span_id.to_bytes(8, "big")
        # the span alone is marked for OpenInference readers; the event carries the rest as is
        assert a.pop("openinference.span.kind") == "EVALUATOR"
        assert attrs(record.attributes) == a


def test_sink_down_for_a_while_then_up_receives_everything_once(sqlite_url: str) -> None:
    import_refs(sqlite_url, ExpectationData(id="w", reference_tool_calls=[WEATHER]))
    sink = GrpcSink().start()
    port = sink.port
    sink.stop()  # down before the first evaluation exists
    with _server(
        sqlite_url,
        f"http://127.0.0.1:{port}",
        timeout_s=0.5,
        initial_backoff_s=0.3,
        max_backoff_s=1.0,
    ) as srv:
        roots = _send(srv, ["out-1", "out-2", "out-3"])
        wait_scored(sqlite_url, roots)
        time.sleep(2.0)  # several failed attempts while the sink is down
        engine = create_engine(sqlite_url)
        try:
            with engine.connect() as conn:
                from toolscore.storage.history.outbox import counts

                during = counts(conn)
        finally:
            engine.dispose()
        assert during.pending == 6 and during.failing == 6 and during.exported == 0
        sink.port = port
        sink.start()
        _wait(lambda: len(sink.received.log_records()) >= 6 and len(sink.received.spans()) >= 6)
        time.sleep(1.5)  # would a duplicate still come?
    sink.stop()
    ids = sorted(r["id"] for r in _evaluations(sqlite_url))
    assert (
        sorted(
            attrs(s.attributes)["toolscore.evaluation.id"] for _a, _b, s in sink.received.spans()
        )
        == ids
    )
    assert (
        sorted(
            attrs(r.attributes)["toolscore.evaluation.id"]
            for _a, _b, r in sink.received.log_records()
        )
        == ids
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_evaluations_looped_back_into_toolscore_cause_no_feedback_loop(sqlite_url: str) -> None:
    """A Collector that sends everything (our evaluations too) back to toolscore: here the
    write-back targets toolscore's own OTLP port. Nothing is stored or rescored because of it."""
    import dataclasses

    from toolscore.collector.settings import Listen

    import_refs(sqlite_url, ExpectationData(id="w", reference_tool_calls=[WEATHER]))
    port = _free_port()
    srv = _server(sqlite_url, f"http://127.0.0.1:{port}")
    srv.settings = dataclasses.replace(srv.settings, grpc=Listen("127.0.0.1", port))
    srv.app.settings = srv.settings
    with srv:
        roots = _send(srv, ["loop-1"])
        wait_scored(sqlite_url, roots)
        spans_before = count_rows(sqlite_url)
        engine = create_engine(sqlite_url)
        try:
            from toolscore.storage.history.outbox import counts

            def exported() -> bool:
                with engine.connect() as conn:
                    return counts(conn).exported == 2

            _wait(exported)
        finally:
            engine.dispose()
        time.sleep(2.0)  # settle time + root idle: a rescoring would have happened by now
        rows = wait_scored(sqlite_url, roots)
    assert rows["loop-1"]["revision"] == 1
    assert count_rows(sqlite_url) == spans_before
    assert len(_evaluations(sqlite_url)) == 2
