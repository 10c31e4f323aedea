"""Evaluations as OpenTelemetry spans and ``gen_ai.evaluation.result`` log records, sent by OTLP.

Built with the OpenTelemetry SDK (TracerProvider / LoggerProvider) and exported by calling the
SDK's OTLP exporters' ``export()`` directly: its result tells us whether the sink acknowledged
the batch, which the outbox needs (a ``BatchSpanProcessor`` drops on failure and cannot tell).

Each evaluation span is a child of the conversation's root span (a non-recording parent carrying
the trace id and ``root_span_id``), placed at the root span's end with no duration so that a
backend deriving a trace's latency from its spans (Phoenix) shows the agent's own; it is marked
``openinference.span.kind=EVALUATOR`` and its resource carries the evaluated trace's
``openinference.project.name``, so a backend that files traces by project keeps the trace where the
agent's spans put it. Its span id hashes the database's instance id with the evaluation id: a
resend after a lost acknowledgement carries the same id, another database never does.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from opentelemetry import trace as trace_api
from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.sdk._logs import (
    LoggerProvider,
    LogRecordProcessor,
    ReadableLogRecord,
    ReadWriteLogRecord,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import NonRecordingSpan, SpanContext, SpanKind, TraceFlags

from toolscore.collector.export.attributes import (
    ATTR_MARKER,
    EVALUATION_EVENT_NAME,
    TOOLSCORE_SCOPE_NAME,
    TOOLSCORE_SERVICE_NAME,
    evaluation_attributes,
    provenance_attributes,
    span_name,
    threshold_for,
)
from toolscore.collector.export.settings import PROTOCOL_GRPC, ExportSettings
from toolscore.storage.history.outbox import ExportItem


class SpanSink(Protocol):
    """What we need of an SDK span exporter."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult: ...
    def shutdown(self) -> None: ...


class LogSink(Protocol):
    """What we need of an SDK log record exporter (its result enum has a ``SUCCESS`` member)."""

    def export(self, batch: Sequence[ReadableLogRecord]) -> Any: ...
    def shutdown(self) -> None: ...


@dataclass(frozen=True, slots=True)
class EmitResult:
    ok: bool
    error: str | None = None


# OpenInference: what Phoenix and other OpenInference readers look at.
ATTR_SPAN_KIND = "openinference.span.kind"
SPAN_KIND_EVALUATOR = "EVALUATOR"
ATTR_PROJECT_NAME = "openinference.project.name"


def evaluation_span_id(instance_id: str, evaluation_id: int) -> int:
    """A stable, non-zero 64-bit span id for an evaluation row of the database ``instance_id``."""
    key = f"toolscore.evaluation:{instance_id}:{evaluation_id}"
    digest = hashlib.sha256(key.encode()).digest()
    return int.from_bytes(digest[:8], "big") or 1


class _NextIds(IdGenerator):
    """Hands out the ids we chose for the span being started (thread-local), random otherwise."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._random = RandomIdGenerator()

    def set(self, trace_id: int, span_id: int) -> None:
        self._local.ids = (trace_id, span_id)

    def clear(self) -> None:
        self._local.ids = None

    def generate_span_id(self) -> int:
        ids = getattr(self._local, "ids", None)
        return ids[1] if ids else self._random.generate_span_id()

    def generate_trace_id(self) -> int:
        ids = getattr(self._local, "ids", None)
        return ids[0] if ids else self._random.generate_trace_id()


class _CollectSpans(SpanProcessor):
    def __init__(self) -> None:
        self._local = threading.local()

    def take(self) -> list[ReadableSpan]:
        spans: list[ReadableSpan] = getattr(self._local, "spans", [])
        self._local.spans = []
        return spans

    def on_end(self, span: ReadableSpan) -> None:
        if not hasattr(self._local, "spans"):
            self._local.spans = []
        self._local.spans.append(span)


class _CollectLogs(LogRecordProcessor):
    def __init__(self) -> None:
        self._local = threading.local()

    def take(self) -> list[ReadableLogRecord]:
        records: list[ReadableLogRecord] = getattr(self._local, "records", [])
        self._local.records = []
        return records

    def on_emit(self, log_record: ReadWriteLogRecord) -> None:
        if not hasattr(self._local, "records"):
            self._local.records = []
        self._local.records.append(
            ReadableLogRecord(
                log_record=log_record.log_record,
                resource=log_record.resource or Resource.create({}),
                instrumentation_scope=log_record.instrumentation_scope,
                limits=log_record.limits,
            )
        )

    def shutdown(self) -> None:
        return None

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


def _int_id(hex_id: str | None, bits: int) -> int | None:
    if not hex_id:
        return None
    try:
        value = int(hex_id, 16)
    except ValueError:
        return None
    return value if 0 < value < (1 << bits) else None


def build_resource(version: str) -> Resource:
    return Resource.create(
        {"service.name": TOOLSCORE_SERVICE_NAME, "service.version": version, ATTR_MARKER: True}
    )


class EvaluationEmitter:
    """Turns outbox items into SDK spans/log records and exports them, reporting the outcome."""

    def __init__(
        self,
        span_exporter: SpanSink,
        log_exporter: LogSink,
        *,
        version: str = "0",
        thresholds: Mapping[str, float] | None = None,
        instance_id: str = "",
    ) -> None:
        self._span_exporter = span_exporter
        self._log_exporter = log_exporter
        self.thresholds: Mapping[str, float] = dict(thresholds or {})
        self.instance_id = instance_id  # the database's (export_pass sets it before sending)
        self._version = version
        resource = build_resource(version)
        self._ids = _NextIds()
        self._spans = _CollectSpans()
        # one provider per project name of the evaluated traces (a resource attribute)
        self._tracer_providers: dict[str | None, TracerProvider] = {}
        self._logs = _CollectLogs()
        self._logger_provider = LoggerProvider(resource=resource)
        self._logger_provider.add_log_record_processor(self._logs)
        self._logger = self._logger_provider.get_logger(TOOLSCORE_SCOPE_NAME, version)

    def _attributes(self, item: ExportItem) -> dict[str, Any]:
        attrs = evaluation_attributes(
            evaluation_id=item.evaluation_id,
            metric=item.metric,
            metric_type=item.metric_type,
            score=item.score,
            error=item.error,
            details=item.details,
            threshold=threshold_for(item.metric, item.metric_type, self.thresholds),
            conversation_id=item.conversation_id,
            revision=item.revision,
            expectation_id=item.expectation_id,
            expectation_version=item.expectation_version,
            predicted_count=item.predicted_count,
            expected_count=item.expected_count,
        )
        attrs.update(
            provenance_attributes(
                metric_type=item.metric_type,
                metric_config=item.metric_config,
                expectation_id=item.expectation_id,
                version=item.expectation_version,
            )
        )
        return attrs

    def _tracer(self, project: str | None) -> trace_api.Tracer:
        provider = self._tracer_providers.get(project)
        if provider is None:
            resource = build_resource(self._version)
            if project:
                resource = resource.merge(Resource({ATTR_PROJECT_NAME: project}))
            provider = TracerProvider(resource=resource, id_generator=self._ids, sampler=ALWAYS_ON)
            provider.add_span_processor(self._spans)
            self._tracer_providers[project] = provider
        return provider.get_tracer(TOOLSCORE_SCOPE_NAME, self._version)

    def span_id(self, item: ExportItem) -> int:
        return evaluation_span_id(self.instance_id, item.evaluation_id)

    def build_spans(self, items: Sequence[ExportItem]) -> list[ReadableSpan]:
        """The evaluation spans of ``items`` (ended, not yet exported)."""
        self._spans.take()
        for item in items:
            trace_id = _int_id(item.trace_id, 128)
            if trace_id is None:
                continue  # no valid trace to attach to; the log record still carries the result
            root = _int_id(item.root_span_id, 64)
            self._ids.set(trace_id, self.span_id(item))
            context = None
            if root is not None:
                parent = SpanContext(trace_id, root, is_remote=True, trace_flags=TraceFlags(1))
                context = trace_api.set_span_in_context(NonRecordingSpan(parent))
            # at the evaluated root's end: inside the trace's time range, not stretching it
            when = item.bounds_ns[1] if item.bounds_ns else _ns(item)
            project = (item.resource or {}).get(ATTR_PROJECT_NAME)
            span = self._tracer(project if isinstance(project, str) else None).start_span(
                span_name(item.metric),
                context=context,
                kind=SpanKind.INTERNAL,
                attributes={**self._attributes(item), ATTR_SPAN_KIND: SPAN_KIND_EVALUATOR},
                start_time=when,
            )
            span.end(end_time=when)
        self._ids.clear()
        return self._spans.take()

    def build_logs(self, items: Sequence[ExportItem]) -> list[ReadableLogRecord]:
        """The ``gen_ai.evaluation.result`` log records of ``items``."""
        self._logs.take()
        now = time.time_ns()
        for item in items:
            trace_id = _int_id(item.trace_id, 128)
            span_id = _int_id(item.root_span_id, 64)
            if trace_id is not None and span_id is None:
                span_id = self.span_id(item)  # our span is in that trace
            context = None
            if trace_id is not None and span_id is not None:
                parent = SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(1))
                context = trace_api.set_span_in_context(NonRecordingSpan(parent))
            self._logger.emit(
                LogRecord(
                    timestamp=_ns(item),
                    observed_timestamp=now,
                    context=context,
                    severity_number=SeverityNumber.INFO,
                    severity_text="INFO",
                    attributes=self._attributes(item),
                    event_name=EVALUATION_EVENT_NAME,
                )
            )
        return self._logs.take()

    def export_spans(self, items: Sequence[ExportItem]) -> EmitResult:
        spans = self.build_spans(items)
        if not spans:
            return EmitResult(True)
        try:
            result = self._span_exporter.export(spans)
        except Exception as exc:  # an exporter bug must not kill the worker
            return EmitResult(False, f"span export raised {type(exc).__name__}: {exc}")
        if result == SpanExportResult.SUCCESS:
            return EmitResult(True)
        return EmitResult(False, "span export failed (sink unreachable or rejected the batch)")

    def export_logs(self, items: Sequence[ExportItem]) -> EmitResult:
        records = self.build_logs(items)
        if not records:
            return EmitResult(True)
        try:
            result = self._log_exporter.export(records)
        except Exception as exc:
            return EmitResult(False, f"log export raised {type(exc).__name__}: {exc}")
        if getattr(result, "name", None) == "SUCCESS":
            return EmitResult(True)
        return EmitResult(False, "log export failed (sink unreachable or rejected the batch)")

    def shutdown(self) -> None:
        for exporter in (self._span_exporter, self._log_exporter):
            with contextlib.suppress(Exception):  # best effort at exit
                exporter.shutdown()
        for provider in self._tracer_providers.values():
            provider.shutdown()
        self._logger_provider.shutdown()


def _ns(item: ExportItem) -> int:
    return int(item.created_at.timestamp() * 1_000_000_000)


class _Unused:
    """The exporter of a signal that is not sent (``--export-signals``): never called."""

    def export(self, batch: Sequence[Any]) -> Any:
        raise RuntimeError("this signal is not exported")

    def shutdown(self) -> None:
        return None


def create_exporters(settings: ExportSettings) -> tuple[SpanSink, LogSink]:
    """The SDK's OTLP span and log exporters for ``settings`` (grpc or http/protobuf per signal)."""
    sinks: dict[str, Any] = {}
    for signal in ("traces", "logs"):
        if signal not in settings.signals:
            sinks[signal] = _Unused()
        elif settings.protocol_of(signal) == PROTOCOL_GRPC:
            sinks[signal] = _grpc_exporter(settings, signal)
        else:
            sinks[signal] = _http_exporter(settings, signal)
    return sinks["traces"], sinks["logs"]


def _headers(settings: ExportSettings, signal: str) -> tuple[tuple[str, str], ...]:
    return settings.logs_headers if signal == "logs" else settings.headers


def _grpc_exporter(settings: ExportSettings, signal: str) -> Any:
    import grpc
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import (
        OTLPLogExporter as GrpcLogExporter,
    )
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
        OTLPSpanExporter as GrpcSpanExporter,
    )

    compression = (
        grpc.Compression.Gzip if settings.compression == "gzip" else grpc.Compression.NoCompression
    )
    credentials = None
    if settings.certificate_file:
        with open(settings.certificate_file, "rb") as f:
            credentials = grpc.ssl_channel_credentials(f.read())
    exporter = GrpcLogExporter if signal == "logs" else GrpcSpanExporter
    return exporter(
        endpoint=settings.endpoint_of(signal),
        insecure=settings.insecure,
        credentials=credentials,
        headers=_headers(settings, signal),
        timeout=settings.timeout_s,
        compression=compression,
    )


def _http_exporter(settings: ExportSettings, signal: str) -> Any:
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http._log_exporter import (
        OTLPLogExporter as HttpLogExporter,
    )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpSpanExporter,
    )

    exporter = HttpLogExporter if signal == "logs" else HttpSpanExporter
    return exporter(
        endpoint=settings.endpoint_of(signal),
        headers=dict(_headers(settings, signal)),
        timeout=settings.timeout_s,
        compression=Compression.Gzip
        if settings.compression == "gzip"
        else Compression.NoCompression,
        certificate_file=settings.certificate_file,
    )
