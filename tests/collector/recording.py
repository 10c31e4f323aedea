"""Test helpers: real OTel SDK output → SpanRecord / LogRecordData; save and load recordings.

Recordings use the same simple JSON form as the convention fixtures in tests/fixtures/recorded/docs:
``{"resource": {...}, "scope": "...", "spans": [...], "logs": [...], "expected_tool_calls": [...]}``
where each span may carry its own ``scope`` and ``resource``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from toolscore.storage.records import LogRecordData, SpanEvent, SpanLink, SpanRecord

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
RECORDED = FIXTURES / "recorded"
DOC_FIXTURES = RECORDED / "docs"  # one example trace per convention

KINDS = {"UNSPECIFIED": 0, "INTERNAL": 1, "SERVER": 2, "CLIENT": 3, "PRODUCER": 4, "CONSUMER": 5}


def _plain(value: Any) -> Any:
    """OTel attribute values (tuples, bytes) → JSON-able values as OTLP would decode them."""
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, bytes):
        return {"__bytes__": base64.b64encode(value).decode()}
    return value


def _attrs(attrs: Mapping[str, Any] | None) -> dict[str, Any]:
    return {str(k): _plain(v) for k, v in (attrs or {}).items()}


def span_from_sdk(span: Any) -> SpanRecord:
    """An SDK ``ReadableSpan`` → SpanRecord, as the OTLP receiver would store it."""
    context = span.context
    parent = span.parent
    scope = span.instrumentation_scope
    return SpanRecord(
        trace_id=f"{context.trace_id:032x}",
        span_id=f"{context.span_id:016x}",
        parent_span_id=f"{parent.span_id:016x}" if parent is not None else None,
        name=span.name,
        kind=int(span.kind.value) + 1,  # SDK SpanKind.INTERNAL == 0; OTLP INTERNAL == 1
        start_ns=int(span.start_time or 0),
        end_ns=int(span.end_time or 0),
        attributes=_attrs(span.attributes),
        resource_attributes=_attrs(span.resource.attributes),
        scope_name=scope.name if scope is not None else "",
        scope_version=(scope.version or "") if scope is not None else "",
        status_code=int(span.status.status_code.value),
        status_message=span.status.description or "",
        events=tuple(
            SpanEvent(e.name, int(e.timestamp), _attrs(e.attributes)) for e in span.events
        ),
        links=tuple(
            SpanLink(
                f"{k.context.trace_id:032x}", f"{k.context.span_id:016x}", _attrs(k.attributes)
            )
            for k in span.links
        ),
    )


def log_from_sdk(data: Any) -> LogRecordData:
    """An SDK ``LogData`` (or ``ReadableLogRecord``) → LogRecordData."""
    record = getattr(data, "log_record", data)
    scope = getattr(data, "instrumentation_scope", None)
    attrs = _attrs(record.attributes)
    event_name = getattr(record, "event_name", None) or attrs.get("event.name") or ""
    resource = getattr(record, "resource", None) or getattr(data, "resource", None)
    return LogRecordData(
        time_ns=int(record.timestamp or record.observed_timestamp or 0),
        observed_time_ns=int(record.observed_timestamp or 0),
        trace_id=f"{record.trace_id:032x}" if record.trace_id else None,
        span_id=f"{record.span_id:016x}" if record.span_id else None,
        severity_number=int(record.severity_number.value) if record.severity_number else 0,
        severity_text=record.severity_text or "",
        event_name=str(event_name),
        body=_plain(record.body),
        attributes=attrs,
        resource_attributes=_attrs(resource.attributes) if resource is not None else {},
        scope_name=scope.name if scope is not None else "",
        scope_version=(scope.version or "") if scope is not None else "",
    )


# --- the JSON recording form ---------------------------------------------------------------------


def span_to_json(span: SpanRecord) -> dict[str, Any]:
    return {
        "trace_id": span.trace_id,
        "span_id": span.span_id,
        "parent_span_id": span.parent_span_id,
        "name": span.name,
        "kind": span.kind,
        "start_ns": span.start_ns,
        "end_ns": span.end_ns,
        "status_code": span.status_code,
        "attributes": dict(span.attributes),
        "resource": dict(span.resource_attributes),
        "scope": span.scope_name,
        "events": [
            {"name": e.name, "time_ns": e.time_ns, "attributes": dict(e.attributes)}
            for e in span.events
        ],
    }


def log_to_json(log: LogRecordData) -> dict[str, Any]:
    return {
        "trace_id": log.trace_id,
        "span_id": log.span_id,
        "time_ns": log.time_ns,
        "event_name": log.event_name,
        "attributes": dict(log.attributes),
        "body": log.body,
        "scope": log.scope_name,
    }


def save_recording(
    path: Path,
    spans: Sequence[SpanRecord],
    logs: Sequence[LogRecordData] = (),
    *,
    note: str,
    expected: Iterable[Mapping[str, Any]] = (),
) -> None:
    document = {
        "_note": note,
        "spans": [span_to_json(s) for s in spans],
        "logs": [log_to_json(log) for log in logs],
        "expected_tool_calls": list(expected),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


Recording = tuple[list[SpanRecord], list[LogRecordData], list[dict[str, Any]]]


def load_recording(path: Path) -> Recording:
    """Load a recording or a shared convention fixture."""
    document = json.loads(path.read_text(encoding="utf-8"))
    resource = document.get("resource", {})
    scope = document.get("scope", "")
    spans = []
    for raw in document.get("spans", []):
        kind = raw.get("kind", 1)
        spans.append(
            SpanRecord(
                trace_id=raw["trace_id"],
                span_id=raw["span_id"],
                parent_span_id=raw.get("parent_span_id"),
                name=raw["name"],
                kind=KINDS[kind] if isinstance(kind, str) else int(kind),
                start_ns=int(raw["start_ns"]),
                end_ns=int(raw["end_ns"]),
                attributes=raw.get("attributes", {}),
                resource_attributes=raw.get("resource", resource),
                scope_name=raw.get("scope", scope),
                status_code=int(raw.get("status_code", 0)),
                events=tuple(
                    SpanEvent(e["name"], int(e["time_ns"]), e.get("attributes", {}))
                    for e in raw.get("events", [])
                ),
            )
        )
    logs = [
        LogRecordData(
            time_ns=int(raw["time_ns"]),
            observed_time_ns=int(raw["time_ns"]),
            trace_id=raw.get("trace_id"),
            span_id=raw.get("span_id"),
            severity_number=0,
            severity_text="",
            event_name=raw.get("event_name", ""),
            body=raw.get("body"),
            attributes=raw.get("attributes", {}),
            resource_attributes=resource,
            scope_name=raw.get("scope", scope),
        )
        for raw in document.get("logs", [])
    ]
    return spans, logs, list(document.get("expected_tool_calls", []))
