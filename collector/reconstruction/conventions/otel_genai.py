"""OpenTelemetry GenAI semantic conventions >= 1.37 (also OpenLLMetry >= 0.55, AI SDK 7, AutoGen).

Model calls carry ``gen_ai.input.messages`` / ``gen_ai.output.messages`` (JSON strings in practice)
whose parts include ``tool_call {id, name, arguments}`` and ``tool_call_response {id, response}``
(``result`` in the spec's registry example and in Pydantic AI); or the same keys on a
``gen_ai.client.inference.operation.details`` span event or log record. Tool runs are
``execute_tool`` spans with ``gen_ai.tool.name`` / ``gen_ai.tool.call.id`` /
``gen_ai.tool.call.arguments``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolscore.collector.reconstruction.conventions.base import (
    Exchange,
    Message,
    Observation,
    ToolExecution,
    Triggers,
    as_text,
    first_attr,
    maybe_json,
    opt_str,
    unflatten,
)
from toolscore.collector.reconstruction.conventions.key_facts import (
    FLAT_COMPLETION,
    FLAT_PROMPT,
    TRACELOOP_KEY,
    key_facts,
)
from toolscore.collector.reconstruction.conventions.messages import read_messages
from toolscore.storage.records import Attributes, LogRecordData, SpanRecord

INPUT = "gen_ai.input.messages"
OUTPUT = "gen_ai.output.messages"
DETAILS_EVENT = "gen_ai.client.inference.operation.details"
OPENLLMETRY_SCOPE = "opentelemetry.instrumentation.openai.v1"  # OpenLLMetry's (contrib: openai_v2)
ARGUMENT_KEYS = (
    "gen_ai.tool.call.arguments",
    "gcp.vertex.agent.tool_call_args",
    "autogen.tool.arguments",
    "tool_arguments",
    "traceloop.entity.input",
    "input.value",
    "gen_ai.prompt",  # LangSmith: the tool run's inputs
)
RESULT_KEYS = (
    "gen_ai.tool.call.result",
    "gcp.vertex.agent.tool_response",
    "tool_response",
    "traceloop.entity.output",
    "output.value",
    "gen_ai.completion",  # LangSmith: the tool run's outputs
)


def label_for(span: SpanRecord, default: str) -> str:
    attrs = span.attributes
    if span.scope_name.startswith(OPENLLMETRY_SCOPE) or "llm.request.type" in attrs:
        return "openllmetry"
    return "openllmetry" if key_facts(attrs) & TRACELOOP_KEY else default


def is_tool_span(span: SpanRecord) -> bool:
    attrs = span.attributes
    if attrs.get("gen_ai.operation.name") == "execute_tool":
        return True
    return "gen_ai.tool.name" in attrs and span.name.startswith("execute_tool")


def has_messages(span: SpanRecord) -> bool:
    attrs = span.attributes
    if INPUT in attrs or OUTPUT in attrs:
        return True
    return bool(span.events) and any(e.name == DETAILS_EVENT for e in span.events)


def tool_execution(span: SpanRecord, convention: str) -> ToolExecution:
    attrs = span.attributes
    name = opt_str(attrs.get("gen_ai.tool.name"))
    if name is None:
        name = span.name.removeprefix("execute_tool").strip() or span.name
    arguments = first_attr(attrs, ARGUMENT_KEYS)
    result = first_attr(attrs, RESULT_KEYS)
    return ToolExecution(
        convention=convention,
        trace_id=span.trace_id,
        span_id=span.span_id,
        start_ns=span.start_ns,
        name=name,
        arguments=arguments,
        call_id=opt_str(attrs.get("gen_ai.tool.call.id")) or _wrapped_call_id(arguments),
        result=None if result is None else _unwrap_result(result),
        failed=span.status_code == 2,
    )


def _wrapped_call_id(arguments: object) -> str | None:
    """OpenLLMetry's LangChain wrapper keeps the call id in ``kwargs.tool_call_id``."""
    wrapper = maybe_json(arguments)
    if isinstance(wrapper, Mapping) and ("inputs" in wrapper or "input_str" in wrapper):
        kwargs = wrapper.get("kwargs")
        if isinstance(kwargs, Mapping):
            return opt_str(kwargs.get("tool_call_id"))
    return None


_RESULT_WRAPPER = frozenset({"output", "kwargs"})


def _unwrap_result(result: object) -> str:
    """OpenLLMetry's LangChain wrapper ``{"output": <serialised ToolMessage>, "kwargs"}``."""
    wrapper = maybe_json(result)
    if isinstance(wrapper, Mapping) and "output" in wrapper and set(wrapper) <= _RESULT_WRAPPER:
        output = wrapper["output"]
        if isinstance(output, Mapping) and isinstance(output.get("kwargs"), Mapping):
            return as_text(output["kwargs"].get("content"))
        return as_text(output)
    return as_text(result)


def parse_messages(value: object) -> tuple[Message, ...]:
    """Parse a message list in any encoding (:mod:`.messages`)."""
    return read_messages(value)


def exchange_from(
    attrs: Attributes, *, convention: str, trace_id: str, span_id: str | None, sort_ns: int
) -> Exchange:
    flat = _flattened(attrs)
    return Exchange(
        convention=convention,
        trace_id=trace_id,
        span_id=span_id,
        sort_ns=sort_ns,
        inputs=_messages(attrs, INPUT, LEGACY_INPUT, flat, calls_first=False),
        outputs=_messages(attrs, OUTPUT, LEGACY_OUTPUT, flat, calls_first=True),
        response_id=opt_str(attrs.get("gen_ai.response.id")),
    )


# An invocation (an agent run, a workflow, a conversation turn: the 2026 conventions'
# ``gen_ai.invocation.internal`` spans) sums up the model calls under it, all steps in one
# message: the model calls' own spans are the record, the summary only history after them.
INVOCATIONS = frozenset(
    {"invoke_agent", "invoke_workflow", "handle_conversation_turn", "create_agent"}
)


def as_history(exchange: Exchange, end_ns: int) -> Exchange:
    """``exchange`` as history only, placed at ``end_ns``: what it shows that no model call
    showed still counts, after them; nothing it repeats counts twice."""
    return Exchange(
        exchange.convention,
        exchange.trace_id,
        exchange.span_id,
        end_ns,
        inputs=exchange.inputs + exchange.outputs,
        response_id=None,
    )


LEGACY_INPUT = "gen_ai.prompt"
LEGACY_OUTPUT = "gen_ai.completion"
_FLAT_SETS = {
    (False, False): frozenset(),
    (True, False): frozenset({LEGACY_INPUT}),
    (False, True): frozenset({LEGACY_OUTPUT}),
    (True, True): frozenset({LEGACY_INPUT, LEGACY_OUTPUT}),
}
# Operations of a model call: only their legacy ``gen_ai.prompt`` / ``gen_ai.completion`` are
# messages (LangSmith writes a chain's or a tool's inputs and outputs there too).
MODEL_OPERATIONS = frozenset({"chat", "text_completion", "generate_content", "completion"})


def _flattened(attrs: Attributes) -> frozenset[str]:
    """Which legacy attributes the span carries flattened (``gen_ai.completion.{i}.*``)."""
    facts = key_facts(attrs)
    return _FLAT_SETS[(bool(facts & FLAT_PROMPT), bool(facts & FLAT_COMPLETION))]


def _messages(
    attrs: Attributes, current: str, legacy: str, flat: frozenset[str], *, calls_first: bool
) -> tuple[Message, ...]:
    """The messages of the first encoding the span carries that serves: the current attribute,
    else the legacy one as a JSON document (LangSmith: LangChain messages, an ``LLMResult``) or
    flattened (``gen_ai.completion.{i}.*``: OpenLLMetry, LiteLLM). For outputs, the first that
    shows calls: an instrumentation may leave the parts of one empty and write the calls in
    another."""
    first = read_messages(attrs.get(current))
    if first and (not calls_first or any(m.tool_calls for m in first)):
        return first
    if legacy not in attrs and legacy not in flat:
        return first
    second = read_messages(unflatten(attrs, legacy))
    if calls_first and any(m.tool_calls for m in second):
        return second
    return first or second


def operation(attrs: Attributes) -> str:
    """``gen_ai.operation.name`` as text ("" when absent or not a string)."""
    value = attrs.get("gen_ai.operation.name")
    return value if isinstance(value, str) else ""


def has_legacy_messages(span: SpanRecord) -> bool:
    """A model call whose messages are only in ``gen_ai.prompt`` / ``gen_ai.completion``."""
    attrs = span.attributes
    model_call = operation(attrs) in MODEL_OPERATIONS or (attrs.get("langsmith.span.kind") == "llm")
    return model_call and (LEGACY_INPUT in attrs or LEGACY_OUTPUT in attrs)


class OtelGenAI:
    name = "otel_genai"
    triggers = Triggers(
        keys=frozenset({"gen_ai.operation.name", "gen_ai.tool.name", INPUT, OUTPUT}), events=True
    )

    def applies(self, span: SpanRecord) -> bool:
        return is_tool_span(span) or has_messages(span) or has_legacy_messages(span)

    def extract(self, span: SpanRecord) -> Sequence[Observation]:
        label = label_for(span, self.name)
        if is_tool_span(span):
            return [tool_execution(span, label)]
        sources: list[Attributes] = [span.attributes]
        sources += [e.attributes for e in span.events if e.name == DETAILS_EVENT]
        out: list[Observation] = []
        summary = operation(span.attributes) in INVOCATIONS
        for attrs in sources:
            if (
                INPUT in attrs
                or OUTPUT in attrs
                or (attrs is span.attributes and has_legacy_messages(span))
            ):
                merged = dict(attrs)
                merged.setdefault("gen_ai.response.id", span.attributes.get("gen_ai.response.id"))
                exchange = exchange_from(
                    merged,
                    convention=label,
                    trace_id=span.trace_id,
                    span_id=span.span_id,
                    sort_ns=span.start_ns,
                )
                out.append(as_history(exchange, span.end_ns) if summary else exchange)
        return out

    def extract_logs(self, logs: Sequence[LogRecordData]) -> Sequence[Observation]:
        # Google ADK's records need its own treatment
        # (collector.reconstruction.conventions.google_adk)
        return details_exchanges(
            [log for log in logs if log.scope_name not in OWN_SCOPES], self.name
        )


OWN_SCOPES = frozenset({"gcp.vertex.agent"})


def details_exchanges(logs: Sequence[LogRecordData], convention: str) -> list[Observation]:
    """Exchanges from ``gen_ai.client.inference.operation.details`` log records."""
    out: list[Observation] = []
    for log in logs:
        if log.event_name != DETAILS_EVENT or not log.trace_id:
            continue
        attrs: dict[str, Any] = dict(log.attributes)
        if isinstance(log.body, Mapping):
            attrs.update({k: v for k, v in log.body.items() if k in (INPUT, OUTPUT)})
        out.append(
            exchange_from(
                attrs,
                convention=convention,
                trace_id=log.trace_id,
                span_id=log.span_id,
                sort_ns=log.time_ns or log.observed_time_ns,
            )
        )
    return out
