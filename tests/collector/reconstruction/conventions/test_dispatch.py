"""A span is offered only to the conventions it shows a trigger of (conventions.Triggers): every
convention left out must be one whose ``applies`` is false for that span, so the dispatch picks
the convention the full registry scan picks, on recorded spans and on random mixtures of every
convention's scopes, keys, values, names and events."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.collector.otlp_requests import load_requests, records
from tests.collector.recording import FIXTURES, load_recording
from toolscore.collector.reconstruction.control_calls import ControlCalls
from toolscore.collector.reconstruction.conventions import Convention, registry_for
from toolscore.collector.reconstruction.conventions import _dispatch as dispatch
from toolscore.storage.records import SpanEvent, SpanRecord

REGISTRIES = [registry_for(ControlCalls.parse([])), registry_for(ControlCalls.parse(["include"]))]


def _first_full_scan(registry: tuple[Convention, ...], span: SpanRecord) -> str | None:
    for convention in registry:
        try:
            if convention.applies(span):
                return convention.name
        except Exception as exc:  # the scan stops at a convention that raises, too
            return f"{convention.name} raised {type(exc).__name__}"
    return None


def _first_dispatched(registry: tuple[Convention, ...], span: SpanRecord) -> str | None:
    return _first_full_scan(dispatch(registry).conventions_for(span), span)


def _check(span: SpanRecord) -> None:
    for registry in REGISTRIES:
        offered = dispatch(registry).conventions_for(span)
        for convention in registry:
            if convention not in offered:
                try:
                    applies = convention.applies(span)
                except Exception:
                    applies = True  # raising counts as applying: it must be offered
                assert not applies, (convention.name, span)
        assert _first_dispatched(registry, span) == _first_full_scan(registry, span)


# recordings: the convention fixtures, and the request recordings (not npm's package files)
RECORDED = [
    p
    for p in sorted(FIXTURES.rglob("*.json"))
    if "node_modules" not in p.parts and not p.name.startswith("package")
]


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.stem)
def test_recorded_spans_reach_the_convention_the_full_scan_picks(path: Path) -> None:
    if path.name == "requests.json":  # a recording of the OTLP requests themselves
        spans, _ = records(load_requests(path.parent.name).requests)
    else:
        spans, _, _ = load_recording(path)
    assert spans or "logs" in path.read_text()
    for span in spans:
        _check(span)


SCOPES = [
    "",
    "pydantic-ai",
    "pydantic_ai",
    "logfire.openai_agents",
    "strands.telemetry.tracer",
    "gcp.vertex.agent",
    "ai",
    "@mastra/otel-exporter",
    "haystack",
    "openinference.instrumentation.smolagents",
    "opentelemetry.instrumentation.openai.v1",
    "other",
]
KEYS = [
    "pydantic_ai.all_messages",
    "tool_arguments",
    "logfire.msg_template",
    "gen_ai.system",
    "gen_ai.provider.name",
    "gcp.vertex.agent.llm_request",
    "ai.operationId",
    "mastra.span.type",
    "openinference.span.kind",
    "gen_ai.operation.name",
    "gen_ai.tool.name",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "traceloop.span.kind",
    "gen_ai.prompt.0.content",
    "gen_ai.completion.0.role",
    "llm.request.type",
    "unrelated",
]
VALUES: list[object] = [
    "execute_tool",
    "chat",
    "tool",
    "strands-agents",
    "Function: {name}",
    "[]",
    "x",
    None,
    ["list"],
]
NAMES = ["running tool", "execute_tool get", "haystack.agent.step.tool", "chat", "haystack", ""]
EVENTS = [
    "gen_ai.client.inference.operation.details",
    "gen_ai.user.message",
    "gen_ai.choice",
    "other",
]


def test_random_spans_reach_the_convention_the_full_scan_picks() -> None:
    rng = random.Random(7)
    for i in range(3000):
        attrs = {k: rng.choice(VALUES) for k in rng.sample(KEYS, rng.randint(0, 4))}
        events = tuple(
            SpanEvent(rng.choice(EVENTS), 1, {}) for _ in range(rng.choice((0, 0, 1, 2)))
        )
        span = SpanRecord(
            trace_id=f"{i:032x}",
            span_id=f"{i:016x}",
            parent_span_id=None,
            name=rng.choice(NAMES),
            kind=1,
            start_ns=1,
            end_ns=2,
            attributes=attrs,
            scope_name=rng.choice(SCOPES),
            events=events,
        )
        _check(span)
