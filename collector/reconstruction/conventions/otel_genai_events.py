"""OTel GenAI <= 1.36 event form: one event per message, as log records or span events.

Events ``gen_ai.system.message`` / ``gen_ai.user.message`` / ``gen_ai.assistant.message`` /
``gen_ai.tool.message`` are the history sent to the model; ``gen_ai.choice`` is what it produced.
Log records carry a ``body``; span events (a few libraries copy the events onto the span) carry
the same keys as attributes, often as JSON strings. Log records are joined to their model call by
(trace_id, span_id). OpenLLMetry's events mode re-sends the whole history on every request.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from toolscore.collector.reconstruction.conventions.base import (
    Exchange,
    Message,
    Observation,
    ToolCallRef,
    Triggers,
    as_list,
    as_text,
    maybe_json,
    opt_str,
)
from toolscore.storage.records import LogRecordData, SpanRecord

INPUT_EVENTS: Mapping[str, str] = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}
CHOICE = "gen_ai.choice"
EVENT_NAMES = frozenset({*INPUT_EVENTS, CHOICE})


def event_name_of(log: LogRecordData) -> str:
    return log.event_name or str(log.attributes.get("event.name") or "")


def tool_calls_of(value: object) -> tuple[ToolCallRef, ...]:
    calls: list[ToolCallRef] = []
    for call in as_list(value):
        call = maybe_json(call)
        if not isinstance(call, Mapping):
            continue
        function = call.get("function")
        function = maybe_json(function)
        function = function if isinstance(function, Mapping) else call
        calls.append(
            ToolCallRef(
                name=str(function.get("name") or ""),
                arguments=function.get("arguments", function.get("args")),
                call_id=opt_str(call.get("id")),
            )
        )
    return tuple(calls)


def message_from_event(name: str, body: Mapping[str, Any]) -> Message | None:
    """Build a message from an event body (or span-event attributes)."""
    if name == CHOICE:
        inner = maybe_json(body.get("message"))
        msg: Mapping[str, Any] = inner if isinstance(inner, Mapping) else body
        # the spec nests tool_calls in message; OpenLLMetry 0.62 puts them beside it
        calls = tool_calls_of(msg.get("tool_calls")) or tool_calls_of(body.get("tool_calls"))
        return Message("assistant", as_text(maybe_json(msg.get("content"))), calls)
    role = INPUT_EVENTS.get(name)
    if role is None:
        return None
    content = as_text(maybe_json(body.get("content")))
    if role == "assistant":
        return Message(role, content, tool_calls_of(body.get("tool_calls")))
    if role == "tool":
        return Message(role, content, tool_call_id=opt_str(body.get("id")))
    return Message(role, content)


def _body(value: object) -> Mapping[str, Any]:
    value = maybe_json(value)
    if isinstance(value, Mapping):
        return value
    if value is None:
        return {}
    return {"content": value}


def exchange_from_events(
    events: Sequence[tuple[str, int, Mapping[str, Any]]],
    *,
    convention: str,
    trace_id: str,
    span_id: str | None,
    sort_ns: int,
) -> Exchange:
    inputs: list[Message] = []
    choices: list[tuple[int, int, Message]] = []
    for position, (name, _time, body) in enumerate(events):
        message = message_from_event(name, body)
        if message is None:
            continue
        if name == CHOICE:
            index = body.get("index")
            choices.append((index if isinstance(index, int) else 0, position, message))
        else:
            inputs.append(message)
    outputs = tuple(m for _i, _p, m in sorted(choices, key=lambda c: (c[0], c[1])))
    return Exchange(convention, trace_id, span_id, sort_ns, tuple(inputs), outputs)


class OtelGenAIEvents:
    name = "otel_genai_events"
    triggers = Triggers(events=True)

    def applies(self, span: SpanRecord) -> bool:
        return any(e.name in EVENT_NAMES for e in span.events)

    def extract(self, span: SpanRecord) -> Sequence[Observation]:
        events = [
            (e.name, e.time_ns, _body(dict(e.attributes)))
            for e in span.events
            if e.name in EVENT_NAMES
        ]
        return [
            exchange_from_events(
                events,
                convention=self.name,
                trace_id=span.trace_id,
                span_id=span.span_id,
                sort_ns=span.start_ns,
            )
        ]

    def extract_logs(self, logs: Sequence[LogRecordData]) -> Sequence[Observation]:
        groups: dict[tuple[str, str | None], list[LogRecordData]] = defaultdict(list)
        for log in logs:
            if log.trace_id and event_name_of(log) in EVENT_NAMES:
                groups[(log.trace_id, log.span_id)].append(log)
        out: list[Observation] = []
        for (trace_id, span_id), group in groups.items():
            # stable sort: records of one request share a timestamp; keep arrival order then
            group.sort(key=lambda log: log.time_ns)
            events = [(event_name_of(log), log.time_ns, _body(log.body)) for log in group]
            out.append(
                exchange_from_events(
                    events,
                    convention=self.name,
                    trace_id=trace_id,
                    span_id=span_id,
                    sort_ns=group[0].time_ns,
                )
            )
        return out
