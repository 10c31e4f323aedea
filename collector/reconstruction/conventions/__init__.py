"""Registry of instrumentation conventions.

Each module detects, per span, whether it understands it (:meth:`Convention.applies`); the first
module in :data:`REGISTRY` order that does extracts the span's observations, so conventions may be
mixed in one trace. Specific conventions come before the generic OTel GenAI ones they extend.
A convention's ``triggers`` (:class:`Triggers`: scopes, attribute keys, name prefixes, events)
say which spans its ``applies`` can accept; a span is checked only against the conventions it
shows a trigger of (tests/collector/reconstruction/conventions/test_dispatch.py checks none is
skipped wrongly).
Adding a convention = adding one module and one line here.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from functools import cache

from toolscore.collector.reconstruction.control_calls import (
    SMOLAGENTS_FINAL_ANSWER,
    ControlCalls,
)
from toolscore.collector.reconstruction.conventions.base import (
    Convention,
    Exchange,
    Message,
    Observation,
    ToolCallRef,
    ToolExecution,
    Triggers,
)
from toolscore.collector.reconstruction.conventions.google_adk import GoogleADK
from toolscore.collector.reconstruction.conventions.haystack import Haystack
from toolscore.collector.reconstruction.conventions.logfire_openai_agents import LogfireOpenAIAgents
from toolscore.collector.reconstruction.conventions.mastra import Mastra
from toolscore.collector.reconstruction.conventions.openinference import OpenInference
from toolscore.collector.reconstruction.conventions.openllmetry import OpenLLMetry
from toolscore.collector.reconstruction.conventions.otel_genai import OtelGenAI
from toolscore.collector.reconstruction.conventions.otel_genai_events import OtelGenAIEvents
from toolscore.collector.reconstruction.conventions.pydantic_ai import PydanticAI
from toolscore.collector.reconstruction.conventions.smolagents import Smolagents
from toolscore.collector.reconstruction.conventions.strands import Strands
from toolscore.collector.reconstruction.conventions.vercel_ai import VercelAI
from toolscore.storage.records import LogRecordData, SpanRecord

__all__ = [
    "REGISTRY",
    "Convention",
    "Exchange",
    "Message",
    "Observation",
    "ToolCallRef",
    "ToolExecution",
    "Triggers",
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


class _Dispatch:
    """The conventions of a registry, in its order, that a span shows a trigger of
    (:class:`Triggers`): a span is checked against those only, not against every convention."""

    def __init__(self, registry: tuple[Convention, ...]) -> None:
        self.registry = registry
        self.always = 0  # bit i: registry[i]
        self.by_scope: dict[str, int] = defaultdict(int)
        by_key: dict[str, int] = defaultdict(int)
        self.prefixes: list[tuple[str, int]] = []
        self.events = 0
        for i, convention in enumerate(registry):
            bit = 1 << i
            triggers = getattr(convention, "triggers", None)
            if not isinstance(triggers, Triggers):
                self.always |= bit
                continue
            for scope in triggers.scopes:
                self.by_scope[scope] |= bit
            for key in triggers.keys:
                by_key[key] |= bit
            self.prefixes += [(prefix, bit) for prefix in triggers.name_prefixes]
            if triggers.events:
                self.events |= bit
        self.by_key = dict(by_key)
        self.keys = frozenset(by_key)
        self._chosen: dict[int, tuple[Convention, ...]] = {}

    def conventions_for(self, span: SpanRecord) -> tuple[Convention, ...]:
        mask = self.always | self.by_scope.get(span.scope_name, 0)
        for key in self.keys.intersection(span.attributes):
            mask |= self.by_key[key]
        if span.events:
            mask |= self.events
        for prefix, bit in self.prefixes:
            if span.name.startswith(prefix):
                mask |= bit
        chosen = self._chosen.get(mask)
        if chosen is None:
            chosen = tuple(c for i, c in enumerate(self.registry) if mask >> i & 1)
            self._chosen[mask] = chosen
        return chosen


_DISPATCH: dict[int, _Dispatch] = {}


def _dispatch(registry: tuple[Convention, ...]) -> _Dispatch:
    found = _DISPATCH.get(id(registry))
    if found is None or found.registry is not registry:
        found = _Dispatch(registry)
        if len(_DISPATCH) < 64:  # the registries of registry_for, and a few of tests
            _DISPATCH[id(registry)] = found  # holds the registry: its id stays its own
    return found


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
    offered = _dispatch(registry) if isinstance(registry, tuple) else None
    for span in spans:
        for convention in registry if offered is None else offered.conventions_for(span):
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
        starts = {span.span_id: span.start_ns for span in spans}
        for convention in registry:
            try:
                found = convention.extract_logs(logs)
                observations.extend(_at_span_start(o, starts) for o in found)
            except Exception as exc:
                warnings.append(
                    f"{convention.name}: could not read log records: {type(exc).__name__}: {exc}"
                )
    return observations, warnings


def _at_span_start(observation: Observation, starts: dict[str, int]) -> Observation:
    """A model call read from log records sits where its span starts, when the span is known:
    the records' own times (a coarse or missing clock, a late batch) never move it."""
    if isinstance(observation, Exchange) and observation.span_id in starts:
        return replace(observation, sort_ns=starts[observation.span_id])
    return observation
