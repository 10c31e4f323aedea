"""Vercel AI SDK native telemetry (v3-v6, and AI SDK 7 ``LegacyOpenTelemetry``); scope ``ai``.

Model-call spans ``ai.generateText.doGenerate`` / ``ai.streamText.doStream``: history in
``ai.prompt.messages`` (JSON; ``tool-call`` / ``tool-result`` content parts), the model's calls in
``ai.response.toolCalls`` (v3: ``ai.result.toolCalls``), a JSON array whose items carry
``toolCallId``, ``toolName`` and ``input`` (v5, itself a JSON string) or ``args`` (v4). Tool runs
are ``ai.toolCall`` spans with ``ai.toolCall.name|id|args|result``. The root ``ai.generateText``
span repeats the last step and is skipped.
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
    first_attr,
    maybe_json,
    norm_role,
    opt_str,
)
from toolscore.storage.records import LogRecordData, SpanRecord

SCOPE = "ai"


def _call(item: Mapping[str, Any]) -> ToolCallRef:
    return ToolCallRef(
        name=str(item.get("toolName") or item.get("name") or ""),
        arguments=item.get("input", item.get("args")),
        call_id=opt_str(item.get("toolCallId") or item.get("id")),
    )


def _prompt_messages(value: object) -> tuple[Message, ...]:
    out: list[Message] = []
    for raw in as_list(value):
        if not isinstance(raw, Mapping):
            continue
        role = norm_role(raw.get("role"))
        content = maybe_json(raw.get("content"))
        if not isinstance(content, list):
            out.append(Message(role, as_text(content)))
            continue
        texts: list[str] = []
        calls: list[ToolCallRef] = []
        results: list[Message] = []
        for part in content:
            if not isinstance(part, Mapping):
                continue
            kind = part.get("type")
            if kind == "text":
                texts.append(as_text(part.get("text")))
            elif kind == "tool-call":
                calls.append(_call(part))
            elif kind == "tool-result":
                output = part.get("output", part.get("result"))
                if isinstance(output, Mapping) and "value" in output:  # v5 {type, value}
                    output = output["value"]
                results.append(
                    Message("tool", as_text(output), tool_call_id=opt_str(part.get("toolCallId")))
                )
        if texts or calls or not results:
            out.append(Message("assistant" if calls else role, "\n".join(texts), tuple(calls)))
        out.extend(results)
    return tuple(out)


def _is_tool_span(span: SpanRecord) -> bool:
    attrs = span.attributes
    return attrs.get("ai.operationId") == "ai.toolCall" or "ai.toolCall.name" in attrs


def _is_model_call(span: SpanRecord) -> bool:
    attrs = span.attributes
    operation = str(attrs.get("ai.operationId") or span.name)
    return operation.endswith((".doGenerate", ".doStream")) or "ai.prompt.messages" in attrs


class VercelAI:
    name = "vercel_ai"
    triggers = Triggers(scopes=frozenset({SCOPE}), keys=frozenset({"ai.operationId"}))

    def applies(self, span: SpanRecord) -> bool:
        return span.scope_name == SCOPE or "ai.operationId" in span.attributes

    def extract(self, span: SpanRecord) -> Sequence[Observation]:
        attrs = span.attributes
        if _is_tool_span(span):
            result = first_attr(attrs, ("ai.toolCall.result", "ai.toolCall.output"))
            return [
                ToolExecution(
                    convention=self.name,
                    trace_id=span.trace_id,
                    span_id=span.span_id,
                    start_ns=span.start_ns,
                    name=opt_str(attrs.get("ai.toolCall.name")) or span.name,
                    arguments=first_attr(attrs, ("ai.toolCall.args", "ai.toolCall.input")),
                    call_id=opt_str(attrs.get("ai.toolCall.id")),
                    result=None if result is None else as_text(result),
                    failed=span.status_code == 2,
                )
            ]
        if not _is_model_call(span):
            return []
        text = as_text(first_attr(attrs, ("ai.response.text", "ai.result.text")))
        raw_calls = as_list(first_attr(attrs, ("ai.response.toolCalls", "ai.result.toolCalls")))
        calls = tuple(_call(c) for c in raw_calls if isinstance(c, Mapping))
        outputs = (Message("assistant", text, calls),) if text or calls else ()
        return [
            Exchange(
                convention=self.name,
                trace_id=span.trace_id,
                span_id=span.span_id,
                sort_ns=span.start_ns,
                inputs=_prompt_messages(attrs.get("ai.prompt.messages")),
                outputs=outputs,
                response_id=opt_str(attrs.get("ai.response.id")),
            )
        ]

    def extract_logs(self, logs: Sequence[LogRecordData]) -> Sequence[Observation]:
        return ()
