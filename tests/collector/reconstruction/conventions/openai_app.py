"""A small app using the real ``openai`` client, instrumented; run in its own process by the tests.

Usage: ``python -m tests.collector.reconstruction.conventions.openai_app MODE BASE_URL OUTDIR
SCENARIO...`` where
MODE is ``openllmetry`` (content on span attributes), ``openllmetry-events`` (content in log
records), ``openinference``, or ``langchain-mixed`` (a LangChain ``ChatOpenAI`` agent traced by
OpenInference's LangChain instrumentation *and* OpenLLMetry's openai instrumentation: two
conventions, and two sibling spans per model call), and each SCENARIO is
``NAME=QUESTION|QUESTION...``: a conversation whose recording (spans and log records) is written
to OUTDIR/NAME.json. Each question is one user turn under its own root span (one trace per turn);
with the bare client the app runs the tools itself, so only model calls are traced.

Instrumentors patch the ``openai`` module globally and do not fully undo it, so each
instrumentation gets a fresh process: otherwise the previous one keeps wrapping the client.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import openai
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.collector.recording import log_from_sdk, save_recording, span_from_sdk

TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {"type": "object", "properties": {param: {"type": "string"}}},
        },
    }
    for name, param in (("get_weather", "city"), ("get_time", "timezone"))
]


def main(mode: str, base_url: str, outdir: Path, scenarios: list[str]) -> None:
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    tracer_provider, logger_provider = TracerProvider(), LoggerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    if mode == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor as OIInstrumentor

        OIInstrumentor().instrument(tracer_provider=tracer_provider)
    elif mode == "langchain-mixed":
        from openinference.instrumentation.langchain import LangChainInstrumentor
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor

        LangChainInstrumentor().instrument(tracer_provider=tracer_provider)
        OpenAIInstrumentor().instrument(tracer_provider=tracer_provider)
    else:
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor

        OpenAIInstrumentor(use_attributes=mode == "openllmetry").instrument(
            tracer_provider=tracer_provider, logger_provider=logger_provider
        )

    client = openai.OpenAI(base_url=base_url, api_key="test", max_retries=0)
    tracer = tracer_provider.get_tracer("weather-app")
    for scenario in scenarios:
        name, _, questions = scenario.partition("=")
        spans.clear()
        logs.clear()  # type: ignore[no-untyped-call]
        messages: list[Any] = []
        for question in questions.split("|"):
            with tracer.start_as_current_span(
                "turn", attributes={"gen_ai.conversation.id": f"conv-{name}"}
            ):
                messages.append({"role": "user", "content": question})
                if mode == "langchain-mixed":
                    langchain_turn(base_url, messages)
                    continue
                while True:
                    response = client.chat.completions.create(
                        model="gpt-4o", messages=messages, tools=TOOLS
                    )
                    message = response.choices[0].message
                    messages.append(message.model_dump(exclude_none=True))
                    if not message.tool_calls:
                        break
                    for call in message.tool_calls:
                        messages.append({"role": "tool", "tool_call_id": call.id, "content": "ok"})
        save_recording(
            outdir / f"{name}.json",
            [span_from_sdk(s) for s in spans.get_finished_spans()],
            [log_from_sdk(log) for log in logs.get_finished_logs()],
            note=f"Recorded from the openai client under {mode} by {__name__}; {name}.",
        )


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"18C in {city}"


def get_time(timezone: str) -> str:
    """Local time in a timezone."""
    return f"09:00 in {timezone}"


def langchain_turn(base_url: str, messages: list[Any]) -> None:
    """One user turn of a LangChain tool-calling loop; ``messages`` holds LangChain messages."""
    from langchain_core.messages import HumanMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI

    tools = {t.name: t for t in (tool(get_weather), tool(get_time))}
    model = ChatOpenAI(model="gpt-4o", base_url=base_url, api_key="test", max_retries=0)  # type: ignore[arg-type]
    bound = model.bind_tools(list(tools.values()))
    messages[-1] = HumanMessage(messages[-1]["content"])
    while True:
        ai = bound.invoke(messages)
        messages.append(ai)
        if not ai.tool_calls:
            return
        for call in ai.tool_calls:
            messages.append(tools[call["name"]].invoke(call))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], Path(sys.argv[3]), sys.argv[4:])
