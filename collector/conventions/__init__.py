"""Registry of instrumentation conventions.

Each module detects, per span, whether it understands it (:meth:`Convention.applies`); the first
module in :data:`REGISTRY` order that does extracts the span's observations, so conventions may be
mixed in one trace. Specific conventions come before the generic OTel GenAI ones they extend.
Adding a convention = adding one module and one line here.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from toolscore.collector.control_calls import (
    SMOLAGENTS_FINAL_ANSWER,
    ControlCalls,
)
from toolscore.collector.conventions.base import (
    Convention,
    Exchange,
    Message,
    Observation,
    ToolCallRef,
    ToolExecution,
)
from toolscore.collector.conventions.google_adk import GoogleADK
from toolscore.collector.conventions.haystack import Haystack
from toolscore.collector.conventions.logfire_openai_agents import LogfireOpenAIAgents
from toolscore.collector.conventions.mastra import Mastra
from toolscore.collector.conventions.openinference import OpenInference
from toolscore.collector.conventions.openllmetry import OpenLLMetry
from toolscore.collector.conventions.otel_genai import OtelGenAI
from toolscore.collector.conventions.otel_genai_events import OtelGenAIEvents
from toolscore.collector.conventions.pydantic_ai import PydanticAI
from toolscore.collector.conventions.smolagents import Smolagents
from toolscore.collector.conventions.strands import Strands
from toolscore.collector.conventions.vercel_ai import VercelAI
from toolscore.collector.model import LogRecordData, SpanRecord

__all__ = [
    "REGISTRY",
    "Convention",
    "Exchange",
    "Message",
    "Observation",
    "ToolCallRef",
    "ToolExecution",
    "extract_observations",
    "registry_for",
]


@cache
def _registry(final_answer: bool) -> tuple[Convention, ...]:
    return (
        PydanticAI(),
        LogfireOpenAIAgents(),
        Strands(),
        GoogleADK(),
        VercelAI(),
        Mastra(),  # before OtelGenAI: its execute_tool spans are GenAI-shaped
        Haystack(),
        Smolagents(control_calls=final_answer),  # OpenInference spans, smolagents' own history
        OpenInference(),
        OtelGenAI(),
        OpenLLMetry(),
        OtelGenAIEvents(),
    )


def registry_for(control: ControlCalls) -> tuple[Convention, ...]:
    """The registry reading control calls as ``control`` says (smolagents' ``final_answer`` is
    turned into the run's text answer while its spans are read)."""
    return _registry(control.includes(SMOLAGENTS_FINAL_ANSWER))


REGISTRY: tuple[Convention, ...] = _registry(False)


def extract_observations(
    spans: Sequence[SpanRecord],
    logs: Sequence[LogRecordData] = (),
    registry: Sequence[Convention] = REGISTRY,
    readers: dict[str, str] | None = None,
) -> tuple[list[Observation], list[str]]:
    """Run every span (and the log records) through the registry. Never raises.

    Returns the observations and warnings (a module that failed on a span is reported, and the
    span is skipped, so one odd span never loses the rest of the conversation). ``readers``, when
    given, gets span id -> the name of the convention that read the span.
    """
    observations: list[Observation] = []
    warnings: list[str] = []
    for span in spans:
        for convention in registry:
            try:
                if not convention.applies(span):
                    continue
                if readers is not None:
                    readers[span.span_id] = convention.name
                observations.extend(convention.extract(span))
            except Exception as exc:
                warnings.append(
                    f"{convention.name}: could not read span {span.span_id} ({span.name!r}): "
                    f"{type(exc).__name__}: {exc}"
                )
            break
    if logs:
        for convention in registry:
            try:
                observations.extend(convention.extract_logs(logs))
            except Exception as exc:
                warnings.append(
                    f"{convention.name}: could not read log records: {type(exc).__name__}: {exc}"
                )
    return observations, warnings
