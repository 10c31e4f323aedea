"""The GenAI content events of ``bench_retention_soak.py``'s conversations, as OTLP log records.

For each span request template, one ``ExportLogsServiceRequest`` holding every conversation's
events in the form OpenLLMetry's OpenAI instrumentation emits them with events on (OTel GenAI
<= 1.36 events, recorded in ``tests/fixtures/recorded/openai-openllmetry-events-*.json``):
scope ``opentelemetry.instrumentation.openai.v1``, ``event_name`` set, attribute
``gen_ai.provider.name``, a map body, the trace id and span id of the ``chat`` span it belongs to.
The first ``chat`` span gets ``gen_ai.user.message`` and ``gen_ai.choice`` (the tool calls); the
second the history (``gen_ai.user.message``, ``gen_ai.assistant.message``, one
``gen_ai.tool.message`` per call) and ``gen_ai.choice`` (the answer): 9 records a conversation.
Their trace ids are the span templates', so the round marker rewrites both alike.
"""

from __future__ import annotations

import json
from typing import Any

from pipeline_load import CALLS, SPANS_PER_TRACE

LOGS_PER_TRACE = 3 + len(CALLS) + 2
SCOPE = "opentelemetry.instrumentation.openai.v1"
QUESTION = {"content": "Weather and time?"}


def _tool_calls(ids: list[str]) -> list[dict[str, Any]]:
    return [
        {"id": i, "function": {"arguments": json.dumps(a), "name": n}, "type": "function"}
        for i, (n, a) in zip(ids, CALLS, strict=True)
    ]


def _set(value: Any, data: Any) -> None:
    """Fill the OTLP AnyValue ``value`` from JSON-like ``data``."""
    if data is None:
        return  # an empty AnyValue: null
    if isinstance(data, dict):
        for k, v in data.items():
            entry = value.kvlist_value.values.add(key=k)
            _set(entry.value, v)
    elif isinstance(data, list):
        value.array_value.SetInParent()
        for v in data:
            _set(value.array_value.values.add(), v)
    elif isinstance(data, bool):
        value.bool_value = data
    elif isinstance(data, int):
        value.int_value = data
    else:
        value.string_value = str(data)


def _events(spans: list[Any]) -> list[tuple[Any, str, dict[str, Any]]]:
    """(chat span, event name, body) of one conversation's 7 spans (root, chat, tools, chat)."""
    first, tools, last = spans[1], spans[2:-1], spans[-1]
    ids = [
        next(a.value.string_value for a in t.attributes if a.key == "gen_ai.tool.call.id")
        for t in tools
    ]
    calls = _tool_calls(ids)
    choice = {"index": 0, "message": {"content": None}, "finish_reason": "tool_calls"}
    out = [
        (first, "gen_ai.user.message", QUESTION),
        (first, "gen_ai.choice", {**choice, "tool_calls": calls}),
        (last, "gen_ai.user.message", QUESTION),
        (last, "gen_ai.assistant.message", {"content": None, "tool_calls": calls}),
    ]
    out += [(last, "gen_ai.tool.message", {"content": "ok"}) for _ in tools]
    answer = {"index": 0, "message": {"content": "18C, 09:00"}, "finish_reason": "stop"}
    out.append((last, "gen_ai.choice", answer))
    return out


def log_template(span_body: bytes) -> bytes:
    """The log request of the conversations in the span request ``span_body``."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    spans = list(
        ExportTraceServiceRequest.FromString(span_body).resource_spans[0].scope_spans[0].spans
    )
    req = ExportLogsServiceRequest()
    rl = req.resource_logs.add()
    rl.resource.attributes.add(key="service.name").value.string_value = "bench-agent"
    sl = rl.scope_logs.add()
    sl.scope.name = SCOPE
    for n in range(0, len(spans), SPANS_PER_TRACE):
        for i, (span, name, body) in enumerate(_events(spans[n : n + SPANS_PER_TRACE])):
            rec = sl.log_records.add()
            rec.time_unix_nano = rec.observed_time_unix_nano = span.start_time_unix_nano + i
            rec.trace_id, rec.span_id, rec.event_name = span.trace_id, span.span_id, name
            rec.severity_number = 9  # INFO, as the SDK's event logger sets
            rec.attributes.add(key="gen_ai.provider.name").value.string_value = "openai"
            _set(rec.body, body)
    return req.SerializeToString()
