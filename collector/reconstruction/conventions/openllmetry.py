"""OpenLLMetry / Traceloop <= 0.54 flattened form, and traceloop-sdk ``@tool`` decorator spans.

Model calls: ``gen_ai.prompt.{i}.role|content|tool_call_id|tool_calls.{j}.id|name|arguments`` and
``gen_ai.completion.{i}.role|content|tool_calls.{j}.*`` (a legacy ``function_call`` is the single
call). Tool spans (``traceloop.span.kind = tool``): ``traceloop.entity.name`` and the wrapper
``traceloop.entity.input = {"args": [...], "kwargs": {...}}``; no call id. The newer (>= 0.55) form
is OTel GenAI and handled by :mod:`toolscore.collector.reconstruction.conventions.otel_genai`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolscore.collector.reconstruction.conventions.base import (
    Exchange,
    Message,
    Observation,
    ToolCallRef,
    ToolExecution,
    as_list,
    as_text,
    norm_role,
    opt_str,
    unflatten,
)
from toolscore.collector.reconstruction.conventions.key_facts import (
    FLAT_COMPLETION,
    FLAT_PROMPT,
    key_facts,
)
from toolscore.storage.records import LogRecordData, SpanRecord


def _message(raw: object) -> Message | None:
    if not isinstance(raw, Mapping):
        return None
    role = norm_role(raw.get("role"))
    calls: list[ToolCallRef] = []
    for call in as_list(raw.get("tool_calls")):
        if isinstance(call, Mapping):
            calls.append(
                ToolCallRef(
                    name=str(call.get("name") or ""),
                    arguments=call.get("arguments"),
                    call_id=opt_str(call.get("id")),
                )
            )
    function_call = raw.get("function_call")
    if not calls and isinstance(function_call, Mapping) and function_call.get("name"):
        calls.append(ToolCallRef(str(function_call["name"]), function_call.get("arguments")))
    tool_call_id = opt_str(raw.get("tool_call_id")) if role == "tool" else None
    return Message(
        "assistant" if calls else role, as_text(raw.get("content")), tuple(calls), tool_call_id
    )


def _messages(value: Any) -> tuple[Message, ...]:
    out = [_message(m) for m in as_list(value)]
    return tuple(m for m in out if m is not None)


def _is_tool_span(span: SpanRecord) -> bool:
    return span.attributes.get("traceloop.span.kind") == "tool"


def _has_flattened(span: SpanRecord) -> bool:
    return bool(key_facts(span.attributes) & (FLAT_PROMPT | FLAT_COMPLETION))


class OpenLLMetry:
    name = "openllmetry"

    def applies(self, span: SpanRecord) -> bool:
        return _is_tool_span(span) or _has_flattened(span)

    def extract(self, span: SpanRecord) -> Sequence[Observation]:
        attrs = span.attributes
        if _is_tool_span(span):
            name = (
                opt_str(attrs.get("gen_ai.tool.name"))
                or opt_str(attrs.get("traceloop.entity.name"))
                or span.name.removesuffix(".tool")
            )
            result = attrs.get("traceloop.entity.output")
            return [
                ToolExecution(
                    convention=self.name,
                    trace_id=span.trace_id,
                    span_id=span.span_id,
                    start_ns=span.start_ns,
                    name=name,
                    arguments=attrs.get("traceloop.entity.input"),
                    call_id=opt_str(attrs.get("gen_ai.tool.call.id")),
                    result=None if result is None else as_text(result),
                    failed=span.status_code == 2,
                )
            ]
        return [
            Exchange(
                convention=self.name,
                trace_id=span.trace_id,
                span_id=span.span_id,
                sort_ns=span.start_ns,
                inputs=_messages(unflatten(attrs, "gen_ai.prompt")),
                outputs=_messages(unflatten(attrs, "gen_ai.completion")),
                response_id=opt_str(attrs.get("gen_ai.response.id")),
            )
        ]

    def extract_logs(self, logs: Sequence[LogRecordData]) -> Sequence[Observation]:
        return ()
