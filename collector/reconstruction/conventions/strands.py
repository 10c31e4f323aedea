"""Strands Agents (scope ``strands.telemetry.tracer``): content lives in span events.

Default mode: ``gen_ai.user.message`` / ``gen_ai.assistant.message`` / ``gen_ai.tool.message`` /
``gen_ai.choice`` span events whose ``content`` / ``message`` attribute is a JSON string of
Bedrock Converse content blocks (``{"text"}``, ``{"toolUse": {toolUseId, name, input}}``,
``{"toolResult": {toolUseId, content}}``). On ``execute_tool`` spans, ``gen_ai.tool.message``
holds the *arguments* and ``gen_ai.choice`` the result. With
``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`` the messages are OTel GenAI JSON in a
``gen_ai.client.inference.operation.details`` event and tool spans gain
``gen_ai.tool.call.arguments``.
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
)
from toolscore.collector.reconstruction.conventions.otel_genai import (
    DETAILS_EVENT,
    OtelGenAI,
    is_tool_span,
    parse_messages,
)
from toolscore.storage.records import LogRecordData, SpanRecord

SCOPE = "strands.telemetry.tracer"
ROLE_EVENTS: Mapping[str, str] = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}


def blocks_to_messages(role: str, value: object) -> list[Message]:
    """Bedrock content blocks → messages (tool results become separate tool messages)."""
    blocks = as_list(value)
    texts: list[str] = []
    calls: list[ToolCallRef] = []
    results: list[Message] = []
    for block in blocks:
        block = maybe_json(block)
        if isinstance(block, str):
            texts.append(block)
            continue
        if not isinstance(block, Mapping):
            continue
        if isinstance(block.get("text"), str):
            texts.append(block["text"])
        use = block.get("toolUse")
        if isinstance(use, Mapping):
            calls.append(
                ToolCallRef(
                    str(use.get("name") or ""), use.get("input"), opt_str(use.get("toolUseId"))
                )
            )
        result = block.get("toolResult")
        if isinstance(result, Mapping):
            content = [_result_block(b) for b in as_list(result.get("content"))]
            results.append(
                Message("tool", "\n".join(content), tool_call_id=opt_str(result.get("toolUseId")))
            )
    out: list[Message] = []
    if texts or calls or not results:
        out.append(Message("assistant" if calls else role, "\n".join(texts), tuple(calls)))
    return out + results


def _result_block(block: Any) -> str:
    if isinstance(block, Mapping):
        if "text" in block:
            return as_text(block["text"])
        if "json" in block:
            return as_text(block["json"])
    return as_text(block)


class Strands:
    name = "strands"
    triggers = Triggers(
        scopes=frozenset({SCOPE}), keys=frozenset({"gen_ai.system", "gen_ai.provider.name"})
    )

    def applies(self, span: SpanRecord) -> bool:
        if span.scope_name == SCOPE:
            return True
        attrs = span.attributes
        return "strands-agents" in (attrs.get("gen_ai.system"), attrs.get("gen_ai.provider.name"))

    def extract(self, span: SpanRecord) -> Sequence[Observation]:
        if is_tool_span(span):
            return [self._tool(span)]
        exchanges = self._exchanges(span)
        if span.attributes.get("gen_ai.operation.name") == "chat":
            return exchanges
        # invoke_agent / execute_event_loop_cycle events summarise their chat spans: history only,
        # placed at the span's end, so they add only what no chat span recorded
        return [
            Exchange(self.name, e.trace_id, e.span_id, span.end_ns, e.inputs + e.outputs)
            for e in exchanges
        ]

    def _exchanges(self, span: SpanRecord) -> list[Exchange]:
        if any(e.name == DETAILS_EVENT for e in span.events) or "gen_ai.input.messages" in (
            span.attributes
        ):
            return [
                Exchange(self.name, e.trace_id, e.span_id, e.sort_ns, e.inputs, e.outputs)
                for e in OtelGenAI().extract(span)
                if isinstance(e, Exchange)
            ]
        inputs: list[Message] = []
        outputs: list[Message] = []
        for event in span.events:
            attrs = event.attributes
            if event.name == "gen_ai.choice":
                outputs.extend(blocks_to_messages("assistant", attrs.get("message")))
                if "tool.result" in attrs:  # event-loop cycles attach the cycle's tool results
                    outputs.extend(blocks_to_messages("user", attrs.get("tool.result")))
            elif event.name in ROLE_EVENTS:
                role = norm_role(attrs.get("role") or ROLE_EVENTS[event.name])
                inputs.extend(blocks_to_messages(role, attrs.get("content")))
        if not inputs and not outputs:
            return []
        return [
            Exchange(
                self.name, span.trace_id, span.span_id, span.start_ns, tuple(inputs), tuple(outputs)
            )
        ]

    def _tool(self, span: SpanRecord) -> ToolExecution:
        attrs = span.attributes
        arguments: Any = attrs.get("gen_ai.tool.call.arguments")
        result: Any = attrs.get("gen_ai.tool.call.result")
        for event in span.events:
            if event.name == "gen_ai.tool.message" and arguments is None:
                arguments = event.attributes.get("content")
            elif event.name == "gen_ai.choice" and result is None:
                blocks = as_list(event.attributes.get("message"))
                result = "\n".join(_result_block(b) for b in blocks)
            elif event.name == DETAILS_EVENT and arguments is None:
                for message in parse_messages(event.attributes.get("gen_ai.input.messages")):
                    if message.tool_calls:
                        arguments = message.tool_calls[0].arguments
        return ToolExecution(
            convention=self.name,
            trace_id=span.trace_id,
            span_id=span.span_id,
            start_ns=span.start_ns,
            name=opt_str(attrs.get("gen_ai.tool.name")) or span.name.removeprefix("execute_tool "),
            arguments=arguments,
            call_id=opt_str(attrs.get("gen_ai.tool.call.id")),
            result=None if result is None else as_text(result),
            failed=span.status_code == 2 or attrs.get("gen_ai.tool.status") == "error",
        )

    def extract_logs(self, logs: Sequence[LogRecordData]) -> Sequence[Observation]:
        return ()
