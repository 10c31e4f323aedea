"""Record real smolagents spans (openinference-instrumentation-smolagents) into
tests/fixtures/recorded/smolagents-openinference-multi-turn.json (run by hand, not by pytest).

smolagents is not a test dependency (it would pull its own pins into the project's environment),
so it gets its own virtualenv; test_recorded.py and test_frameworks_e2e.py replay the recording
without it. To refresh it::

    python -m venv /tmp/venv-smolagents
    /tmp/venv-smolagents/bin/pip install smolagents openinference-instrumentation-smolagents \
        opentelemetry-sdk
    PYTHONPATH=. /tmp/venv-smolagents/bin/python \
        tests/collector/reconstruction/conventions/record_smolagents.py

smolagents' own ``OpenAIModel`` (the class the instrumentation wraps; a subclass of ``Model``
defined here would not be traced) talks to a scripted chat-completions server on 127.0.0.1
(scripted_chat_server.py) and drives a ``ToolCallingAgent`` through the conversation of
four_calls.py (the same agent, ``reset=False``, for turn 2), answering through smolagents'
own ``final_answer`` tool as a real model must; the tools run for real. The conversation is the
OpenInference ``session.id`` (``using_session``).
"""

from __future__ import annotations

from openinference.instrumentation import using_session
from openinference.instrumentation.smolagents import SmolagentsInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from smolagents import OpenAIModel, ToolCallingAgent, tool

from tests.collector.reconstruction.conventions import four_calls as fc
from tests.collector.reconstruction.conventions.scripted_chat_server import ScriptedChatServer, Step
from tests.collector.recording import RECORDED, save_recording, span_from_sdk

SESSION = "sess-smolagents"


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: the city
    """
    return fc.get_weather(city)


@tool
def get_time(timezone: str) -> str:
    """Local time in a timezone.

    Args:
        timezone: an IANA timezone
    """
    return fc.get_time(timezone)


@tool
def book_table(booking: dict, party_size: int) -> str:  # type: ignore[type-arg]
    """Book a restaurant table.

    Args:
        booking: the restaurant and when ({"restaurant": ..., "when": {"day": ..., "hour": ...}})
        party_size: how many people
    """
    return fc.book_table(booking, party_size)


@tool
def convert_currency(amount: float, currency: str) -> str:
    """Convert an amount of euros to another currency.

    Args:
        amount: the amount in euros
        currency: the target currency code
    """
    return fc.convert_currency(amount, currency)


def main() -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    SmolagentsInstrumentor().instrument(tracer_provider=provider)
    steps: list[Step] = []
    for turn, answer in zip(fc.TURNS, fc.ANSWERS, strict=True):
        steps += [*turn, [{"name": "final_answer", "args": {"answer": answer}}]]
    with ScriptedChatServer(steps) as server:
        model = OpenAIModel(model_id="gpt-4o", api_base=server.url, api_key="test")
        agent = ToolCallingAgent(
            tools=[get_weather, get_time, book_table, convert_currency],
            model=model,
            max_steps=5,
            verbosity_level=0,
        )
        with using_session(SESSION):
            answers = [agent.run(fc.QUESTION_1), agent.run(fc.QUESTION_2, reset=False)]
    assert answers == fc.ANSWERS, answers
    spans = sorted(
        (span_from_sdk(s) for s in memory.get_finished_spans()), key=lambda s: s.start_ns
    )
    note = (
        "Recorded from smolagents (ToolCallingAgent, OpenAIModel on a scripted server) with "
        f"openinference-instrumentation-smolagents by {__name__}: the two turns of four_calls.py."
    )
    save_recording(
        RECORDED / "smolagents-openinference-multi-turn.json",
        spans,
        note=note,
        expected=fc.EXPECTED,
    )


if __name__ == "__main__":
    main()
