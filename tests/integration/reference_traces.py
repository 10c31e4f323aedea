"""Agent turns whose reference id and conversation id sit on different spans, sent in parts.

Instrumentations often export a trace's child spans (which may carry the app's
``toolscore.reference.id``) before its root span (which names the conversation), so a trace lands
in a trace-keyed conversation first and moves later. These helpers build such turns with the real
OTel SDK and send chosen spans through the real OTLP exporters, request by request.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

REFERENCE_KEY = "toolscore.reference.id"
CONVERSATION_KEY = "gen_ai.conversation.id"
WEATHER = {"name": "get_weather", "args": {"city": "Paris"}}
QUESTION = "What's the weather in Paris?"


def agent_turn(
    conversation_id: str | None,
    reference_id: str | None,
    calls: Sequence[Mapping[str, Any]] = (WEATHER,),
    question: str = QUESTION,
) -> list[ReadableSpan]:
    """One OTel GenAI agent turn: the conversation id on the root span only, the reference id on
    the first chat span only (a child). Returned in the order the SDK finished them (root last).
    """
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("reference-move-test")
    conv = {CONVERSATION_KEY: conversation_id} if conversation_id else {}
    ref = {REFERENCE_KEY: reference_id} if reference_id else {}
    user = {"role": "user", "parts": [{"type": "text", "content": question}]}
    ids = [f"call_{uuid.uuid4().hex[:12]}" for _ in calls]
    assistant = {
        "role": "assistant",
        "parts": [
            {"type": "tool_call", "id": ids[i], "name": c["name"], "arguments": c["args"]}
            for i, c in enumerate(calls)
        ],
    }
    tool_msg = {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": i, "response": "ok"} for i in ids],
    }
    done = [{"role": "assistant", "parts": [{"type": "text", "content": "done"}]}]
    with tracer.start_as_current_span(
        "invoke_agent weather", attributes={"gen_ai.operation.name": "invoke_agent", **conv}
    ):
        with tracer.start_as_current_span(
            "chat model",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": json.dumps([user]),
                "gen_ai.output.messages": json.dumps([assistant]),
                **ref,
            },
        ):
            pass
        for i, c in enumerate(calls):
            with tracer.start_as_current_span(
                f"execute_tool {c['name']}",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": c["name"],
                    "gen_ai.tool.call.id": ids[i],
                    "gen_ai.tool.call.arguments": json.dumps(c["args"]),
                },
            ):
                pass
        with tracer.start_as_current_span(
            "chat model",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": json.dumps([user, assistant, tool_msg]),
                "gen_ai.output.messages": json.dumps(done),
            },
        ):
            pass
    provider.shutdown()
    return list(exporter.get_finished_spans())


def root_of(spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    return [s for s in spans if s.parent is None]


def children_of(spans: Sequence[ReadableSpan]) -> list[ReadableSpan]:
    return [s for s in spans if s.parent is not None]


def exporter_for(http_url: str | None = None, grpc_target: str | None = None) -> SpanExporter:
    """The standard OTLP exporter, to a server's HTTP URL or gRPC target."""
    if grpc_target is not None:
        return GrpcSpanExporter(endpoint=grpc_target, insecure=True)
    assert http_url is not None
    return OTLPSpanExporter(endpoint=f"{http_url}/v1/traces")


Sender = Callable[[Sequence[ReadableSpan]], None]


def sender(exporter: SpanExporter) -> Sender:
    """Send spans as one export request; fails the test unless the server acknowledged them."""

    def send(spans: Sequence[ReadableSpan]) -> None:
        assert exporter.export(list(spans)) is SpanExportResult.SUCCESS

    return send
