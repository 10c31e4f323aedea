"""The real ``openai`` client against a local fake server, under OpenLLMetry and OpenInference.

The server (127.0.0.1, ephemeral port) answers chat.completions with scripted ``tool_calls``. The
app runs the tools itself (no tool spans: only the model calls are traced), as in most apps using
the bare client. Three instrumentations: OpenLLMetry with content on span attributes, OpenLLMetry
in events mode (content only in log records), OpenInference. Set ``TOOLSCORE_RECORD=1`` to refresh
the saved copies in tests/fixtures/recorded/.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import openai
import pytest
from openinference.instrumentation.openai import OpenAIInstrumentor as OIInstrumentor
from opentelemetry.instrumentation.openai import OpenAIInstrumentor
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from collector.conversation_keys import DEFAULT_CONVERSATION_KEYS, conversation_id_for_trace
from collector.model import LogRecordData, SpanRecord
from collector.reconstruct import reconstruct
from tests.collector.recording import RECORDED, log_from_sdk, save_recording, span_from_sdk

QUESTION = "What's the weather in Paris and the time in Tokyo?"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {"type": "object", "properties": {param: {"type": "string"}}},
        },
    }
    for name, param in (("get_weather", "city"), ("get_time", "timezone"))
]


def completion(*calls: tuple[str, str, str], text: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for n, a, i in calls
        ]
    return {
        "id": f"chatcmpl-{abs(hash((calls, text))) % 10**8}",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o",
        "choices": [
            {"index": 0, "finish_reason": "tool_calls" if calls else "stop", "message": message}
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
    }


@dataclass
class FakeOpenAI:
    """A scripted chat.completions endpoint: answers requests with ``script`` in order."""

    script: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", 0))
            fake.requests.append(json.loads(self.rfile.read(length) or b"{}"))
            answer = fake.script.pop(0) if fake.script else completion(text="(script exhausted)")
            body = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    yield fake
    httpd.shutdown()
    httpd.server_close()


@dataclass
class Recorder:
    mode: str
    spans: InMemorySpanExporter
    logs: InMemoryLogRecordExporter
    tracer_provider: TracerProvider

    def records(self) -> tuple[list[SpanRecord], list[LogRecordData]]:
        return (
            [span_from_sdk(s) for s in self.spans.get_finished_spans()],
            [log_from_sdk(log) for log in self.logs.get_finished_logs()],
        )


MODES = ["openllmetry", "openllmetry-events", "openinference"]


@pytest.fixture(scope="module", params=MODES)
def instrumented(request: pytest.FixtureRequest) -> Iterator[Recorder]:
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    tracer_provider, logger_provider = TracerProvider(), LoggerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    instrumentor: Any
    if request.param == "openinference":
        instrumentor = OIInstrumentor()
        instrumentor.instrument(tracer_provider=tracer_provider)
    else:
        instrumentor = OpenAIInstrumentor(use_attributes=request.param == "openllmetry")
        instrumentor.instrument(tracer_provider=tracer_provider, logger_provider=logger_provider)
    yield Recorder(request.param, spans, logs, tracer_provider)
    instrumentor.uninstrument()
    tracer_provider.shutdown()
    logger_provider.shutdown()


@pytest.fixture
def recorder(instrumented: Recorder, server: FakeOpenAI) -> Recorder:
    instrumented.spans.clear()
    instrumented.logs.clear()
    server.script.clear()
    server.requests.clear()
    return instrumented


def run_turns(recorder: Recorder, server: FakeOpenAI, questions: list[str]) -> None:
    """The app: one root span per user turn (its own trace), tools run locally."""
    client = openai.OpenAI(base_url=server.url, api_key="test", max_retries=0)
    tracer = recorder.tracer_provider.get_tracer("weather-app")
    messages: list[dict[str, Any]] = []
    for question in questions:
        with tracer.start_as_current_span(
            "turn", attributes={"gen_ai.conversation.id": "conv-openai"}
        ):
            messages.append({"role": "user", "content": question})
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


def maybe_record(recorder: Recorder, name: str, expected: list[dict[str, Any]]) -> None:
    if os.environ.get("TOOLSCORE_RECORD") == "1":
        spans, logs = recorder.records()
        note = f"Recorded from the openai client under {recorder.mode}; {name}."
        path = RECORDED / f"openai-{recorder.mode}-{name}.json"
        save_recording(path, spans, logs, note=note, expected=expected)


CONVENTION = {
    "openllmetry": "openllmetry",
    "openllmetry-events": "otel_genai_events",
    "openinference": "openinference",
}
PARALLEL = [
    {"name": "get_weather", "args": {"city": "Paris"}},
    {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}},
]


def test_parallel_calls(recorder: Recorder, server: FakeOpenAI) -> None:
    server.script[:] = [
        completion(
            ("get_weather", '{"city":"Paris"}', "call_w1"),
            ("get_time", '{"timezone":"Asia/Tokyo"}', "call_t2"),
        ),
        completion(text="18C and 09:00"),
    ]
    run_turns(recorder, server, [QUESTION])
    assert len(server.requests) == 2
    spans, logs = recorder.records()
    result = reconstruct(spans, logs)
    assert [{"name": c.name, "args": c.arguments} for c in result.tool_calls] == PARALLEL
    assert [c.call_id for c in result.tool_calls] == ["call_w1", "call_t2"]
    assert {c.convention for c in result.tool_calls} == {CONVENTION[recorder.mode]}
    assert result.first_user_message == QUESTION
    assert result.warnings == ()
    maybe_record(recorder, "parallel", PARALLEL)


def test_multi_turn_over_two_traces(recorder: Recorder, server: FakeOpenAI) -> None:
    server.script[:] = [
        completion(("get_weather", '{"city":"Paris"}', "c1")),
        completion(text="18C"),
        completion(("get_time", '{"timezone":"Asia/Tokyo"}', "c2")),
        completion(text="09:00"),
    ]
    run_turns(recorder, server, ["Weather in Paris?", "And the time in Tokyo?"])
    spans, logs = recorder.records()
    assert len({s.trace_id for s in spans}) == 2
    for trace in {s.trace_id for s in spans}:
        mine = [s for s in spans if s.trace_id == trace]
        assert conversation_id_for_trace(mine, DEFAULT_CONVERSATION_KEYS) == "conv-openai"
    result = reconstruct(spans[::-1], logs[::-1])
    assert [{"name": c.name, "args": c.arguments} for c in result.tool_calls] == PARALLEL
    humans = [m["content"] for m in result.messages if m["type"] == "human"]
    assert humans == ["Weather in Paris?", "And the time in Tokyo?"]
    maybe_record(recorder, "multi-turn", PARALLEL)


def test_malformed_arguments_are_kept_raw(recorder: Recorder, server: FakeOpenAI) -> None:
    server.script[:] = [
        completion(("get_weather", '{"city": "Paris", "units": "met', "c1")),
        completion(text="?"),
    ]
    run_turns(recorder, server, ["Weather in Paris?"])
    spans, logs = recorder.records()
    result = reconstruct(spans, logs)
    [call] = result.tool_calls
    assert call.name == "get_weather"
    assert call.arguments_ok is False
    assert call.arguments == {"city": "Paris"}  # the complete part; the cut value is dropped
    assert call.arguments_raw == '{"city": "Paris", "units": "met'
    assert any("call #0 get_weather" in w for w in result.warnings)
