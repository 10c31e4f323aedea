"""Each convention's example trace (tests/fixtures/recorded/docs) gives the expected calls.

The fixtures hold one trace per convention, written from each instrumentation's docs and source:
the model makes two parallel calls, get_weather then get_time, and each call is visible in
several places.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.collector.recording import DOC_FIXTURES, load_recording
from toolscore.collector.reconstruction.rebuild import reconstruct

FIXTURE_FILES = sorted(DOC_FIXTURES.glob("*.json"))
CONVENTION_OF = {
    "google-adk.json": "google_adk",
    "openinference.json": "openinference",
    "openllmetry-legacy.json": "openllmetry",
    "otel-genai-legacy-events.json": "otel_genai_events",
    "otel-genai.json": "otel_genai",
    "pydantic-ai.json": "pydantic_ai",
    "strands.json": "strands",
    "vercel-ai-sdk.json": "vercel_ai",
}


def test_every_documented_convention_has_a_fixture() -> None:
    assert sorted(p.name for p in FIXTURE_FILES) == sorted(CONVENTION_OF)


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.stem)
def test_fixture_calls_are_reconstructed_once_each_in_message_order(path: Path) -> None:
    spans, logs, expected = load_recording(path)
    result = reconstruct(spans, logs)
    assert [(c.name, c.arguments) for c in result.tool_calls] == [
        (c["name"], c["args"]) for c in expected
    ]
    assert [c.position for c in result.tool_calls] == list(range(len(expected)))
    assert all(c.arguments_ok for c in result.tool_calls)
    assert {c.convention for c in result.tool_calls} == {CONVENTION_OF[path.name]}
    assert result.warnings == ()


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.stem)
def test_fixture_messages_are_a_ragas_conversation(path: Path) -> None:
    spans, logs, expected = load_recording(path)
    result = reconstruct(spans, logs)
    messages = list(result.messages)
    assert messages[0] == {
        "type": "human",
        "content": "What's the weather in Paris and the time in Tokyo?",
    }
    assert result.first_user_message == "What's the weather in Paris and the time in Tokyo?"
    ai_calls = [tc for m in messages if m["type"] == "ai" for tc in m.get("tool_calls", [])]
    assert ai_calls == [{"name": c["name"], "args": c["args"]} for c in expected]
    assert {m["type"] for m in messages} <= {"human", "ai", "tool"}
    assert all(isinstance(m["content"], str) for m in messages)


WITH_RESULTS = [p for p in FIXTURE_FILES if p.name != "otel-genai-legacy-events.json"]


@pytest.mark.parametrize("path", WITH_RESULTS, ids=lambda p: p.stem)
def test_tool_results_follow_the_calls_when_recorded(path: Path) -> None:
    spans, logs, _ = load_recording(path)
    messages = list(reconstruct(spans, logs).messages)
    types = [m["type"] for m in messages]
    first_ai = types.index("ai")
    assert types[first_ai + 1 : first_ai + 3] == ["tool", "tool"]
    assert "18" in messages[first_ai + 1]["content"]  # get_weather's result comes first


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.stem)
def test_calls_point_at_the_span_that_ran_them(path: Path) -> None:
    spans, logs, _ = load_recording(path)
    by_id = {s.span_id: s for s in spans}
    for call in reconstruct(spans, logs).tool_calls:
        assert call.span_id in by_id
        assert call.trace_id == by_id[call.span_id].trace_id


def test_root_span_is_the_trace_root() -> None:
    spans, logs, _ = load_recording(DOC_FIXTURES / "otel-genai.json")
    assert reconstruct(spans, logs).root_span_id == "00f067aa0ba90001"
