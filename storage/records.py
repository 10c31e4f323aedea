"""The service's internal vocabulary for telemetry: decoded spans and log records.

Everything that crosses a module boundary inside ``collector/`` and ``storage/`` uses these frozen
dataclasses. Ids are lowercase hex strings; times are integer Unix nanoseconds (never floats).
Attribute mappings are flat (OTLP keys as sent, e.g. ``gen_ai.completion.0.tool_calls.0.name``)
with values decoded from OTLP ``AnyValue``: ``str``, ``bool``, ``int``, ``float``, ``bytes``,
``list`` (array) or ``dict`` (key-value list), nested as sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

Attributes = Mapping[str, Any]

# OTLP SpanKind numbers (opentelemetry.proto.trace.v1.Span.SpanKind)
SPAN_KIND_NAMES: Mapping[int, str] = {
    0: "UNSPECIFIED",
    1: "INTERNAL",
    2: "SERVER",
    3: "CLIENT",
    4: "PRODUCER",
    5: "CONSUMER",
}


@dataclass(frozen=True, slots=True)
class SpanEvent:
    name: str
    time_ns: int
    attributes: Attributes = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SpanLink:
    trace_id: str
    span_id: str
    attributes: Attributes = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SpanRecord:
    trace_id: str  # 32 lowercase hex chars
    span_id: str  # 16 lowercase hex chars
    parent_span_id: str | None
    name: str
    kind: int  # OTLP SpanKind number, see SPAN_KIND_NAMES
    start_ns: int
    end_ns: int
    attributes: Attributes = field(default_factory=dict)
    resource_attributes: Attributes = field(default_factory=dict)
    scope_name: str = ""
    scope_version: str = ""
    status_code: int = 0  # 0 unset, 1 ok, 2 error
    status_message: str = ""
    events: tuple[SpanEvent, ...] = ()
    links: tuple[SpanLink, ...] = ()


# SpanRecord's fields in order, and their slot setters: the decoders on hot paths (OTLP requests,
# spans read back for scoring) build records by setting the slots, about three times cheaper
# than the frozen __init__'s object.__setattr__ per field.
SPAN_FIELDS: tuple[str, ...] = (
    "trace_id", "span_id", "parent_span_id", "name", "kind", "start_ns", "end_ns", "attributes",
    "resource_attributes", "scope_name", "scope_version", "status_code", "status_message",
    "events", "links",
)  # fmt: skip
if tuple(f.name for f in fields(SpanRecord)) != SPAN_FIELDS:  # pragma: no cover
    raise ImportError("SpanRecord's fields changed: update storage/records.py SPAN_FIELDS")
SPAN_SETTERS: tuple[Any, ...] = tuple(getattr(SpanRecord, name).__set__ for name in SPAN_FIELDS)


@dataclass(frozen=True, slots=True)
class LogRecordData:
    """One OTLP log record (GenAI content often travels as log events)."""

    time_ns: int
    observed_time_ns: int
    trace_id: str | None
    span_id: str | None
    severity_number: int
    severity_text: str
    event_name: str  # LogRecord.event_name, or the ``event.name`` attribute for older senders
    body: Any
    attributes: Attributes = field(default_factory=dict)
    resource_attributes: Attributes = field(default_factory=dict)
    scope_name: str = ""
    scope_version: str = ""
