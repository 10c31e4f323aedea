"""OpenAI Agents SDK agents under ``logfire.instrument_openai_agents()``; run in a fresh process.

Usage: ``python -m tests.collector.reconstruction.conventions.openai_agents_app MODEL SINK
SCENARIO...``

- MODEL: ``scripted`` (a scripted :class:`agents.Model`: the SDK then records no model-call
  span, only tool spans), ``responses`` / ``chat`` (the SDK's own ``OpenAIResponsesModel`` /
  ``OpenAIChatCompletionsModel`` against a scripted local HTTP server, so the model calls are
  recorded too), or ``responses-nocontent`` (``trace_include_sensitive_data=False``). With an
  ``openinference-`` prefix (``openinference-responses``), the SDK is traced by
  ``openinference-instrumentation-openai-agents`` instead of Logfire, and each run sits in
  ``using_session(group_id)`` (OpenInference does not export the group id).
- SINK: a directory (each scenario's spans are written to SINK/NAME.json through the OTel SDK's
  in-memory exporter) or an ``http://`` URL (spans go to that OTLP/HTTP traces endpoint through
  the standard exporter; the scenario's conversation is its ``group_id``).

Logfire configures a global tracer provider and the integration replaces the SDK's global trace
provider, so every run gets its own process. No network: the SDK's own trace export to OpenAI is
switched off, and Logfire does not send.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

QUESTION = "What's the weather in Paris and the time in Tokyo?"
WEATHER = {"name": "get_weather", "args": {"city": "Paris"}}
TIME = {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}}
LOOKUP = {"name": "lookup_invoice", "args": {"number": 7}}
TRANSFER = {"name": "transfer_to_billing", "args": {}}

Call = dict[str, Any]
# name → (group id, user turns, the model's answers in order: a list of calls or a final text,
# expected calls). One trace per user turn.
SCENARIOS: dict[str, tuple[str, list[str], list[list[Call] | str], list[Call]]] = {
    "parallel": (
        "thread-parallel",
        [QUESTION],
        [[WEATHER, TIME], "18C and 09:00"],
        [WEATHER, TIME],
    ),
    "multi-turn": (
        "thread-multi-turn",
        ["Weather in Paris?", "And the time in Tokyo?"],
        [[WEATHER], "18C", [TIME], "09:00"],
        [WEATHER, TIME],
    ),
    "handoff": (
        "thread-handoff",
        ["Is invoice 7 paid?"],
        [[LOOKUP, TRANSFER], "Billing here: invoice 7 is paid."],
        [LOOKUP, TRANSFER],
    ),
}


def _answers(name: str) -> Iterator[tuple[int, list[Call] | str]]:
    yield from enumerate(SCENARIOS[name][2])


def responses_body(step: int, answer: list[Call] | str) -> dict[str, Any]:
    output: list[dict[str, Any]]
    if isinstance(answer, str):
        output = [
            {
                "type": "message",
                "id": f"msg_{step}",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": answer, "annotations": []}],
            }
        ]
    else:
        output = [
            {
                "type": "function_call",
                "id": f"fc_{step}_{i}",
                "call_id": f"call_{step}_{i}",
                "name": c["name"],
                "arguments": json.dumps(c["args"]),
                "status": "completed",
            }
            for i, c in enumerate(answer)
        ]
    return {
        "id": f"resp_{step}",
        "object": "response",
        "created_at": 1,
        "status": "completed",
        "model": "gpt-4o",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 5,
            "output_tokens": 5,
            "total_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def chat_body(step: int, answer: list[Call] | str) -> dict[str, Any]:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": answer if isinstance(answer, str) else None,
    }
    if not isinstance(answer, str):
        message["tool_calls"] = [
            {
                "id": f"call_{step}_{i}",
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c["args"])},
            }
            for i, c in enumerate(answer)
        ]
    return {
        "id": f"chatcmpl-{step}",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop" if isinstance(answer, str) else "tool_calls",
                "message": message,
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
    }


class FakeServer:
    """Scripted answers to /v1/responses and /v1/chat/completions, in order."""

    def __init__(self) -> None:
        self.script: list[tuple[int, list[Call] | str]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                step, answer = fake.script.pop(0)
                make = chat_body if self.path.endswith("/chat/completions") else responses_body
                body = json.dumps(make(step, answer)).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


def seen(mode: str, name: str) -> list[Call]:
    """The calls a trace of ``mode`` shows: with tool spans only (a scripted model, or no
    sensitive data), a handoff is not seen (its span names agents, not the tool called)."""
    calls = SCENARIOS[name][3]
    if mode.endswith(("scripted", "nocontent")):
        return [c for c in calls if not c["name"].startswith("transfer_to_")]
    return calls


def scripted_model(script: list[tuple[int, list[Call] | str]]) -> Any:
    from agents import Model, ModelResponse, Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    class Scripted(Model):
        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            step, answer = script.pop(0)
            output: list[Any]
            if isinstance(answer, str):
                text = ResponseOutputText(type="output_text", text=answer, annotations=[])
                output = [
                    ResponseOutputMessage(
                        id=f"msg_{step}",
                        type="message",
                        role="assistant",
                        status="completed",
                        content=[text],
                    )
                ]
            else:
                output = [
                    ResponseFunctionToolCall(
                        type="function_call",
                        call_id=f"call_{step}_{i}",
                        name=c["name"],
                        arguments=json.dumps(c["args"]),
                    )
                    for i, c in enumerate(answer)
                ]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            raise NotImplementedError

    return Scripted()


def build_agents(model: Any) -> Any:
    from agents import Agent, function_tool

    @function_tool
    def get_weather(city: str) -> str:
        return f"18C in {city}"

    @function_tool
    def get_time(timezone: str) -> str:
        return f"09:00 in {timezone}"

    @function_tool
    def lookup_invoice(number: int) -> str:
        return f"invoice {number}: 120 EUR"

    billing = Agent(name="billing", instructions="Answer billing questions.", model=model)
    return Agent(
        name="assistant",
        instructions="Be brief.",
        tools=[get_weather, get_time, lookup_invoice],
        handoffs=[billing],
        model=model,
    )


async def run_scenario(name: str, agent: Any, sensitive: bool, openinference: bool) -> None:
    import contextlib

    from agents import RunConfig, Runner

    group_id, turns, _, _ = SCENARIOS[name]
    history: list[Any] = []
    for question in turns:  # one trace per turn, the conversation is the SDK's group id
        session: Any = contextlib.nullcontext()
        if openinference:
            from openinference.instrumentation import using_session

            session = using_session(group_id)
        config = RunConfig(group_id=group_id, trace_include_sensitive_data=sensitive)
        with session:
            result = await Runner.run(
                agent, [*history, {"role": "user", "content": question}], run_config=config
            )
        history = result.to_input_list()
        agent = result.last_agent if result.last_agent is not None else agent


def main(mode: str, sink: str, names: list[str]) -> None:
    from agents import OpenAIChatCompletionsModel, OpenAIResponsesModel, set_trace_processors
    from openai import AsyncOpenAI
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tests.collector.recording import save_recording, span_from_sdk

    openinference = mode.startswith("openinference-")
    model_kind = mode.removeprefix("openinference-")
    set_trace_processors([])  # no export to OpenAI's tracing backend
    memory = InMemorySpanExporter()
    processor: Any
    if sink.startswith("http"):
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        processor = BatchSpanProcessor(OTLPSpanExporter(endpoint=sink), schedule_delay_millis=100)
    else:
        processor = SimpleSpanProcessor(memory)
    if openinference:
        from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

        provider = TracerProvider(resource=Resource.create({"service.name": "openai-agents-app"}))
        provider.add_span_processor(processor)
        OpenAIAgentsInstrumentor().instrument(tracer_provider=provider)
        instrumentation = "openinference-instrumentation-openai-agents"
    else:
        import logfire

        logfire.configure(
            send_to_logfire=False,
            console=False,
            service_name="openai-agents-app",
            additional_span_processors=[processor],
        )
        logfire.instrument_openai_agents()
        instrumentation = "logfire.instrument_openai_agents()"

    server = FakeServer()
    client = AsyncOpenAI(base_url=server.url, api_key="sk-test", max_retries=0)
    for name in names:
        script = list(_answers(name))
        if model_kind == "scripted":
            model: Any = scripted_model(script)
        else:
            server.script[:] = script
            if model_kind == "chat":
                model = OpenAIChatCompletionsModel("gpt-4o", client)
            else:
                model = OpenAIResponsesModel("gpt-4o", client)
        memory.clear()
        sensitive = model_kind != "responses-nocontent"
        asyncio.run(run_scenario(name, build_agents(model), sensitive, openinference))
        if not sink.startswith("http"):
            spans = [span_from_sdk(s) for s in memory.get_finished_spans()]
            note = f"Recorded from openai-agents under {instrumentation} ({model_kind}); {name}."
            save_recording(Path(sink) / f"{name}.json", spans, note=note, expected=seen(mode, name))
    processor.force_flush()
    processor.shutdown()
    server.httpd.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
