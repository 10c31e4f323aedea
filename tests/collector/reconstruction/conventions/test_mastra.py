"""Mastra (@mastra/otel-exporter): the recorded Agent conversation.

The recording (record_mastra.py + mastra/record_mastra.mjs) is real @mastra/core 1.71 with
@mastra/otel-exporter 1.4 output. Its ``chat`` spans show no calls and its step spans' inputs
are summaries (``"[tool: get_weather]"``): the calls come from the step outputs and the tool
spans, the user's messages from the generation's prompt.
"""

from __future__ import annotations

from tests.collector.pipeline.spans import span
from tests.collector.reconstruction.conventions import four_calls as fc
from tests.collector.recording import RECORDED, load_recording
from toolscore.collector.reconstruction.conventions import Exchange, ToolExecution
from toolscore.collector.reconstruction.conventions.mastra import Mastra, step_output
from toolscore.collector.reconstruction.rebuild import reconstruct

RECORDING = RECORDED / "mastra-multi-turn.json"


def test_the_four_calls_are_rebuilt_in_order_from_the_step_spans() -> None:
    spans, logs, _ = load_recording(RECORDING)
    result = reconstruct(spans, logs)
    assert [{"name": c.name, "args": c.arguments} for c in result.tool_calls] == fc.EXPECTED
    assert [c.call_id for c in result.tool_calls] == [
        "call_1_0",
        "call_1_1",
        "call_3_0",
        "call_4_0",
    ]
    assert {c.convention for c in result.tool_calls} == {"mastra"}
    tool_spans = {s.span_id for s in spans if s.attributes.get("mastra.span.type") == "tool_call"}
    assert {c.span_id for c in result.tool_calls} == tool_spans  # each ran, and was matched
    assert not result.warnings


def test_the_transcript_is_the_users_ragas_conversation() -> None:
    spans, logs, _ = load_recording(RECORDING)
    messages = list(reconstruct(spans, logs).messages)
    assert [m["type"] for m in messages] == [
        "human", "ai", "tool", "tool", "ai",
        "human", "ai", "tool", "ai", "tool", "ai",
    ]  # fmt: skip
    assert [m["content"] for m in messages if m["type"] == "human"] == fc.QUESTIONS
    answers = [m["content"] for m in messages if m["type"] == "ai" and "tool_calls" not in m]
    assert answers == fc.ANSWERS
    assert "[tool:" not in str(messages)  # the step spans' summaries are not read


def test_only_generation_step_and_tool_spans_give_observations() -> None:
    spans, _, _ = load_recording(RECORDING)
    kinds: dict[str, set[str]] = {}
    for s in spans:
        for observation in Mastra().extract(s):
            kind = "exchange" if isinstance(observation, Exchange) else "execution"
            kinds.setdefault(str(s.attributes["mastra.span.type"]), set()).add(kind)
    assert kinds == {
        "model_generation": {"exchange"},
        "model_step": {"exchange"},
        "tool_call": {"execution"},
    }


def test_older_exporters_tool_input_keys_are_read() -> None:
    old = span(
        "1",
        "2",
        name="tool.execute",
        attrs={
            "mastra.span.type": "tool_call",
            "gen_ai.tool.name": "get_weather",
            "gen_ai.tool.input": '{"city": "Paris"}',
            "gen_ai.tool.output": "18C",
        },
    )
    (execution,) = Mastra().extract(old)
    assert isinstance(execution, ToolExecution)
    assert (execution.name, execution.arguments, execution.result) == (
        "get_weather",
        '{"city": "Paris"}',
        "18C",
    )


def test_a_step_with_neither_text_nor_calls_is_nothing() -> None:
    assert step_output('{"text": "", "toolCalls": []}') == ()
    assert step_output("not json") == ()
