"""Mastra (``@mastra/otel-exporter``, scope ``@mastra/otel-exporter``): spans typed by
``mastra.span.type``.

What each type holds (exporter 1.4 with @mastra/core 1.71; read from the exporter's source):

- ``model_generation`` (one per ``agent.generate``): ``mastra.model_generation.input``
  ``{"messages": [...]}``, the full prompt as AI SDK messages (``tool-call`` / ``tool-result``
  parts): read as history, placed at the span's start, before its steps; its tool results are
  not read (each call's result comes from its tool span);
- ``model_step`` (one model call): ``mastra.model_step.output`` ``{"text", "toolCalls":
  [{toolCallId, toolName, args}]}``, the step's answer in order. Its *input* is a lossy summary
  (``"[tool: get_weather]"`` for a call) and is not read;
- ``model_inference`` (the ``chat`` span): output text only, no calls: skipped, as are
  ``model_chunk`` (stream parts), ``agent_run`` (a summary of the run) and workflow spans;
- ``tool_call`` / ``mcp_tool_call`` (``execute_tool <name>``): ``gen_ai.tool.name``,
  ``gen_ai.tool.call.id|arguments|result``; older exporters wrote ``gen_ai.tool.input`` /
  ``gen_ai.tool.output`` (read as fallbacks).
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
    opt_str,
)

# Mastra's prompts are AI SDK messages, the format the Vercel AI SDK module already reads
from toolscore.collector.reconstruction.conventions.vercel_ai import (
    _prompt_messages as prompt_messages,
)
from toolscore.storage.records import LogRecordData, SpanRecord

SCOPE = "@mastra/otel-exporter"
TYPE = "mastra.span.type"
TOOL_TYPES = ("tool_call", "mcp_tool_call")


def step_output(value: object) -> tuple[Message, ...]:
    """A model step's ``{"text", "toolCalls"}`` → the assistant message it produced."""
    output = maybe_json(value)
    if not isinstance(output, Mapping):
        return ()
    calls = tuple(
        ToolCallRef(
            str(c.get("toolName") or ""),
            c.get("args", c.get("input")),
            opt_str(c.get("toolCallId")),
        )
        for c in as_list(output.get("toolCalls"))
        if isinstance(c, Mapping)
    )
    text = as_text(output.get("text"))
    return (Message("assistant", text, calls),) if text.strip() or calls else ()


class Mastra:
    name = "mastra"
    triggers = Triggers(scopes=frozenset({SCOPE}), keys=frozenset({TYPE}))

    def applies(self, span: SpanRecord) -> bool:
        return span.scope_name == SCOPE or TYPE in span.attributes

    def extract(self, span: SpanRecord) -> Sequence[Observation]:
        attrs = span.attributes
        kind = str(attrs.get(TYPE) or "")
        if kind in TOOL_TYPES or attrs.get("gen_ai.operation.name") == "execute_tool":
            return [self._tool(span)]
        if kind == "model_generation":
            prompt = maybe_json(attrs.get("mastra.model_generation.input"))
            messages = prompt.get("messages") if isinstance(prompt, Mapping) else prompt
            # tool results are left to the tool spans: a turn's results first appear in the
            # next turn's prompt, which would place them after the answer they led to
            history = tuple(m for m in prompt_messages(messages) if m.role != "tool")
            return [self._exchange(span, history, ())] if history else []
        if kind == "model_step":
            outputs = step_output(attrs.get("mastra.model_step.output"))
            return [self._exchange(span, (), outputs)] if outputs else []
        return []

    def _exchange(
        self, span: SpanRecord, inputs: tuple[Message, ...], outputs: tuple[Message, ...]
    ) -> Exchange:
        return Exchange(self.name, span.trace_id, span.span_id, span.start_ns, inputs, outputs)

    def _tool(self, span: SpanRecord) -> ToolExecution:
        attrs = span.attributes
        result: Any = first_attr(attrs, ("gen_ai.tool.call.result", "gen_ai.tool.output"))
        return ToolExecution(
            convention=self.name,
            trace_id=span.trace_id,
            span_id=span.span_id,
            start_ns=span.start_ns,
            name=opt_str(attrs.get("gen_ai.tool.name")) or span.name.removeprefix("execute_tool "),
            arguments=first_attr(attrs, ("gen_ai.tool.call.arguments", "gen_ai.tool.input")),
            call_id=opt_str(
                first_attr(attrs, ("gen_ai.tool.call.id", "mastra.metadata.toolCallId"))
            ),
            result=None if result is None else as_text(result),
            failed=span.status_code == 2,
        )

    def extract_logs(self, logs: Sequence[LogRecordData]) -> Sequence[Observation]:
        return ()
