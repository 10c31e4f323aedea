"""Real LangChain runs reconstruct correctly, under OpenInference and under OpenLLMetry.

A fake chat model scripted with ``AIMessage`` tool calls drives a plain tool-calling loop (no
network), instrumented by ``openinference-instrumentation-langchain`` or by OpenLLMetry's
``opentelemetry-instrumentation-langchain``. The session id travels as LangChain run metadata,
which both instrumentations export. Set ``TOOLSCORE_RECORD=1`` to refresh the saved copies in
tests/fixtures/recorded/.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import BaseTool, tool
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.instrumentation.langchain import LangchainInstrumentor as TraceloopInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.collector.recording import RECORDED, save_recording, span_from_sdk
from toolscore.collector.reconstruction.conversation_keys import (
    DEFAULT_CONVERSATION_KEYS,
    conversation_id_for_trace,
)
from toolscore.collector.reconstruction.rebuild import reconstruct
from toolscore.storage.records import SpanRecord

QUESTION = "What's the weather in Paris and the time in Tokyo?"
PARALLEL = [
    {"name": "get_weather", "args": {"city": "Paris"}},
    {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}},
]


SESSION_KEY = {
    "openinference": "session.id",
    "openllmetry": "traceloop.association.properties.session_id",
}
CONVENTION = {"openinference": "openinference", "openllmetry": "openllmetry"}


class Exporter(InMemorySpanExporter):
    mode: str = ""


@pytest.fixture(scope="module", params=["openinference", "openllmetry"])
def instrumented(request: pytest.FixtureRequest) -> Iterator[Exporter]:
    memory = Exporter()
    memory.mode = request.param
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    instrumentor: Any = (
        LangChainInstrumentor() if request.param == "openinference" else TraceloopInstrumentor()
    )
    instrumentor.instrument(tracer_provider=provider)
    yield memory
    instrumentor.uninstrument()
    provider.shutdown()


@pytest.fixture
def exporter(instrumented: Exporter) -> Exporter:
    instrumented.clear()
    return instrumented


class FakeToolModel(GenericFakeChatModel):
    """The stock fake chat model, accepting ``bind_tools`` like a real provider model."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"18C in {city}"


@tool
def get_time(timezone: str) -> str:
    """Local time in a timezone."""
    return f"09:00 in {timezone}"


TOOLS: dict[str, BaseTool] = {t.name: t for t in (get_weather, get_time)}


def run_agent(
    responses: list[AIMessage],
    questions: list[str],
    *,
    session: str,
    pass_tool_call: bool = True,
) -> None:
    """A minimal tool-calling agent; each question is one run (one trace)."""
    model = FakeToolModel(messages=iter(responses)).bind_tools(list(TOOLS.values()))
    history: list[BaseMessage] = []

    def agent(question: str) -> str:
        history.append(HumanMessage(question))
        while True:
            ai = model.invoke(history)
            history.append(ai)
            if not ai.tool_calls:
                return str(ai.content)
            for call in ai.tool_calls:
                selected = TOOLS[call["name"]]
                if pass_tool_call:  # returns a ToolMessage carrying the call id
                    history.append(selected.invoke(call))
                else:  # plain args: the tool span knows nothing of the call id
                    from langchain_core.messages import ToolMessage

                    output = selected.invoke(call["args"])
                    history.append(ToolMessage(str(output), tool_call_id=call["id"] or ""))

    for question in questions:
        RunnableLambda(agent).invoke(question, config={"metadata": {"session_id": session}})


def tool_spans_of(spans: list[SpanRecord]) -> list[SpanRecord]:
    return [
        s
        for s in spans
        if s.attributes.get("openinference.span.kind") == "TOOL"
        or s.attributes.get("gen_ai.operation.name") == "execute_tool"
    ]


def tool_argument(span: SpanRecord) -> str:
    """The single argument value as the tool span shows it (bare, or in OpenLLMetry's wrapper)."""
    if "input.value" in span.attributes:
        return str(span.attributes["input.value"])
    wrapper = json.loads(span.attributes["gen_ai.tool.call.arguments"])
    return str(next(iter(wrapper["inputs"].values())))


def spans_of(exporter: Exporter) -> list[SpanRecord]:
    return [span_from_sdk(s) for s in exporter.get_finished_spans()]


def maybe_record(
    exporter: Exporter, name: str, spans: list[SpanRecord], expected: list[dict[str, Any]]
) -> None:
    if os.environ.get("TOOLSCORE_RECORD") == "1":
        note = f"Recorded from langchain-core under {exporter.mode}; {name}."
        path = RECORDED / f"langchain-{exporter.mode}-{name}.json"
        save_recording(path, spans, note=note, expected=expected)


def ai_calls(*calls: tuple[str, dict[str, Any], str]) -> AIMessage:
    return AIMessage(
        content="",
        tool_calls=[{"name": n, "args": a, "id": i, "type": "tool_call"} for n, a, i in calls],
    )


def test_parallel_calls_with_tool_messages(exporter: Exporter) -> None:
    responses = [
        ai_calls(
            ("get_weather", {"city": "Paris"}, "call_w1"),
            ("get_time", {"timezone": "Asia/Tokyo"}, "call_t2"),
        ),
        AIMessage(content="18C and 09:00"),
    ]
    run_agent(responses, [QUESTION], session="sess-lc")
    spans = spans_of(exporter)
    result = reconstruct(spans)
    assert [{"name": c.name, "args": c.arguments} for c in result.tool_calls] == PARALLEL
    assert [c.call_id for c in result.tool_calls] == ["call_w1", "call_t2"]
    tool_spans = {s.span_id for s in tool_spans_of(spans)}
    assert {c.span_id for c in result.tool_calls} == tool_spans  # each attached to its tool span
    assert {c.convention for c in result.tool_calls} == {CONVENTION[exporter.mode]}
    assert [m["type"] for m in result.messages] == ["human", "ai", "tool", "tool", "ai"]
    assert [m["content"] for m in result.messages if m["type"] == "tool"] == [
        "18C in Paris",
        "09:00 in Asia/Tokyo",
    ]
    assert conversation_id_for_trace(spans, DEFAULT_CONVERSATION_KEYS) == "sess-lc"
    assert conversation_id_for_trace(spans, [SESSION_KEY[exporter.mode]]) == "sess-lc"
    assert result.warnings == ()
    maybe_record(exporter, "parallel", spans, PARALLEL)


def test_tool_spans_without_call_id_attach_by_the_bare_argument_value(
    exporter: Exporter,
) -> None:
    responses = [
        ai_calls(
            ("get_time", {"timezone": "Europe/Paris"}, "c1"),
            ("get_time", {"timezone": "Asia/Tokyo"}, "c2"),
        ),
        AIMessage(content="done"),
    ]
    run_agent(responses, [QUESTION], session="sess-bare", pass_tool_call=False)
    spans = spans_of(exporter)
    if exporter.mode == "openinference":  # the library loses the parameter name
        inputs = [s.attributes.get("input.value") for s in tool_spans_of(spans)]
        assert inputs == ["Europe/Paris", "Asia/Tokyo"]
    result = reconstruct(spans)
    assert [(c.name, c.arguments) for c in result.tool_calls] == [
        ("get_time", {"timezone": "Europe/Paris"}),
        ("get_time", {"timezone": "Asia/Tokyo"}),
    ]
    by_input = {s.span_id: tool_argument(s) for s in tool_spans_of(spans)}
    assert [by_input[c.span_id or ""] for c in result.tool_calls] == ["Europe/Paris", "Asia/Tokyo"]
    assert result.warnings == ()


def test_multi_turn_over_two_traces(exporter: Exporter) -> None:
    responses = [
        ai_calls(("get_weather", {"city": "Paris"}, "c1")),
        AIMessage(content="18C"),
        ai_calls(("get_time", {"timezone": "Asia/Tokyo"}, "c2")),
        AIMessage(content="09:00"),
    ]
    run_agent(responses, ["Weather in Paris?", "And the time in Tokyo?"], session="sess-mt")
    spans = spans_of(exporter)
    assert len({s.trace_id for s in spans}) == 2
    result = reconstruct(spans[::-1])
    assert [{"name": c.name, "args": c.arguments} for c in result.tool_calls] == PARALLEL
    assert [m["type"] for m in result.messages] == [
        "human",
        "ai",
        "tool",
        "ai",
        "human",
        "ai",
        "tool",
        "ai",
    ]
    maybe_record(exporter, "multi-turn", spans, PARALLEL)
