"""Record real Semantic Kernel telemetry (native OTel, sensitive diagnostics on) into
tests/fixtures/recorded/semantic-kernel-multi-turn.json (run by hand, not by pytest).

semantic-kernel is not a test dependency, so it gets its own virtualenv; test_recorded.py and
test_frameworks_e2e.py replay the recording without it. To refresh it::

    python -m venv /tmp/venv-sk
    /tmp/venv-sk/bin/pip install semantic-kernel opentelemetry-sdk
    PYTHONPATH=. /tmp/venv-sk/bin/python \
        tests/collector/reconstruction/conventions/record_semantic_kernel.py

Semantic Kernel's ``OpenAIChatCompletion`` (its own OpenAI connector, pointed at the scripted
chat-completions server of scripted_chat_server.py) with automatic function calling plays the
conversation of four_calls.py; the kernel functions run for real. The message content is
written by Python logging as log records named by ``event.name``, so a ``LoggingHandler``
exports them, as the Semantic Kernel telemetry sample does. The app wraps each turn in a span
with ``gen_ai.conversation.id``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from typing import Annotated, Any

os.environ["SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS"] = "true"
os.environ["SEMANTICKERNEL_EXPERIMENTAL_GENAI_ENABLE_OTEL_DIAGNOSTICS_SENSITIVE"] = "true"

from openai import AsyncOpenAI
from opentelemetry import trace
from opentelemetry._logs import set_logger_provider
from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from semantic_kernel import Kernel
from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
from semantic_kernel.connectors.ai.open_ai import (
    OpenAIChatCompletion,
    OpenAIChatPromptExecutionSettings,
)
from semantic_kernel.contents import ChatHistory
from semantic_kernel.functions import kernel_function

from tests.collector.reconstruction.conventions import four_calls as fc
from tests.collector.reconstruction.conventions.scripted_chat_server import ScriptedChatServer, Step
from tests.collector.recording import RECORDED, log_from_sdk, save_recording, span_from_sdk

STREAMING = "--streaming" in sys.argv  # get_streaming_chat_message_contents
CONVERSATION = "conv-semantic-kernel" + ("-streaming" if STREAMING else "")
PLUGIN = "travel"


class TravelPlugin:
    @kernel_function(name="get_weather", description="Current weather for a city.")
    def get_weather(self, city: Annotated[str, "the city"]) -> str:
        return fc.get_weather(city)

    @kernel_function(name="get_time", description="Local time in a timezone.")
    def get_time(self, timezone: Annotated[str, "an IANA timezone"]) -> str:
        return fc.get_time(timezone)

    @kernel_function(name="book_table", description="Book a restaurant table.")
    def book_table(
        self,
        booking: Annotated[dict[str, Any], "restaurant, and when: {day, hour}"],
        party_size: Annotated[int, "how many people"],
    ) -> str:
        return fc.book_table(booking, party_size)

    @kernel_function(name="convert_currency", description="Convert euros to a currency.")
    def convert_currency(
        self, amount: Annotated[float, "euros"], currency: Annotated[str, "currency code"]
    ) -> str:
        return fc.convert_currency(amount, currency)


def qualified(step: Step) -> Step:
    """Semantic Kernel names its functions ``<plugin>-<function>`` to the model."""
    if isinstance(step, str):
        return step
    return [{"name": f"{PLUGIN}-{c['name']}", "args": c["args"]} for c in step]


async def converse(url: str, tracer: trace.Tracer, streaming: bool) -> list[str]:
    kernel = Kernel()
    kernel.add_plugin(TravelPlugin(), PLUGIN)
    client = AsyncOpenAI(base_url=url, api_key="test", max_retries=0)
    chat = OpenAIChatCompletion(ai_model_id="gpt-4o", async_client=client)
    settings = OpenAIChatPromptExecutionSettings(
        function_choice_behavior=FunctionChoiceBehavior.Auto()
    )
    history = ChatHistory()
    answers = []
    for question in fc.QUESTIONS:
        with tracer.start_as_current_span(
            "turn", attributes={"gen_ai.conversation.id": CONVERSATION}
        ):
            history.add_user_message(question)
            if streaming:
                parts = [
                    p[0]
                    async for p in chat.get_streaming_chat_message_contents(
                        history, settings, kernel=kernel
                    )
                ]
                text = "".join(str(p.content or "") for p in parts)
                history.add_assistant_message(text)
                answers.append(text)
                continue
            reply = await chat.get_chat_message_content(history, settings, kernel=kernel)
            assert reply is not None
            history.add_message(reply)
            answers.append(str(reply.content))
    return answers


def main() -> None:
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    tracer_provider, logger_provider = TracerProvider(), LoggerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    trace.set_tracer_provider(tracer_provider)
    set_logger_provider(logger_provider)
    handler = LoggingHandler(logger_provider=logger_provider)
    sk_logger = logging.getLogger("semantic_kernel")
    sk_logger.addHandler(handler)
    sk_logger.setLevel(logging.INFO)

    steps: list[Step] = []
    for turn, answer in zip(fc.TURNS, fc.ANSWERS, strict=True):
        steps += [*(qualified(s) for s in turn), answer]
    with ScriptedChatServer(steps) as server:
        tracer = tracer_provider.get_tracer("travel-app")
        answers = asyncio.run(converse(server.url, tracer, STREAMING))
    assert answers == fc.ANSWERS, answers
    expected = [{"name": f"{PLUGIN}-{c['name']}", "args": c["args"]} for c in fc.EXPECTED]
    records = sorted(
        (span_from_sdk(s) for s in spans.get_finished_spans()), key=lambda s: s.start_ns
    )
    # only the records of the conversation's model calls (not, say, connector warnings)
    events = [log_from_sdk(r) for r in logs.get_finished_logs()]
    events = [e for e in events if e.event_name.startswith("gen_ai.")]
    note = (
        "Recorded from semantic-kernel (OpenAIChatCompletion on a scripted server, automatic "
        f"function calling, sensitive diagnostics) by {__name__}: the two turns of four_calls.py."
    )
    save_recording(
        RECORDED / f"semantic-kernel{'-streaming' if STREAMING else ''}-multi-turn.json",
        records,
        events,
        note=note,
        expected=expected,
    )


if __name__ == "__main__":
    main()
