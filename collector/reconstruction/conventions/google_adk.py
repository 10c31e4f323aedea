"""Google ADK (scope ``gcp.vertex.agent``).

ADK 2.x (seen with 2.13): model calls are ``generate_content {model}`` spans without content; the
messages travel in ``gen_ai.client.inference.operation.details`` log records (attributes
``gen_ai.input.messages`` / ``gen_ai.output.messages`` as structured lists, only with
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``), whose tool-call ids are per-message
positions (``get_weather_0``) unrelated to the tool spans' ``adk-…`` ids and reused across turns:
they are dropped, so calls are deduplicated and attached by name and arguments. Parallel tool
runs add an ``execute_tool (merged)`` span, which is not a call.

ADK 1.x:
``call_llm`` spans hold JSON blobs: ``gcp.vertex.agent.llm_request`` (``contents[]`` of
``{role, parts[]}`` with ``text`` / ``function_call`` / ``function_response`` parts) and
``gcp.vertex.agent.llm_response`` (``content.parts[].function_call {id, name, args}``). Gemini gives
no call ids, so ADK mints ``adk-<uuid>`` and strips them from the history it sends back: history
calls then have no id and are matched by name and arguments. ``execute_tool`` spans carry
``gen_ai.tool.name``, ``gen_ai.tool.call.id`` and ``gcp.vertex.agent.tool_call_args``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from toolscore.collector.reconstruction.conventions.base import (
    Exchange,
    Message,
    Observation,
    ToolCallRef,
    Triggers,
    as_list,
    as_text,
    maybe_json,
    norm_role,
    opt_str,
)
from toolscore.collector.reconstruction.conventions.otel_genai import (
    details_exchanges,
    is_tool_span,
    tool_execution,
)
from toolscore.storage.records import LogRecordData, SpanRecord

SCOPE = "gcp.vertex.agent"
MERGED = "(merged tools)"
REQUEST = "gcp.vertex.agent.llm_request"
RESPONSE = "gcp.vertex.agent.llm_response"


def _content_messages(content: object) -> list[Message]:
    if not isinstance(content, Mapping):
        return []
    role = norm_role(content.get("role"))
    texts: list[str] = []
    calls: list[ToolCallRef] = []
    results: list[Message] = []
    for part in as_list(content.get("parts")):
        if not isinstance(part, Mapping):
            continue
        if isinstance(part.get("text"), str):
            texts.append(part["text"])
        call = part.get("function_call") or part.get("functionCall")
        if isinstance(call, Mapping):
            calls.append(
                ToolCallRef(str(call.get("name") or ""), call.get("args"), opt_str(call.get("id")))
            )
        response = part.get("function_response") or part.get("functionResponse")
        if isinstance(response, Mapping):
            results.append(
                Message(
                    "tool",
                    as_text(response.get("response")),
                    tool_call_id=opt_str(response.get("id")),
                )
            )
    out: list[Message] = []
    if texts or calls or not results:
        out.append(Message("assistant" if calls else role, "\n".join(texts), tuple(calls)))
    return out + results


class GoogleADK:
    name = "google_adk"
    triggers = Triggers(scopes=frozenset({SCOPE}), keys=frozenset({REQUEST}))

    def applies(self, span: SpanRecord) -> bool:
        return span.scope_name == SCOPE or REQUEST in span.attributes

    def extract(self, span: SpanRecord) -> Sequence[Observation]:
        attrs = span.attributes
        if is_tool_span(span):
            if span.attributes.get("gen_ai.tool.name") == MERGED:
                return []
            return [tool_execution(span, self.name)]
        response = maybe_json(attrs.get(RESPONSE))
        request = maybe_json(attrs.get(REQUEST))
        inputs: list[Message] = []
        if isinstance(request, Mapping):
            for content in as_list(request.get("contents")):
                inputs.extend(_content_messages(content))
        outputs: list[Message] = []
        if isinstance(response, Mapping):
            outputs.extend(_content_messages(response.get("content")))
        if not inputs and not outputs:
            return []
        return [
            Exchange(
                self.name, span.trace_id, span.span_id, span.start_ns, tuple(inputs), tuple(outputs)
            )
        ]

    def extract_logs(self, logs: Sequence[LogRecordData]) -> Sequence[Observation]:
        mine = [log for log in logs if log.scope_name == SCOPE]
        return [
            _without_synthetic_ids(e)
            for e in details_exchanges(mine, self.name)
            if isinstance(e, Exchange)
        ]


def _without_synthetic_ids(exchange: Exchange) -> Exchange:
    def strip(message: Message) -> Message:
        calls = tuple(ToolCallRef(c.name, c.arguments, None) for c in message.tool_calls)
        return Message(message.role, message.content, calls, None)

    return Exchange(
        exchange.convention,
        exchange.trace_id,
        exchange.span_id,
        exchange.sort_ns,
        tuple(strip(m) for m in exchange.inputs),
        tuple(strip(m) for m in exchange.outputs),
        exchange.response_id,
    )
