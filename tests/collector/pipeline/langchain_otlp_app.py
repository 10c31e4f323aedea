"""A LangChain tool-calling agent (fake chat model, real tools), instrumented, exporting over
OTLP/HTTP to toolscore.

Usage: ``python -m tests.collector.pipeline.langchain_otlp_app MODE TOOLSCORE_URL SESSION`` with
MODE ``openinference`` or ``openllmetry``. Two user turns (two traces) in one session: first
``get_weather(Paris)`` and ``get_time(Asia/Tokyo)`` in parallel, then ``get_weather(Paris)``.
A fresh process per run: instrumentors patch LangChain globally and do not fully undo it.
"""

from __future__ import annotations

import sys
from typing import Any

from langchain_core.messages import AIMessage
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from tests.collector.reconstruction.conventions.test_live_langchain import QUESTION, run_agent

FOLLOW_UP = "And now?"
RESPONSES = [
    AIMessage(
        "",
        tool_calls=[
            {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_w1"},
            {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}, "id": "call_t1"},
        ],
    ),
    AIMessage("18C and 09:00"),
    AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "w2"}]),
    AIMessage("still 18C"),
]


def main(mode: str, toolscore: str, session: str) -> None:
    provider = TracerProvider(resource=Resource.create({"service.name": f"langchain-{mode}"}))
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{toolscore}/v1/traces"))
    )
    instrumentor: Any
    if mode == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        instrumentor = LangChainInstrumentor()
    else:
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        instrumentor = LangchainInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    run_agent(list(RESPONSES), [QUESTION, FOLLOW_UP], session=session)
    provider.shutdown()  # flush: everything is acknowledged before the process exits


if __name__ == "__main__":
    main(*sys.argv[1:4])
