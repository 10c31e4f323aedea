"""Real Pydantic AI agents (scripted ``FunctionModel``, no network) reconstruct correctly.

Spans come from the real library through the OTel SDK's in-memory exporter, converted to
SpanRecord as the receiver stores them. Set ``TOOLSCORE_RECORD=1`` to refresh the saved copies in
tests/fixtures/recorded/ (used by the fast tests in test_recorded.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from tests.collector.recording import RECORDED, save_recording, span_from_sdk
from toolscore.collector.reconstruction.conversation_keys import (
    DEFAULT_CONVERSATION_KEYS,
    conversation_id_for_trace,
)
from toolscore.collector.reconstruction.rebuild import reconstruct
from toolscore.storage.records import SpanRecord

QUESTION = "What's the weather in Paris and the time in Tokyo?"
Script = Callable[[list[ModelMessage], AgentInfo], ModelResponse]


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider))
    yield memory
    Agent.instrument_all(False)
    provider.shutdown()


def weather_agent(script: Script) -> Agent[None, str]:
    agent: Agent[None, str] = Agent(FunctionModel(script), name="weather_agent")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        return f"18C in {city}"

    @agent.tool_plain
    def get_time(timezone: str) -> str:
        return f"09:00 in {timezone}"

    return agent


def spans_of(exporter: InMemorySpanExporter) -> list[SpanRecord]:
    return [span_from_sdk(s) for s in exporter.get_finished_spans()]


def maybe_record(name: str, spans: list[SpanRecord], expected: list[dict[str, Any]]) -> None:
    if os.environ.get("TOOLSCORE_RECORD") == "1":
        note = f"Recorded from pydantic-ai (FunctionModel) by {__name__}; scenario {name}."
        save_recording(RECORDED / f"pydantic-ai-{name}.json", spans, note=note, expected=expected)


def turn_based(*turns: list[ModelResponse]) -> Script:
    """Answer the n-th model request of the run with the n-th scripted response."""
    responses = [r for turn in turns for r in turn]
    count = {"n": 0}

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        response = responses[min(count["n"], len(responses) - 1)]
        count["n"] += 1
        return response

    return script


def call(name: str, args: str | dict[str, Any], call_id: str) -> ToolCallPart:
    return ToolCallPart(name, args, tool_call_id=call_id)


def test_parallel_calls(exporter: InMemorySpanExporter) -> None:
    script = turn_based(
        [
            ModelResponse(
                parts=[
                    call("get_weather", '{"city": "Paris"}', "call_w1"),
                    call("get_time", {"timezone": "Asia/Tokyo"}, "call_t2"),
                ]
            ),
            ModelResponse(parts=[TextPart("18C and 09:00")]),
        ]
    )
    weather_agent(script).run_sync(QUESTION, conversation_id="conv-par")
    spans = spans_of(exporter)
    result = reconstruct(spans)
    expected = [
        {"name": "get_weather", "args": {"city": "Paris"}},
        {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}},
    ]
    assert [{"name": c.name, "args": c.arguments} for c in result.tool_calls] == expected
    assert [c.call_id for c in result.tool_calls] == ["call_w1", "call_t2"]
    assert {c.convention for c in result.tool_calls} == {"pydantic_ai"}
    assert [m["type"] for m in result.messages] == ["human", "ai", "tool", "tool", "ai"]
    assert result.first_user_message == QUESTION
    assert conversation_id_for_trace(spans, DEFAULT_CONVERSATION_KEYS) == "conv-par"
    assert result.warnings == ()
    maybe_record("parallel", spans, expected)


def test_sequential_single_calls(exporter: InMemorySpanExporter) -> None:
    script = turn_based(
        [
            ModelResponse(parts=[call("get_weather", {"city": "Paris"}, "c1")]),
            ModelResponse(parts=[call("get_time", {"timezone": "Asia/Tokyo"}, "c2")]),
            ModelResponse(parts=[TextPart("done")]),
        ]
    )
    weather_agent(script).run_sync(QUESTION)
    result = reconstruct(spans_of(exporter))
    assert [(c.name, c.arguments) for c in result.tool_calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_time", {"timezone": "Asia/Tokyo"}),
    ]
    assert [m["type"] for m in result.messages] == ["human", "ai", "tool", "ai", "tool", "ai"]


def test_multi_turn_conversation_over_two_traces(exporter: InMemorySpanExporter) -> None:
    script = turn_based(
        [
            ModelResponse(parts=[call("get_weather", {"city": "Paris"}, "c1")]),
            ModelResponse(parts=[TextPart("18C")]),
        ],
        [
            ModelResponse(parts=[call("get_time", {"timezone": "Asia/Tokyo"}, "c2")]),
            ModelResponse(parts=[TextPart("09:00")]),
        ],
    )
    agent = weather_agent(script)
    first = agent.run_sync("Weather in Paris?", conversation_id="conv-mt")
    agent.run_sync(
        "And the time in Tokyo?", message_history=first.all_messages(), conversation_id="conv-mt"
    )
    spans = spans_of(exporter)
    assert len({s.trace_id for s in spans}) == 2
    result = reconstruct(list(reversed(spans)))
    expected = [
        {"name": "get_weather", "args": {"city": "Paris"}},
        {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}},
    ]
    assert [{"name": c.name, "args": c.arguments} for c in result.tool_calls] == expected
    assert [m["content"] for m in result.messages if m["type"] == "human"] == [
        "Weather in Paris?",
        "And the time in Tokyo?",
    ]
    maybe_record("multi-turn", spans, expected)


def test_malformed_arguments_are_flagged_and_the_retry_counts(
    exporter: InMemorySpanExporter,
) -> None:
    script = turn_based(
        [
            ModelResponse(parts=[call("get_weather", '{"city": "Par', "c1")]),  # cut short
            ModelResponse(parts=[call("get_weather", '{"city": "Paris"}', "c2")]),
            ModelResponse(parts=[TextPart("18C")]),
        ]
    )
    weather_agent(script).run_sync("Weather in Paris?")
    spans = spans_of(exporter)
    result = reconstruct(spans)
    first, second = result.tool_calls
    assert (first.name, first.arguments, first.arguments_ok) == ("get_weather", None, False)
    assert first.arguments_raw == '{"city": "Par'
    assert (second.arguments, second.arguments_ok) == ({"city": "Paris"}, True)
    assert any("call #0 get_weather" in w for w in result.warnings)
    maybe_record(
        "malformed",
        spans,
        [{"name": "get_weather", "args": {}}, {"name": "get_weather", "args": {"city": "Paris"}}],
    )


@pytest.mark.parametrize("version", [2, 3, 4, 5, 6])
@pytest.mark.filterwarnings("ignore:Instrumentation format versions")
def test_every_instrumentation_format_gives_the_same_calls(version: int) -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider, version=version))  # type: ignore[arg-type]
    try:
        script = turn_based(
            [
                ModelResponse(
                    parts=[
                        call("get_weather", '{"city": "Paris"}', "call_w1"),
                        call("get_time", {"timezone": "Asia/Tokyo"}, "call_t2"),
                    ]
                ),
                ModelResponse(parts=[TextPart("18C and 09:00")]),
            ]
        )
        weather_agent(script).run_sync(QUESTION)
    finally:
        Agent.instrument_all(False)
        provider.shutdown()
    spans = spans_of(memory)
    tool_spans = [s for s in spans if s.attributes.get("gen_ai.operation.name") == "execute_tool"]
    assert len(tool_spans) == 2
    result = reconstruct(spans)
    assert [(c.name, c.arguments, c.call_id) for c in result.tool_calls] == [
        ("get_weather", {"city": "Paris"}, "call_w1"),
        ("get_time", {"timezone": "Asia/Tokyo"}, "call_t2"),
    ]
    assert [c.span_id for c in result.tool_calls] == [
        next(s.span_id for s in tool_spans if s.attributes["gen_ai.tool.name"] == name)
        for name in ("get_weather", "get_time")
    ]
    assert [m["type"] for m in result.messages] == ["human", "ai", "tool", "tool", "ai"]
    assert result.warnings == ()
