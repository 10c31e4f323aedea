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
# The message's position in the request, where an instrumentation records it (Semantic Kernel's
# model diagnostics): the order then owes nothing to timestamps or arrival.
INDEX_KEYS = ("CHAT_MESSAGE_INDEX",)


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
        # the spec says ``id``; Semantic Kernel writes the OpenAI message's ``tool_call_id``
        call_id = opt_str(body.get("id")) or opt_str(body.get("tool_call_id"))
        return Message(role, content, tool_call_id=call_id)
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
        groups: dict[tuple[str, str | None], list[tuple[int, LogRecordData]]] = defaultdict(list)
        for arrival, log in enumerate(logs):
            if log.trace_id and event_name_of(log) in EVENT_NAMES:
                groups[(log.trace_id, log.span_id)].append((arrival, log))
        out: list[Observation] = []
        for (trace_id, span_id), group in groups.items():
            ordered = request_order(group)
            events = [(event_name_of(log), log_time(log), _body(log.body)) for log in ordered]
            out.append(
                exchange_from_events(
                    events,
                    convention=self.name,
                    trace_id=trace_id,
                    span_id=span_id,
                    # the rebuild places it at its span's start when the span is known
                    sort_ns=min(log_time(log) for log in ordered),
                )
            )
        return out


def log_time(log: LogRecordData) -> int:
    """When the record was made: its time, else when the SDK observed it (a record whose
    emitter set no time carries only that)."""
    return log.time_ns or log.observed_time_ns


def message_index(log: LogRecordData) -> int | None:
    for key in INDEX_KEYS:
        value = log.attributes.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def request_order(group: Sequence[tuple[int, LogRecordData]]) -> list[LogRecordData]:
    """One model call's records in the order of its request: the history first (by the index
    the instrumentation gave each message when every message has one, else by time, then
    arrival), then what the model produced. Neither the records' timestamps (equal, or zero,
    from a coarse clock) nor how they were split across requests can reorder a call's messages
    or put an output before its history."""
    inputs = [(a, log) for a, log in group if event_name_of(log) != CHOICE]
    indexed = all(message_index(log) is not None for _a, log in inputs)

    def input_key(item: tuple[int, LogRecordData]) -> tuple[int, int, int]:
        arrival, log = item
        index = message_index(log) if indexed else None
        return (index if index is not None else log_time(log), log_time(log), arrival)

    outputs = [(a, log) for a, log in group if event_name_of(log) == CHOICE]
    return [log for _a, log in sorted(inputs, key=input_key)] + [
        log for _a, log in sorted(outputs, key=lambda item: (log_time(item[1]), item[0]))
    ]
