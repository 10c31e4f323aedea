"""Quickstart agent: a small Pydantic AI agent whose traces go to ``toolscore serve`` over OTLP.

The "model" is a scripted ``FunctionModel``, so no API key or network is needed: for each
question it asks for the tool calls below (one of them deliberately wrong), then answers. The
agent exports its spans with the standard OpenTelemetry OTLP/HTTP exporter; toolscore groups
them into conversations, matches each to an expectation (examples/expectations.yaml) and scores
its tool calls.

    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 python examples/quickstart/agent.py

Like any OpenTelemetry program it reads the standard ``OTEL_EXPORTER_OTLP_*`` variables (the
default endpoint is http://localhost:4318); ``--endpoint URL`` overrides them.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

# What the scripted model "decides" for each question: the tool calls of its first answer.
SCRIPT: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "What's the weather in Paris and the time in Tokyo?": [
        ("get_weather", {"city": "Paris"}),
        ("get_time", {"timezone": "Asia/Tokyo"}),
    ],
    # A mistake on purpose: the expectation wants timezone "Asia/Tokyo".
    "What time is it in Tokyo?": [("get_time", {"timezone": "Tokyo"})],
    # Another one: the expectation wants days=3.
    "Will it rain in Berlin over the next 3 days?": [
        ("get_forecast", {"city": "Berlin", "days": 5})
    ],
}

# (question, conversation id): the forecast conversation is matched by its id (see
# examples/expectations.yaml), the others by their first user message.
CONVERSATIONS = [
    ("What's the weather in Paris and the time in Tokyo?", "demo-weather-1"),
    ("What time is it in Tokyo?", "demo-time-1"),
    ("Will it rain in Berlin over the next 3 days?", "demo-forecast-1"),
]


def scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Ask for the scripted tool calls, then answer once their results are in."""
    last = messages[-1]
    if isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts):
        results = [p.content for p in last.parts if isinstance(p, ToolReturnPart)]
        return ModelResponse(parts=[TextPart(" ".join(str(r) for r in results))])
    question = next(
        str(p.content)
        for m in reversed(messages)
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart)
    )
    calls = SCRIPT.get(question, [])
    if not calls:
        return ModelResponse(parts=[TextPart("I cannot help with that.")])
    return ModelResponse(
        parts=[
            ToolCallPart(name, json.dumps(args), tool_call_id=f"call_{i}")
            for i, (name, args) in enumerate(calls)
        ]
    )


def build_agent() -> Agent[None, str]:
    agent: Agent[None, str] = Agent(FunctionModel(scripted_model), name="weather_agent")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        return f"18C and cloudy in {city}"

    @agent.tool_plain
    def get_time(timezone: str) -> str:
        return f"09:00 in {timezone}"

    @agent.tool_plain
    def get_forecast(city: str, days: int) -> str:
        return f"rain on day 2 of {days} in {city}"

    return agent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--endpoint",
        help="toolscore serve's OTLP/HTTP address (default: OTEL_EXPORTER_OTLP_ENDPOINT, "
        "else http://localhost:4318)",
    )
    args = parser.parse_args(argv)

    provider = TracerProvider(resource=Resource.create({"service.name": "quickstart-agent"}))
    # Without --endpoint the exporter reads OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT itself.
    exporter = (
        OTLPSpanExporter(endpoint=f"{args.endpoint.rstrip('/')}/v1/traces")
        if args.endpoint
        else OTLPSpanExporter()
    )
    provider.add_span_processor(BatchSpanProcessor(exporter))
    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider))
    agent = build_agent()
    for question, conversation_id in CONVERSATIONS:
        result = agent.run_sync(question, conversation_id=conversation_id)
        print(f"{conversation_id}: {question} -> {result.output}")
    provider.shutdown()  # flushes: every span is sent before we exit
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
