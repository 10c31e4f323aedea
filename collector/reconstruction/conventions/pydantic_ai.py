"""Pydantic AI (and Logfire, which shows the same spans); scope ``pydantic-ai``.

Formats >= 3 use OTel GenAI names, with differences handled by the OTel GenAI parser:
``tool_call.arguments`` may be a JSON string, tool results use ``result`` and sit in a ``user``
message (``tool`` from format 6). The agent span's ``pydantic_ai.all_messages`` is the complete
history (used as a history-only exchange at the end of the run). Format 2 uses ``agent run`` /
``running tool`` spans with ``tool_arguments`` / ``tool_response``, and messages as an ``events``
(or ``all_messages_events``) attribute holding a JSON list of event dicts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolscore.collector.reconstruction.conventions.base import (
    Exchange,
    Observation,
    Triggers,
    as_list,
    maybe_json,
)
from toolscore.collector.reconstruction.conventions.otel_genai import (
    exchange_from,
    has_messages,
    is_tool_span,
    parse_messages,
    tool_execution,
)
from toolscore.collector.reconstruction.conventions.otel_genai_events import exchange_from_events
from toolscore.storage.records import LogRecordData, SpanRecord

SCOPES = frozenset({"pydantic-ai", "pydantic_ai"})
ALL_MESSAGES = "pydantic_ai.all_messages"


def _event_list(value: object) -> list[tuple[str, int, Mapping[str, Any]]]:
    events: list[tuple[str, int, Mapping[str, Any]]] = []
    for item in as_list(value):
        item = maybe_json(item)
        if isinstance(item, Mapping) and isinstance(item.get("event.name"), str):
            events.append((str(item["event.name"]), 0, item))
    return events


class PydanticAI:
    name = "pydantic_ai"
    triggers = Triggers(scopes=SCOPES, keys=frozenset({ALL_MESSAGES, "tool_arguments"}))

    def applies(self, span: SpanRecord) -> bool:
        if span.scope_name in SCOPES:
            return True
        attrs = span.attributes
        return ALL_MESSAGES in attrs or (span.name == "running tool" and "tool_arguments" in attrs)

    def extract(self, span: SpanRecord) -> Sequence[Observation]:
        attrs = span.attributes
        if is_tool_span(span) or "tool_arguments" in attrs:
            return [tool_execution(span, self.name)]
        trace_id, span_id = span.trace_id, span.span_id
        if ALL_MESSAGES in attrs:
            history = parse_messages(attrs[ALL_MESSAGES])
            return [Exchange(self.name, trace_id, span_id, span.end_ns, inputs=history)]
        if has_messages(span):
            return [
                exchange_from(
                    attrs,
                    convention=self.name,
                    trace_id=trace_id,
                    span_id=span_id,
                    sort_ns=span.start_ns,
                )
            ]
        for key, sort_ns in (("events", span.start_ns), ("all_messages_events", span.end_ns)):
            events = _event_list(attrs.get(key))
            if not events:
                continue
            exchange = exchange_from_events(
                events, convention=self.name, trace_id=trace_id, span_id=span_id, sort_ns=sort_ns
            )
            if key == "all_messages_events":  # history only: outputs were seen per model call
                exchange = Exchange(
                    self.name, trace_id, span_id, sort_ns, exchange.inputs + exchange.outputs
                )
            return [exchange]
        return []

    def extract_logs(self, logs: Sequence[LogRecordData]) -> Sequence[Observation]:
        return ()
