"""An app using the real ``openai`` client, instrumented, exporting over OTLP/HTTP to toolscore.

Usage: ``python -m tests.collector.pipeline.openai_otlp_app MODE OPENAI_BASE_URL TOOLSCORE_URL
CONVERSATION QUESTION`` with MODE ``openllmetry``, ``openllmetry-events`` or ``openinference``.
One user turn under the app's root span (which names the conversation); the app runs the tools
itself. A fresh process per run: instrumentors patch ``openai`` globally and do not fully undo it.
"""

from __future__ import annotations

import sys
from typing import Any

import openai
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from tests.collector.reconstruction.conventions.openai_app import TOOLS


def main(mode: str, base_url: str, toolscore: str, conversation: str, question: str) -> None:
    resource = Resource.create({"service.name": f"openai-{mode}"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{toolscore}/v1/traces"))
    )
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(
        BatchLogRecordProcessor(OTLPLogExporter(endpoint=f"{toolscore}/v1/logs"))
    )
    if mode == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor as OIInstrumentor

        OIInstrumentor().instrument(tracer_provider=tracer_provider)
    else:
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor

        OpenAIInstrumentor(use_attributes=mode == "openllmetry").instrument(
            tracer_provider=tracer_provider, logger_provider=logger_provider
        )
    client = openai.OpenAI(base_url=base_url, api_key="test", max_retries=0)
    messages: list[Any] = [{"role": "user", "content": question}]
    tracer = tracer_provider.get_tracer("weather-app")
    with tracer.start_as_current_span("turn", attributes={"gen_ai.conversation.id": conversation}):
        while True:
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
    logger_provider.shutdown()  # flush: everything is acknowledged before the process exits
    tracer_provider.shutdown()


if __name__ == "__main__":
    main(*sys.argv[1:6])
