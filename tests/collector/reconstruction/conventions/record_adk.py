"""Record real Google ADK spans and log records into tests/fixtures/recorded/ (run by hand).

google-adk brings its own dependency tree, so it lives in its own virtualenv and is not a test
dependency; its recordings are checked by test_recorded.py. To refresh them::

    python -m venv /tmp/adk-venv && /tmp/adk-venv/bin/pip install google-adk
    PYTHONPATH=. /tmp/adk-venv/bin/python tests/collector/reconstruction/conventions/record_adk.py

then again with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true, and once more adding
OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental.

A scripted ``BaseLlm`` answers like Gemini (function calls without ids: ADK mints ``adk-…``
ids), requesting two parallel calls and then answering; a second scenario has two turns in one
ADK session.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.genai import types
from opentelemetry import _logs, trace
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.collector.recording import RECORDED, log_from_sdk, save_recording, span_from_sdk

Step = list[tuple[str, dict[str, Any]]] | str
STEPS: list[Step] = []


class ScriptedLlm(BaseLlm):
    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        step = STEPS.pop(0)
        if isinstance(step, str):
            parts = [types.Part(text=step)]
        else:
            parts = [
                types.Part(function_call=types.FunctionCall(name=name, args=args))
                for name, args in step
            ]
        yield LlmResponse(content=types.Content(role="model", parts=parts))


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"18C in {city}"


def get_time(timezone: str) -> str:
    """Local time in a timezone."""
    return f"09:00 in {timezone}"


PARALLEL = [
    {"name": "get_weather", "args": {"city": "Paris"}},
    {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}},
]


async def conversation(questions: list[str]) -> None:
    agent = LlmAgent(
        name="weather_agent", model=ScriptedLlm(model="scripted"), tools=[get_weather, get_time]
    )
    runner = InMemoryRunner(agent=agent, app_name="weather")
    session = await runner.session_service.create_session(app_name="weather", user_id="u1")
    for question in questions:
        message = types.Content(role="user", parts=[types.Part(text=question)])
        async for _ in runner.run_async(user_id="u1", session_id=session.id, new_message=message):
            pass


def main() -> None:
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    tracer_provider, logger_provider = TracerProvider(), LoggerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    trace.set_tracer_provider(tracer_provider)
    _logs.set_logger_provider(logger_provider)
    scenarios: dict[str, tuple[list[Step], list[str]]] = {
        "parallel": (
            [[(c["name"], c["args"]) for c in PARALLEL], "18C and 09:00"],
            ["What's the weather in Paris and the time in Tokyo?"],
        ),
        "multi-turn": (
            [
                [("get_weather", {"city": "Paris"})],
                "18C",
                [("get_time", {"timezone": "Asia/Tokyo"})],
                "09:00",
            ],
            ["Weather in Paris?", "And the time in Tokyo?"],
        ),
    }
    mode = "latest" if os.environ.get("OTEL_SEMCONV_STABILITY_OPT_IN") else "default"
    if os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT") != "true":
        mode += "-nocontent"
    for name, (steps, questions) in scenarios.items():
        spans.clear()
        logs.clear()
        STEPS[:] = steps
        asyncio.run(conversation(questions))
        save_recording(
            RECORDED / f"google-adk-{mode}-{name}.json",
            [span_from_sdk(s) for s in spans.get_finished_spans()],
            [log_from_sdk(log) for log in logs.get_finished_logs()],
            note=f"Recorded from google-adk ({mode}), scripted BaseLlm, by {__name__}; {name}.",
            expected=PARALLEL,
        )


if __name__ == "__main__":
    main()
