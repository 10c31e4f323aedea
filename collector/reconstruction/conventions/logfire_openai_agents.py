"""Logfire's OpenAI Agents SDK integration (``logfire.instrument_openai_agents()``).

Not the OTel GenAI names (docs/conventions.md): scope ``logfire.openai_agents``, span
names are Logfire message templates (also in ``logfire.msg_template``), and the attributes are
the SDK's exported span data, with non-string values JSON-encoded and described by
``logfire.json_schema`` (a property with a ``type`` was encoded; ``{}`` is a plain value).

- ``Function: {name}``: a tool run. ``name``, ``input`` (the model's raw argument string),
  ``output``; **no call id** (it is attached to the model's call by name and arguments). Without
  ``trace_include_sensitive_data`` the input and output are null.
- ``Responses API with {gen_ai.request.model!r}``: one Responses API call. ``raw_input`` holds the
  input items (a string for a bare user message; recorded only with sensitive data on) and
  ``response`` the Response, whose ``output`` items hold the ``function_call`` items (``call_id``,
  ``name``, ``arguments``) in the model's order.
- ``Chat completion with {gen_ai.request.model!r}``: one Chat Completions call; ``input`` and
  ``output`` are OpenAI chat messages.
- The root ``OpenAI Agents trace: {name}`` carries ``group_id`` (the SDK's thread id: a
  conversation key) and ``agent_trace_id``.
- Agent, turn, task, guardrail and handoff spans carry no call. A handoff counts through the
  model's ``transfer_to_<agent>`` call in the response (a control call: left out unless
  ``--control-calls include=handoff``);
  the ``Handoff: {from_agent} → {to_agent}`` span names the agents, not the tool the model
  called (which ``tool_name_override`` may rename), so it is not turned into a call, as
  OpenInference's ``handoff to X`` spans are not: when only tool spans were recorded (a custom
  model, or no sensitive data), handoffs are not seen.
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
from toolscore.collector.reconstruction.conventions.otel_genai import parse_messages
from toolscore.storage.plumbing.jsoncodec import json_loads
from toolscore.storage.records import Attributes, LogRecordData, SpanRecord

SCOPE = "logfire.openai_agents"
TEMPLATE = "logfire.msg_template"
FUNCTION = "Function: {name}"
RESPONSES = ("Responses API", "Responses API with {gen_ai.request.model!r}")
CHAT = "Chat completion with {gen_ai.request.model!r}"
# the integration's templates (logfire >= 3); ``logfire.instrument_openai()`` uses others
TEMPLATES = frozenset(
    {
        FUNCTION,
        CHAT,
        *RESPONSES,
        "Agent run: {name!r}",
        "Handoff: {from_agent} → {to_agent}",
        "Guardrail {name!r} {triggered=}",
        "Custom span: {name}",
        "MCP: list tools from server {server}",
        "OpenAI Agents trace: {name}",
        "OpenAI agents: {type} span",
    }
)
CALL_ITEMS = {"function_call": "arguments", "custom_tool_call": "input"}  # client-side tools
RESULT_ITEMS = frozenset({"function_call_output", "custom_tool_call_output"})


def _schema(attrs: Attributes) -> Mapping[str, Any]:
    schema = maybe_json(attrs.get("logfire.json_schema"))
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    return props if isinstance(props, Mapping) else {}


def _value(attrs: Attributes, key: str, schema: Mapping[str, Any], *, encoded: bool) -> Any:
    """An attribute as the SDK had it: decoded when Logfire JSON-encoded it.

    ``encoded``: whether the key usually holds an encoded object, for spans without a schema.
    A value that does not decode (truncated) is returned as found.
    """
    value = attrs.get(key)
    if not isinstance(value, str):
        return value
    spec = schema.get(key)
    if (isinstance(spec, Mapping) and "type" in spec) or (spec is None and encoded):
        try:
            return json_loads(value)
        except ValueError:
            return value
    return value


def _response_messages(items: Any) -> tuple[Message, ...]:
    """Responses API items → messages. Consecutive calls (and the assistant text before them)
    form one assistant message: the parallel calls of one model turn, in the model's order."""
    if isinstance(items, str):
        return (Message("user", items),)
    out: list[Message] = []
    text: str | None = None  # the assistant message being built
    calls: list[ToolCallRef] = []

    def flush() -> None:
        nonlocal text
        if text is not None or calls:
            out.append(Message("assistant", text or "", tuple(calls)))
        text = None
        calls.clear()

    for item in as_list(items):
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type") or ("message" if "role" in item else None)
        if kind in CALL_ITEMS:
            calls.append(
                ToolCallRef(
                    name=str(item.get("name") or ""),
                    arguments=item.get(CALL_ITEMS[kind]),
                    call_id=opt_str(item.get("call_id")),
                )
            )
        elif kind in RESULT_ITEMS:
            flush()
            out.append(
                Message(
                    "tool",
                    as_text(maybe_json(item.get("output"))),
                    tool_call_id=opt_str(item.get("call_id")),
                )
            )
        elif kind == "message":
            role = norm_role(item.get("role"))
            flush()
            if role == "assistant":
                text = as_text(item.get("content"))
            else:
                out.append(Message(role, as_text(item.get("content"))))
        # reasoning, web/file search, MCP, computer use...: not calls of the app's own tools
    flush()
    return tuple(out)


class LogfireOpenAIAgents:
    name = "logfire_openai_agents"
    triggers = Triggers(scopes=frozenset({SCOPE}), keys=frozenset({TEMPLATE}))

    def applies(self, span: SpanRecord) -> bool:
        return span.scope_name == SCOPE or span.attributes.get(TEMPLATE) in TEMPLATES

    def extract(self, span: SpanRecord) -> Sequence[Observation]:
        attrs = span.attributes
        template = attrs.get(TEMPLATE) or span.name
        schema = _schema(attrs)
        if template == FUNCTION:
            output = _value(attrs, "output", schema, encoded=False)
            return [
                ToolExecution(
                    convention=self.name,
                    trace_id=span.trace_id,
                    span_id=span.span_id,
                    start_ns=span.start_ns,
                    name=str(attrs.get("name") or ""),
                    arguments=_value(attrs, "input", schema, encoded=False),
                    call_id=None,
                    result=None if output is None else as_text(output),
                    failed=span.status_code == 2 or "error" in attrs,
                )
            ]
        if template in RESPONSES:
            response = _value(attrs, "response", schema, encoded=True)
            response = response if isinstance(response, Mapping) else {}
            inputs = _response_messages(_value(attrs, "raw_input", schema, encoded=True))
            outputs = _response_messages(response.get("output"))
            response_id = attrs.get("gen_ai.response.id") or response.get("id")
        elif template == CHAT:
            inputs = parse_messages(_value(attrs, "input", schema, encoded=True))
            outputs = parse_messages(_value(attrs, "output", schema, encoded=True))
            response_id = None  # the SDK does not export the completion's id
        else:
            return []
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
                response_id=opt_str(response_id),
            )
        ]

    def extract_logs(self, logs: Sequence[LogRecordData]) -> Sequence[Observation]:
        return ()
