"""OTLP requests (protobuf or OTLP/JSON) -> SpanRecord / LogRecordData.

Pure functions, no I/O. Invalid items (bad id lengths, all-zero ids, values the database cannot
hold: see collector/otlp/sanitize.py) are rejected one by one with a message while their
neighbours are
kept (OTLP partial success); an undecodable body raises :class:`DecodeError` and nothing of it is
kept. Attribute values over the configured size are truncated, values nested deeper than the
depth limit are cut there (the too-deep part becomes null), and the keys so changed are listed in
the attribute ``toolscore.truncated``. Parsing bodies into messages is collector/otlp/parse.py,
converting attribute values collector/otlp/values.py; this module re-exports what callers use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from toolscore.collector.otlp.parse import (
    DecodeError,
    parse_logs_json,
    parse_logs_protobuf,
    parse_traces_json,
    parse_traces_protobuf,
)
from toolscore.collector.otlp.sanitize import (
    DEFAULT_KEY_ATTRIBUTES,
    DEFAULT_MAX_KEY_BYTES,
    key_problem,
    time_problem,
)
from toolscore.collector.otlp.values import (
    DEFAULT_MAX_VALUE_DEPTH,
    TRUNCATED_ATTRIBUTE,
    Truncation,
    any_value,
    attributes,
)
from toolscore.collector.reconstruction.conversation_keys import expand
from toolscore.storage.records import SPAN_SETTERS, LogRecordData, SpanEvent, SpanLink, SpanRecord

DEFAULT_MAX_ATTRIBUTE_BYTES = 64 * 1024
MAX_REPORTED_ERRORS = 5  # distinct reasons quoted in partial_success.error_message

_ZERO_TRACE = bytes(16)
_ZERO_SPAN = bytes(8)


@dataclass(frozen=True, slots=True)
class DecodeLimits:
    max_attribute_bytes: int = DEFAULT_MAX_ATTRIBUTE_BYTES  # per string/bytes value (UTF-8 bytes)
    max_value_depth: int = DEFAULT_MAX_VALUE_DEPTH  # nested arrays / key-value lists per value
    # Span and resource attributes that name conversations and references (ids): a span whose
    # value holds NUL or is over max_key_bytes is rejected (sanitize.key_problem).
    key_attributes: tuple[str, ...] = DEFAULT_KEY_ATTRIBUTES
    max_key_bytes: int = DEFAULT_MAX_KEY_BYTES


@dataclass(frozen=True, slots=True)
class DecodedTraces:
    spans: tuple[SpanRecord, ...]
    rejected: int  # spans refused (partial success)
    error_message: str  # English summary of why, "" when nothing was rejected
    truncated_values: int  # attribute values shortened to the limit


@dataclass(frozen=True, slots=True)
class DecodedLogs:
    records: tuple[LogRecordData, ...]
    rejected: int
    error_message: str
    truncated_values: int


# --- ids -------------------------------------------------------------------------------------


def _id_problem(raw: bytes, size: int, zero: bytes, what: str) -> str | None:
    if len(raw) != size:
        return f"{what} must be {size} bytes, got {len(raw)}"
    if raw == zero:
        return f"{what} is all zeros"
    return None


class _Rejections:
    __slots__ = ("count", "reasons")

    def __init__(self) -> None:
        self.count = 0
        self.reasons: dict[str, int] = {}

    def add(self, reason: str) -> None:
        self.count += 1
        self.reasons[reason] = self.reasons.get(reason, 0) + 1

    def message(self, noun: str) -> str:
        if not self.count:
            return ""
        parts = [f"{n} × {r}" for r, n in list(self.reasons.items())[:MAX_REPORTED_ERRORS]]
        more = len(self.reasons) - MAX_REPORTED_ERRORS
        tail = f"; and {more} other reasons" if more > 0 else ""
        return f"rejected {self.count} {noun}: " + "; ".join(parts) + tail


# --- records ---------------------------------------------------------------------------------

(
    _set_trace_id, _set_span_id, _set_parent, _set_name, _set_kind, _set_start, _set_end,
    _set_attributes, _set_resource, _set_scope_name, _set_scope_version, _set_status_code,
    _set_status_message, _set_events, _set_links,
) = SPAN_SETTERS  # fmt: skip


def _span_record(
    trace_id: str,
    span_id: str,
    parent_span_id: str | None,
    name: str,
    kind: int,
    start_ns: int,
    end_ns: int,
    attrs: dict[str, Any],
    resource_attributes: dict[str, Any],
    scope_name: str,
    scope_version: str,
    status_code: int,
    status_message: str,
    events: tuple[SpanEvent, ...],
    links: tuple[SpanLink, ...],
) -> SpanRecord:
    """``SpanRecord(...)`` at a third of the cost (the decode hot path): a frozen dataclass's
    ``__init__`` goes through ``object.__setattr__`` per field, slot descriptors do not."""
    r = object.__new__(SpanRecord)
    _set_trace_id(r, trace_id)
    _set_span_id(r, span_id)
    _set_parent(r, parent_span_id)
    _set_name(r, name)
    _set_kind(r, kind)
    _set_start(r, start_ns)
    _set_end(r, end_ns)
    _set_attributes(r, attrs)
    _set_resource(r, resource_attributes)
    _set_scope_name(r, scope_name)
    _set_scope_version(r, scope_version)
    _set_status_code(r, status_code)
    _set_status_message(r, status_message)
    _set_events(r, events)
    _set_links(r, links)
    return r


# --- traces ----------------------------------------------------------------------------------


def decode_traces(
    request: ExportTraceServiceRequest, limits: DecodeLimits = DecodeLimits()
) -> DecodedTraces:
    trunc = Truncation(limits.max_attribute_bytes, limits.max_value_depth)
    rejected = _Rejections()
    spans: list[SpanRecord] = []
    for rs in request.resource_spans:
        resource_attrs = attributes(rs.resource.attributes, trunc)
        resource_problem = _key_problem(resource_attrs, limits)
        for ss in rs.scope_spans:
            scope_name = ss.scope.name
            scope_version = ss.scope.version
            for span in ss.spans:
                if resource_problem is not None:
                    rejected.add(f"resource {resource_problem}")
                    continue
                trace_id = span.trace_id
                span_id = span.span_id
                parent = span.parent_span_id
                problem = _span_problem(span)
                attrs = attributes(span.attributes, trunc) if problem is None else {}
                problem = problem or _key_problem(attrs, limits)
                if problem is not None:
                    rejected.add(problem)
                    continue
                events = span.events
                links = span.links
                status = span.status
                spans.append(
                    _span_record(
                        trace_id.hex(),
                        span_id.hex(),
                        # an all-zero parent is how some senders say "root"
                        parent.hex() if parent and parent != _ZERO_SPAN else None,
                        span.name,
                        span.kind,
                        span.start_time_unix_nano,
                        span.end_time_unix_nano,
                        attrs,
                        resource_attrs,
                        scope_name,
                        scope_version,
                        status.code,
                        status.message,
                        _events(events, trunc) if events else (),
                        _links(links, trunc) if links else (),
                    )
                )
    return DecodedTraces(tuple(spans), rejected.count, rejected.message("spans"), trunc.total)


def _span_problem(span: Any) -> str | None:
    """Why ``span`` (an OTLP Span) cannot be stored, from its ids and times, or None."""
    parent = span.parent_span_id
    return (
        _id_problem(span.trace_id, 16, _ZERO_TRACE, "trace_id")
        or _id_problem(span.span_id, 8, _ZERO_SPAN, "span_id")
        or (
            f"parent_span_id must be empty or 8 bytes, got {len(parent)}"
            if parent and len(parent) != 8
            else None
        )
        or time_problem(span.start_time_unix_nano, "start_time_unix_nano")
        or time_problem(span.end_time_unix_nano, "end_time_unix_nano")
    )


def _key_problem(attrs: Mapping[str, Any], limits: DecodeLimits) -> str | None:
    problem = key_problem(attrs, limits.key_attributes, limits.max_key_bytes)
    cut = attrs.get(TRUNCATED_ATTRIBUTE)
    if problem is None and cut:  # an id shortened to the attribute limit would be another id
        for key in expand(limits.key_attributes, attrs):
            if key in cut:
                return f"attribute {key} is longer than the attribute size limit"
    return problem


def _events(events: Any, trunc: Truncation) -> tuple[SpanEvent, ...]:
    return tuple(
        SpanEvent(e.name, e.time_unix_nano, attributes(e.attributes, trunc)) for e in events
    )


def _links(links: Any, trunc: Truncation) -> tuple[SpanLink, ...]:
    return tuple(
        SpanLink(lk.trace_id.hex(), lk.span_id.hex(), attributes(lk.attributes, trunc))
        for lk in links
        # a link with unusable ids is dropped; the span itself is kept
        if len(lk.trace_id) == 16 and len(lk.span_id) == 8
    )


# --- logs ------------------------------------------------------------------------------------


def _optional_id(raw: bytes, size: int, what: str) -> tuple[str | None, str | None]:
    """(hex id or None, problem). Empty and all-zero ids mean "no trace context"."""
    if not raw or (len(raw) == size and raw == bytes(size)):
        return None, None
    if len(raw) != size:
        return None, f"{what} must be empty or {size} bytes, got {len(raw)}"
    return raw.hex(), None


def decode_logs(
    request: ExportLogsServiceRequest, limits: DecodeLimits = DecodeLimits()
) -> DecodedLogs:
    trunc = Truncation(limits.max_attribute_bytes, limits.max_value_depth)
    rejected = _Rejections()
    records: list[LogRecordData] = []
    for rl in request.resource_logs:
        resource_attrs = attributes(rl.resource.attributes, trunc)
        for sl in rl.scope_logs:
            for rec in sl.log_records:
                trace_id, problem = _optional_id(rec.trace_id, 16, "trace_id")
                span_id, span_problem = _optional_id(rec.span_id, 8, "span_id")
                problem = (
                    problem
                    or span_problem
                    or time_problem(rec.time_unix_nano, "time_unix_nano")
                    or time_problem(rec.observed_time_unix_nano, "observed_time_unix_nano")
                )
                if problem is not None:
                    rejected.add(problem)
                    continue
                attrs = attributes(rec.attributes, trunc)
                body, body_cut = (
                    any_value(rec.body, trunc) if rec.HasField("body") else (None, False)
                )
                if body_cut:
                    attrs[TRUNCATED_ATTRIBUTE] = [*attrs.get(TRUNCATED_ATTRIBUTE, ()), "body"]
                event_name = rec.event_name or _str_attr(attrs, "event.name")
                records.append(
                    LogRecordData(
                        time_ns=rec.time_unix_nano,
                        observed_time_ns=rec.observed_time_unix_nano,
                        trace_id=trace_id,
                        span_id=span_id,
                        severity_number=rec.severity_number,
                        severity_text=rec.severity_text,
                        event_name=event_name,
                        body=body,
                        attributes=attrs,
                        resource_attributes=resource_attrs,
                        scope_name=sl.scope.name,
                        scope_version=sl.scope.version,
                    )
                )
    return DecodedLogs(tuple(records), rejected.count, rejected.message("log records"), trunc.total)


def _str_attr(attrs: Mapping[str, Any], key: str) -> str:
    value = attrs.get(key)
    return value if isinstance(value, str) else ""


__all__ = [
    "TRUNCATED_ATTRIBUTE",
    "DecodeError",
    "DecodeLimits",
    "DecodedLogs",
    "DecodedTraces",
    "decode_logs",
    "decode_traces",
    "parse_logs_json",
    "parse_logs_protobuf",
    "parse_traces_json",
    "parse_traces_protobuf",
]
