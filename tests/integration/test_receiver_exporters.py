"""Real OTel SDK exporters (gRPC and HTTP, compressed or not) against a real server and DB."""

from __future__ import annotations

import grpc
import pytest
from opentelemetry._logs import SeverityNumber
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
from opentelemetry.sdk.trace.export import SpanExportResult

from tests.integration.serve_harness import (
    RunningServer,
    agent_spans,
    count_logs,
    count_rows,
    server_settings,
)
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.telemetry.spans import load_logs, load_spans


def _exporter(kind: str, srv: RunningServer):  # type: ignore[no-untyped-def]
    if kind == "grpc":
        return GrpcSpanExporter(endpoint=srv.grpc_target, insecure=True)
    if kind == "grpc-gzip":
        return GrpcSpanExporter(
            endpoint=srv.grpc_target, insecure=True, compression=grpc.Compression.Gzip
        )
    compression = {
        "http": HttpCompression.NoCompression,
        "http-gzip": HttpCompression.Gzip,
        "http-deflate": HttpCompression.Deflate,
    }[kind]
    return HttpSpanExporter(endpoint=f"{srv.http_url}/v1/traces", compression=compression)


@pytest.mark.parametrize("kind", ["grpc", "grpc-gzip", "http", "http-gzip", "http-deflate"])
def test_sdk_span_exporter_spans_are_stored_exactly(db_url: str, kind: str) -> None:
    sent = agent_spans(tools=7)
    with RunningServer(server_settings(db_url)) as srv:
        exporter = _exporter(kind, srv)
        assert exporter.export(sent) == SpanExportResult.SUCCESS
        exporter.shutdown()

    trace_id = f"{sent[0].context.trace_id:032x}"
    engine = create_engine(db_url)
    with engine.connect() as conn:
        stored = {s.span_id: s for s in load_spans(conn, [trace_id])}
    engine.dispose()
    assert len(stored) == len(sent) == 7
    for span in sent:
        row = stored[f"{span.context.span_id:016x}"]
        assert row.name == span.name
        assert row.start_ns == span.start_time and row.end_ns == span.end_time
        assert row.kind == span.kind.value + 1  # SDK enum is 0-based, OTLP's 1-based
        expected_parent = f"{span.parent.span_id:016x}" if span.parent else None
        assert row.parent_span_id == expected_parent
        expected = {k: list(v) if isinstance(v, tuple) else v for k, v in span.attributes.items()}
        assert row.attributes == expected
        assert row.resource_attributes["service.name"] == "weather-agent"
        assert (row.scope_name, row.scope_version) == ("test.agent", "1.0")


def test_resending_a_batch_stores_it_once(db_url: str) -> None:
    sent = agent_spans(tools=5)
    with RunningServer(server_settings(db_url)) as srv:
        grpc_exp = GrpcSpanExporter(endpoint=srv.grpc_target, insecure=True)
        http_exp = HttpSpanExporter(endpoint=f"{srv.http_url}/v1/traces")
        for exporter in (grpc_exp, grpc_exp, http_exp):
            assert exporter.export(sent) == SpanExportResult.SUCCESS
    assert count_rows(db_url) == 5


@pytest.mark.parametrize("transport", ["grpc", "http"])
def test_sdk_log_exporter_records_are_stored_with_trace_context(
    db_url: str, transport: str
) -> None:
    sent = agent_spans(tools=3)
    ctx = sent[0].context
    with RunningServer(server_settings(db_url)) as srv:
        exporter = (
            GrpcLogExporter(endpoint=srv.grpc_target, insecure=True)
            if transport == "grpc"
            else HttpLogExporter(endpoint=f"{srv.http_url}/v1/logs")
        )
        provider = LoggerProvider()
        provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
        logger = provider.get_logger("genai.events")
        from opentelemetry._logs import LogRecord

        logger.emit(
            LogRecord(
                timestamp=1_700_000_000_000_000_001,
                trace_id=ctx.trace_id,
                span_id=ctx.span_id,
                trace_flags=ctx.trace_flags,
                severity_number=SeverityNumber.INFO,
                body={"content": "What is the weather?", "role": "user"},
                attributes={"event.name": "gen_ai.user.message"},
            )
        )
        provider.shutdown()
    assert count_logs(db_url) == 1
    engine = create_engine(db_url)
    with engine.connect() as conn:
        (record,) = load_logs(conn, [f"{ctx.trace_id:032x}"])
    engine.dispose()
    assert record.span_id == f"{ctx.span_id:016x}"
    assert record.event_name == "gen_ai.user.message"
    assert record.body == {"content": "What is the weather?", "role": "user"}
    assert record.time_ns == 1_700_000_000_000_000_001
    assert record.severity_number == SeverityNumber.INFO.value
