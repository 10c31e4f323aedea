"""Span builders for pipeline tests: short readable ids padded to OTLP's hex widths."""

from __future__ import annotations

from typing import Any

from toolscore.storage.records import SpanRecord


def span(
    trace: str,
    span_id: str,
    parent: str | None = None,
    *,
    start: int = 1_000,
    attrs: dict[str, Any] | None = None,
    resource: dict[str, Any] | None = None,
    name: str = "span",
) -> SpanRecord:
    """A span with short readable ids padded to OTLP's hex widths."""
    return SpanRecord(
        trace_id=trace.rjust(32, "0"),
        span_id=span_id.rjust(16, "0"),
        parent_span_id=parent.rjust(16, "0") if parent else None,
        name=name,
        kind=1,
        start_ns=start,
        end_ns=start + 10,
        attributes=attrs or {},
        resource_attributes=resource or {},
    )


def tid(short: str) -> str:
    return short.rjust(32, "0")


def sid(short: str) -> str:
    return short.rjust(16, "0")
