"""Record real Haystack spans (opentelemetry-haystack) into
tests/fixtures/recorded/haystack-multi-turn.json (run by hand, not by pytest).

haystack-ai is not a test dependency, so it gets its own virtualenv; test_recorded.py and
test_frameworks_e2e.py replay the recording without it. To refresh it::

    python -m venv /tmp/venv-haystack
    /tmp/venv-haystack/bin/pip install haystack-ai opentelemetry-haystack opentelemetry-sdk
    PYTHONPATH=. /tmp/venv-haystack/bin/python \
        tests/collector/reconstruction/conventions/record_haystack.py

A Haystack ``Agent`` with Haystack's own ``OpenAIChatGenerator`` (pointed at the scripted
chat-completions server of scripted_chat_server.py) plays the conversation of four_calls.py; the
tools run for real. ``HAYSTACK_CONTENT_TRACING_ENABLED=true`` (set here) makes Haystack record
inputs and outputs. Haystack names no conversation, so the app wraps each turn in a span with
``gen_ai.conversation.id``, as a user would.
"""

from __future__ import annotations

import os

os.environ["HAYSTACK_CONTENT_TRACING_ENABLED"] = "true"  # before haystack reads it

from haystack.components.agents import Agent
from haystack.components.generators.chat import OpenAIChatGenerator
from haystack.dataclasses import ChatMessage
from haystack.tools import Tool
from haystack.utils import Secret
from haystack_integrations.components.connectors.opentelemetry import (
    OpenTelemetryConnector,
)
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from tests.collector.reconstruction.conventions import four_calls as fc
from tests.collector.reconstruction.conventions.scripted_chat_server import (
    ScriptedChatServer,
    Step,
)
from tests.collector.recording import RECORDED, save_recording, span_from_sdk

CONVERSATION = "conv-haystack"
SCHEMAS = {
    "get_weather": {"city": {"type": "string"}},
    "get_time": {"timezone": {"type": "string"}},
    "book_table": {
        "booking": {
            "type": "object",
            "properties": {
                "restaurant": {"type": "string"},
                "when": {
                    "type": "object",
                    "properties": {"day": {"type": "string"}, "hour": {"type": "integer"}},
                },
            },
        },
        "party_size": {"type": "integer"},
    },
    "convert_currency": {"amount": {"type": "number"}, "currency": {"type": "string"}},
}


def tools() -> list[Tool]:
    functions = {
        "get_weather": fc.get_weather,
        "get_time": fc.get_time,
        "book_table": fc.book_table,
        "convert_currency": fc.convert_currency,
    }
    return [
        Tool(
            name=name,
            description=fc.DESCRIPTIONS[name],
            parameters={"type": "object", "properties": props, "required": list(props)},
            function=functions[name],
        )
        for name, props in SCHEMAS.items()
    ]


def main() -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    trace.set_tracer_provider(provider)
    OpenTelemetryConnector()  # enables Haystack's OpenTelemetry tracer
    steps: list[Step] = []
    for turn, answer in zip(fc.TURNS, fc.ANSWERS, strict=True):
        steps += [*turn, answer]
    app = provider.get_tracer("travel-app")
    with ScriptedChatServer(steps) as server:
        generator = OpenAIChatGenerator(
            model="gpt-4o", api_key=Secret.from_token("test"), api_base_url=server.url
        )
        agent = Agent(chat_generator=generator, tools=tools())
        messages: list[ChatMessage] = []
        answers = []
        for question in fc.QUESTIONS:
            with app.start_as_current_span(
                "turn", attributes={"gen_ai.conversation.id": CONVERSATION}
            ):
                result = agent.run(messages=[*messages, ChatMessage.from_user(question)])
            messages = result["messages"]
            answers.append(messages[-1].text)
    assert answers == fc.ANSWERS, answers
    spans = sorted(
        (span_from_sdk(s) for s in memory.get_finished_spans()), key=lambda s: s.start_ns
    )
    note = (
        "Recorded from haystack-ai (Agent, OpenAIChatGenerator on a scripted server) with "
        f"opentelemetry-haystack by {__name__}: the two turns of four_calls.py."
    )
    save_recording(RECORDED / "haystack-multi-turn.json", spans, note=note, expected=fc.EXPECTED)


if __name__ == "__main__":
    main()
