"""Record real Strands Agents spans into tests/fixtures/recorded/ (run by hand, not by pytest).

strands-agents pins OpenTelemetry and other packages differently from this project, so it lives
in its own virtualenv and is not a test dependency; its recordings are checked by
test_recorded.py. To refresh them::

    python -m venv /tmp/strands-venv && /tmp/strands-venv/bin/pip install strands-agents
    PYTHONPATH=. /tmp/strands-venv/bin/python \
        tests/collector/reconstruction/conventions/record_strands.py

A scripted model (a ``strands.models.Model`` yielding Bedrock-style stream events) requests two
parallel tool calls, then answers; a second run in the same agent makes the multi-turn case.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from strands import Agent, tool
from strands.models.model import Model

from tests.collector.recording import RECORDED, save_recording, span_from_sdk

Step = list[tuple[str, dict[str, Any], str]] | str


class ScriptedModel(Model):
    def __init__(self, steps: list[Step]) -> None:
        self.steps = list(steps)

    def update_config(self, **model_config: Any) -> None:
        pass

    def get_config(self) -> Any:
        return {"model_id": "scripted"}

    def structured_output(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError

    async def stream(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        step = self.steps.pop(0)
        yield {"messageStart": {"role": "assistant"}}
        if isinstance(step, str):
            yield {"contentBlockDelta": {"delta": {"text": step}}}
            yield {"contentBlockStop": {}}
            stop = "end_turn"
        else:
            for name, args, call_id in step:
                start = {"toolUse": {"toolUseId": call_id, "name": name}}
                yield {"contentBlockStart": {"start": start}}
                yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(args)}}}}
                yield {"contentBlockStop": {}}
            stop = "tool_use"
        yield {"messageStop": {"stopReason": stop}}
        usage = {"inputTokens": 5, "outputTokens": 5, "totalTokens": 10}
        yield {"metadata": {"usage": usage, "metrics": {"latencyMs": 1}}}


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"18C in {city}"


@tool
def get_time(timezone: str) -> str:
    """Local time in a timezone."""
    return f"09:00 in {timezone}"


PARALLEL = [
    {"name": "get_weather", "args": {"city": "Paris"}},
    {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}},
]


def main() -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    trace.set_tracer_provider(provider)
    mode = "latest" if os.environ.get("OTEL_SEMCONV_STABILITY_OPT_IN") else "default"

    calls = [(c["name"], c["args"], f"tooluse_{i}") for i, c in enumerate(PARALLEL)]
    agent = Agent(
        model=ScriptedModel([calls, "18C and 09:00"]),
        tools=[get_weather, get_time],
        trace_attributes={"session.id": "sess-strands"},
        callback_handler=None,
    )
    agent("What's the weather in Paris and the time in Tokyo?")
    spans = [span_from_sdk(s) for s in memory.get_finished_spans()]
    note = f"Recorded from strands-agents ({mode} semconv) by {__name__}: parallel calls."
    save_recording(RECORDED / f"strands-{mode}-parallel.json", spans, note=note, expected=PARALLEL)

    memory.clear()
    agent = Agent(
        model=ScriptedModel(
            [
                [("get_weather", {"city": "Paris"}, "tooluse_a")],
                "18C",
                [("get_time", {"timezone": "Asia/Tokyo"}, "tooluse_b")],
                "09:00",
            ]
        ),
        tools=[get_weather, get_time],
        trace_attributes={"session.id": "sess-strands-mt"},
        callback_handler=None,
    )
    agent("Weather in Paris?")
    agent("And the time in Tokyo?")
    spans = [span_from_sdk(s) for s in memory.get_finished_spans()]
    note = f"Recorded from strands-agents ({mode} semconv) by {__name__}: two turns."
    save_recording(
        RECORDED / f"strands-{mode}-multi-turn.json", spans, note=note, expected=PARALLEL
    )


if __name__ == "__main__":
    main()
