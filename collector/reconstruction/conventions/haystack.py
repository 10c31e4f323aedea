"""Haystack's own tracing (opentelemetry-haystack, or Haystack's built-in OpenTelemetry tracer):
``haystack.*`` span names and tags, scope ``haystack``.

Content tags exist only with ``HAYSTACK_CONTENT_TRACING_ENABLED=true``; they hold Haystack's
``to_dict`` JSON of its objects. A chat message is ``{"role", "content": [part, ...]}`` whose
parts are ``{"text"}``, ``{"tool_call": {tool_name, arguments, id}}`` or
``{"tool_call_result": {result, origin: <the tool_call>, error}}`` (Haystack < 2.9 wrote
``_role`` / ``_content``). Spans read:

- ``haystack.agent.step.llm`` (an Agent's model call): ``haystack.agent.step.llm.input``
  ``{"messages": [...]}``, ``.output`` ``{"replies": [...]}``;
- ``haystack.chat_generator.run`` and ``haystack.component.run`` of a chat generator (in a
  pipeline): the same in ``haystack.component.input`` / ``haystack.component.output``;
- ``haystack.agent.step.tool`` (one per call): ``haystack.tool.name``,
  ``haystack.agent.step.tool.input`` (the arguments), ``.output``, ``haystack.tool.error``; no
  call id (the call is matched by name and arguments).

Agent and pipeline spans repeat what the step spans hold and are skipped.
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
from toolscore.storage.records import LogRecordData, SpanRecord

SCOPE = "haystack"
LLM_STEP = "haystack.agent.step.llm"
TOOL_STEP = "haystack.agent.step.tool"
COMPONENT_SPANS = ("haystack.chat_generator.run", "haystack.component.run")


def _call(raw: object) -> ToolCallRef | None:
    if not isinstance(raw, Mapping) or not raw.get("tool_name"):
        return None
    return ToolCallRef(str(raw["tool_name"]), raw.get("arguments"), opt_str(raw.get("id")))


def chat_messages(value: object) -> list[Message]:
    """Haystack ``ChatMessage.to_dict()`` items → messages (a tool result is its own message)."""
    out: list[Message] = []
    for raw in as_list(value):
        if not isinstance(raw, Mapping):
            continue
        role = norm_role(raw.get("role", raw.get("_role")))
        texts: list[str] = []
        calls: list[ToolCallRef] = []
        results: list[Message] = []
        for part in as_list(raw.get("content", raw.get("_content"))):
            if not isinstance(part, Mapping):
                continue
            if isinstance(part.get("text"), str):
                texts.append(part["text"])
            call = _call(part.get("tool_call"))
            if call is not None:
                calls.append(call)
            result = part.get("tool_call_result")
            if isinstance(result, Mapping):
                origin = _call(result.get("origin"))
                call_id = origin.call_id if origin else None
                results.append(Message("tool", as_text(result.get("result")), (), call_id))
        if texts or calls or not results:
            out.append(Message("assistant" if calls else role, "\n".join(texts), tuple(calls)))
        out.extend(results)
    return out


def _field(value: object, key: str) -> Any:
    parsed = maybe_json(value)
    return parsed.get(key) if isinstance(parsed, Mapping) else None


class Haystack:
    name = "haystack"
    triggers = Triggers(scopes=frozenset({SCOPE}), name_prefixes=("haystack.",))

    def applies(self, span: SpanRecord) -> bool:
        return span.scope_name == SCOPE or span.name.startswith("haystack.")

    def extract(self, span: SpanRecord) -> Sequence[Observation]:
        attrs = span.attributes
        if span.name == TOOL_STEP:
            return [self._tool(span)]
        if span.name == LLM_STEP:
            sent = attrs.get("haystack.agent.step.llm.input")
            got = attrs.get("haystack.agent.step.llm.output")
        elif span.name in COMPONENT_SPANS:
            sent = attrs.get("haystack.component.input")
            got = attrs.get("haystack.component.output")
        else:
            return []
        replies = _field(got, "replies")
        if replies is None:  # not a chat generator (a retriever, a prompt builder...)
            return []
        inputs = chat_messages(_field(sent, "messages"))
        return [
            Exchange(
                self.name,
                span.trace_id,
                span.span_id,
                span.start_ns,
                tuple(inputs),
                tuple(chat_messages(replies)),
            )
        ]

    def _tool(self, span: SpanRecord) -> ToolExecution:
        attrs = span.attributes
        output = attrs.get("haystack.agent.step.tool.output")
        error = attrs.get("haystack.tool.error")
        return ToolExecution(
            convention=self.name,
            trace_id=span.trace_id,
            span_id=span.span_id,
            start_ns=span.start_ns,
            name=str(attrs.get("haystack.tool.name") or span.name),
            arguments=attrs.get("haystack.agent.step.tool.input"),
            call_id=opt_str(attrs.get("haystack.tool.call.id")),
            result=None if output is None else as_text(output),
            failed=span.status_code == 2 or error is True or str(error).lower() == "true",
        )

    def extract_logs(self, logs: Sequence[LogRecordData]) -> Sequence[Observation]:
        return ()
