"""Replay a recording (tests/fixtures/recorded/*.json) over real OTLP to a running server.

The recorded spans and log records become OTel SDK ``ReadableSpan`` / ``ReadableLogRecord``
objects and go through the SDK's standard OTLP exporters (HTTP/protobuf or gRPC), as the
framework's own exporter would have sent them. ``relabel`` copies a recording under another
conversation id with fresh trace and span ids, so one server can receive it twice.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry._logs import LogRecord
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import (
    OTLPLogExporter as GrpcLogExporter,
)
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import ReadableLogRecord
from opentelemetry.sdk._logs.export import LogRecordExportResult
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    set_span_in_context,
)

from tests.integration.serve_harness import RunningServer
from toolscore.storage.records import LogRecordData, SpanRecord


def _value(value: Any) -> Any:
    """Recording JSON values → OTel attribute values (bytes were saved as ``__bytes__``)."""
    if isinstance(value, Mapping):
        if set(value) == {"__bytes__"}:
            return base64.b64decode(value["__bytes__"])
        return {str(k): _value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_value(v) for v in value]
    return value


def _attrs(attrs: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _value(v) for k, v in attrs.items() if v is not None}


def _context(trace_id: str, span_id: str) -> SpanContext:
    return SpanContext(int(trace_id, 16), int(span_id, 16), False, TraceFlags(1))


def sdk_span(span: SpanRecord) -> ReadableSpan:
    parent = _context(span.trace_id, span.parent_span_id) if span.parent_span_id else None
    return ReadableSpan(
        name=span.name,
        context=_context(span.trace_id, span.span_id),
        parent=parent,
        resource=Resource(_attrs(span.resource_attributes)),
        attributes=_attrs(span.attributes),
        events=[Event(e.name, _attrs(e.attributes), e.time_ns) for e in span.events],
        kind=SpanKind(max(span.kind - 1, 0)),  # OTLP INTERNAL == 1, SDK INTERNAL == 0
        status=Status(StatusCode(span.status_code)),
        start_time=span.start_ns,
        end_time=span.end_ns,
        instrumentation_scope=InstrumentationScope(span.scope_name, span.scope_version or None),
    )


def sdk_log(log: LogRecordData) -> ReadableLogRecord:
    context = None
    if log.trace_id and log.span_id:  # the SDK takes the span context from a Context
        context = set_span_in_context(NonRecordingSpan(_context(log.trace_id, log.span_id)))
    record = LogRecord(
        timestamp=log.time_ns,
        observed_timestamp=log.observed_time_ns or log.time_ns,
        context=context,
        body=_value(log.body),
        attributes=_attrs(log.attributes),
        event_name=log.event_name or None,
    )
    return ReadableLogRecord(
        record,
        Resource(_attrs(log.resource_attributes)),
        InstrumentationScope(log.scope_name, log.scope_version or None),
    )


def replay(
    srv: RunningServer,
    spans: Sequence[SpanRecord],
    logs: Sequence[LogRecordData] = (),
    *,
    grpc: bool = False,
) -> None:
    """Send the spans, then the log records, through the standard OTLP exporters; every export
    must be acknowledged."""
    span_exporter: Any
    log_exporter: Any
    if grpc:
        span_exporter = GrpcSpanExporter(endpoint=srv.grpc_target, insecure=True)
        log_exporter = GrpcLogExporter(endpoint=srv.grpc_target, insecure=True)
    else:
        span_exporter = OTLPSpanExporter(endpoint=f"{srv.http_url}/v1/traces")
        log_exporter = OTLPLogExporter(endpoint=f"{srv.http_url}/v1/logs")
    try:
        assert span_exporter.export([sdk_span(s) for s in spans]) == SpanExportResult.SUCCESS
        if logs:
            result = log_exporter.export([sdk_log(log) for log in logs])
            assert result == LogRecordExportResult.SUCCESS
    finally:
        span_exporter.shutdown()
        log_exporter.shutdown()


def _fresh(old: str, salt: str) -> str:
    return hashlib.sha256(f"{salt}:{old}".encode()).hexdigest()[: len(old)]


def relabel(
    spans: Sequence[SpanRecord], logs: Sequence[LogRecordData], old: str, new: str
) -> tuple[list[SpanRecord], list[LogRecordData]]:
    """A copy of the recording as conversation ``new``: attribute values equal to ``old`` are
    replaced, and trace and span ids are derived afresh from ``new``."""

    def ident(value: str | None) -> str | None:
        return _fresh(value, new) if value else value

    def attrs(values: Mapping[str, Any]) -> dict[str, Any]:
        return {k: new if v == old else v for k, v in values.items()}

    out_spans = [
        dataclasses.replace(
            s,
            trace_id=_fresh(s.trace_id, new),
            span_id=_fresh(s.span_id, new),
            parent_span_id=ident(s.parent_span_id),
            attributes=attrs(s.attributes),
        )
        for s in spans
    ]
    out_logs = [
        dataclasses.replace(
            log,
            trace_id=ident(log.trace_id),
            span_id=ident(log.span_id),
            attributes=attrs(log.attributes),
        )
        for log in logs
    ]
    return out_spans, out_logs
