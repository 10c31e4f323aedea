"""OpenInference (Arize Phoenix): LangChain, LlamaIndex, OpenAI, OpenAI Agents instrumentations.

LLM spans carry flattened keys ``llm.input_messages.{i}.message.*`` and
``llm.output_messages.{i}.message.tool_calls.{j}.tool_call.{id,function.name,function.arguments}``.
TOOL spans carry ``tool.name`` and the arguments in ``input.value`` (JSON, a bare value when a
LangChain tool has a single string argument, or a Python repr); usually no call id.
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
    Triggers,
    as_list,
    as_text,
    maybe_json,
    norm_role,
    opt_str,
    unflatten,
)
from toolscore.storage.records import LogRecordData, SpanRecord

KIND = "openinference.span.kind"


def _message(raw: object) -> Message | None:
    if not isinstance(raw, Mapping):
        return None
    msg = raw.get("message", raw)
    if not isinstance(msg, Mapping):
        return None
    role = norm_role(msg.get("role"))
    content = msg.get("content")
    if content is None and "contents" in msg:
        content = [
            c.get("message_content", c) if isinstance(c, Mapping) else c
            for c in as_list(msg.get("contents"))
        ]
    calls: list[ToolCallRef] = []
    for call in as_list(msg.get("tool_calls")):
        call = call.get("tool_call", call) if isinstance(call, Mapping) else None
        if not isinstance(call, Mapping):
            continue
        function = call.get("function")
        function = function if isinstance(function, Mapping) else {}
        arguments = function.get("arguments")
        if arguments is None and function.get("name"):
            arguments = "{}"  # OpenAI / OpenAI Agents instrumentations leave out exactly "{}"
        calls.append(
            ToolCallRef(
                name=str(function.get("name") or ""),
                arguments=arguments,
                call_id=opt_str(call.get("id")),
            )
        )
    legacy_name = msg.get("function_call_name")
    if legacy_name and not calls:
        calls.append(ToolCallRef(str(legacy_name), msg.get("function_call_arguments_json")))
    tool_call_id = opt_str(msg.get("tool_call_id")) if role == "tool" else None
    return Message("assistant" if calls else role, as_text(content), tuple(calls), tool_call_id)


def _tool_output(value: object) -> tuple[str | None, str | None]:
    """The tool result text, and the call id when the output is a serialised LangChain ToolMessage.

    LangChain tools invoked with a ToolCall return a ToolMessage, which the OpenInference tracer
    writes as ``{"type": "tool", "data": {"content", "tool_call_id", ...}}``: the only place the
    call id survives on the tool span.
    """
    if value is None:
        return None, None
    parsed = maybe_json(value)
    if isinstance(parsed, Mapping) and parsed.get("type") == "tool":
        data = parsed.get("data")
        if isinstance(data, Mapping):
            return as_text(data.get("content")), opt_str(data.get("tool_call_id"))
    return as_text(value), None


def _messages(value: Any) -> tuple[Message, ...]:
    out = [_message(m) for m in as_list(value)]
    return tuple(m for m in out if m is not None)


class OpenInference:
    name = "openinference"
    triggers = Triggers(keys=frozenset({KIND}))

    def applies(self, span: SpanRecord) -> bool:
        return KIND in span.attributes

    def extract(self, span: SpanRecord) -> Sequence[Observation]:
        attrs = span.attributes
        kind = str(attrs.get(KIND) or "").upper()
        if kind == "TOOL":
            name = opt_str(attrs.get("tool.name")) or span.name
            result, output_call_id = _tool_output(attrs.get("output.value"))
            return [
                ToolExecution(
                    convention=self.name,
                    trace_id=span.trace_id,
                    span_id=span.span_id,
                    start_ns=span.start_ns,
                    name=name,
                    arguments=attrs.get("input.value"),
                    call_id=opt_str(attrs.get("tool.id") or attrs.get("tool_call.id"))
                    or output_call_id,
                    result=result,
                    failed=span.status_code == 2,
                )
            ]
        if kind != "LLM":
            return []
        inputs = _messages(unflatten(attrs, "llm.input_messages"))
        outputs = _messages(unflatten(attrs, "llm.output_messages"))
        if not inputs and not outputs:
            return []
        return [
            Exchange(
                convention=self.name,
                trace_id=span.trace_id,
                span_id=span.span_id,
                sort_ns=span.start_ns,
                inputs=inputs,
                outputs=outputs,
            )
        ]

    def extract_logs(self, logs: Sequence[LogRecordData]) -> Sequence[Observation]:
        return ()
