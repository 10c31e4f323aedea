"""The ``openai`` client against a local fake server, under OpenLLMetry (content on spans, or in
log events) and OpenInference → OTLP traces and logs → ``toolscore serve`` → evaluation rows."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
from openinference.instrumentation.openai import OpenAIInstrumentor as OIInstrumentor
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider

from storage.expectations import ExpectationData
from tests.collector.conventions.test_live_openai import (
    QUESTION,
    TOOLS,
    FakeOpenAI,
    completion,
    server,
)
from tests.collector.pipeline.e2e import (
    current_scores,
    import_refs,
    otlp_provider,
    pipeline_server,
    ragas_sample,
    ragas_scores,
    wait_scored,
)
from tests.integration.serve_harness import RunningServer

__all__ = ["server"]  # the fake OpenAI endpoint fixture

WEATHER = {"name": "get_weather", "args": {"city": "Paris"}}
TIME = {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}}


@pytest.fixture(params=["openllmetry", "openllmetry-events", "openinference"])
def instrumentation(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Returns ``instrument(server) -> (tracer provider, logger provider)``."""
    mode = request.param
    instrumentor: Any = (
        OIInstrumentor()
        if mode == "openinference"
        else OpenAIInstrumentor(use_attributes=mode == "openllmetry")
    )
    made: list[tuple[TracerProvider, LoggerProvider]] = []

    def instrument(srv: RunningServer) -> tuple[TracerProvider, LoggerProvider]:
        tracer_provider = otlp_provider(srv, service=f"openai-{mode}")
        logger_provider = LoggerProvider()
        logger_provider.add_log_record_processor(
            BatchLogRecordProcessor(OTLPLogExporter(endpoint=f"{srv.http_url}/v1/logs"))
        )
        if mode == "openinference":
            instrumentor.instrument(tracer_provider=tracer_provider)
        else:
            instrumentor.instrument(
                tracer_provider=tracer_provider, logger_provider=logger_provider
            )
        made.append((tracer_provider, logger_provider))
        return tracer_provider, logger_provider

    yield instrument
    instrumentor.uninstrument()
    for tracer_provider, logger_provider in made:
        tracer_provider.shutdown()
        logger_provider.shutdown()


def test_openai_parallel_calls(db_url: str, server: FakeOpenAI, instrumentation: Any) -> None:
    conv_id = "conv-openai-e2e"
    import_refs(
        db_url,
        ExpectationData(id="oa", reference_tool_calls=[TIME], match={"conversation_id": conv_id}),
    )
    server.script[:] = [
        completion(
            ("get_weather", '{"city":"Paris"}', "call_w1"),
            ("get_time", '{"timezone":"Asia/Tokyo"}', "call_t2"),
        ),
        completion(text="18C and 09:00"),
    ]
    with pipeline_server(db_url) as srv:
        tracer_provider, logger_provider = instrumentation(srv)
        client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)
        messages: list[dict[str, Any]] = [{"role": "user", "content": QUESTION}]
        with tracer_provider.get_tracer("weather-app").start_as_current_span(
            "turn", attributes={"gen_ai.conversation.id": conv_id}
        ):
            while True:  # the app runs the tools itself: only model calls are traced
                message = (
                    client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
                    .choices[0]
                    .message
                )
                messages.append(message.model_dump(exclude_none=True))
                if not message.tool_calls:
                    break
                for call in message.tool_calls:
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": "ok"})
        logger_provider.force_flush()
        tracer_provider.force_flush()
        rows = wait_scored(db_url, [conv_id])
    assert rows[conv_id]["status"] == "scored"
    expected = ragas_scores(ragas_sample(QUESTION, [[WEATHER, TIME]], [TIME]))
    assert current_scores(db_url, conv_id) == expected
    assert expected["tool_call_f1"] == 0.6667
