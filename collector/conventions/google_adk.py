"""Google ADK (scope ``gcp.vertex.agent``).

``call_llm`` spans hold JSON blobs: ``gcp.vertex.agent.llm_request`` (``contents[]`` of
``{role, parts[]}`` with ``text`` / ``function_call`` / ``function_response`` parts) and
``gcp.vertex.agent.llm_response`` (``content.parts[].function_call {id, name, args}``). Gemini gives
no call ids, so ADK mints ``adk-<uuid>`` and strips them from the history it sends back: history
calls then have no id and are matched by name and arguments. ``execute_tool`` spans carry
``gen_ai.tool.name``, ``gen_ai.tool.call.id`` and ``gcp.vertex.agent.tool_call_args``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from collector.conventions.base import (
    Exchange,
    Message,
    Observation,
    ToolCallRef,
    as_list,
    as_text,
    maybe_json,
    norm_role,
    opt_str,
)
from collector.conventions.otel_genai import is_tool_span, tool_execution
from collector.model import LogRecordData, SpanRecord

SCOPE = "gcp.vertex.agent"
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

    def applies(self, span: SpanRecord) -> bool:
        return span.scope_name == SCOPE or REQUEST in span.attributes

    def extract(self, span: SpanRecord) -> Sequence[Observation]:
        attrs = span.attributes
        if is_tool_span(span):
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
        return ()
