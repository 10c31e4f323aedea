"""Haystack (opentelemetry-haystack): the recorded Agent conversation and Haystack's message JSON.

The recording (record_haystack.py) is real haystack-ai 3.4 output with content tracing on.
"""

from __future__ import annotations

import dataclasses

from tests.collector.pipeline.spans import span
from tests.collector.reconstruction.conventions import four_calls as fc
from tests.collector.recording import RECORDED, load_recording
from toolscore.collector.reconstruction.conventions.haystack import Haystack, chat_messages
from toolscore.collector.reconstruction.rebuild import reconstruct

RECORDING = RECORDED / "haystack-multi-turn.json"


def test_the_four_calls_are_rebuilt_in_order_with_their_ids() -> None:
    spans, logs, _ = load_recording(RECORDING)
    result = reconstruct(spans, logs)
    assert [{"name": c.name, "args": c.arguments} for c in result.tool_calls] == fc.EXPECTED
    assert [c.call_id for c in result.tool_calls] == [
        "call_1_0",
        "call_1_1",
        "call_3_0",
        "call_4_0",
    ]
    assert {c.convention for c in result.tool_calls} == {"haystack"}
    assert all(c.span_id for c in result.tool_calls)  # each attached to its tool span
    tool_spans = {s.span_id for s in spans if s.name == "haystack.agent.step.tool"}
    assert {c.span_id for c in result.tool_calls} == tool_spans
    assert not result.warnings


def test_the_transcript_is_the_users_ragas_conversation() -> None:
    spans, logs, _ = load_recording(RECORDING)
    messages = list(reconstruct(spans, logs).messages)
    assert [m["content"] for m in messages if m["type"] == "human"] == fc.QUESTIONS
    answers = [m["content"] for m in messages if m["type"] == "ai" and "tool_calls" not in m]
    assert answers == fc.ANSWERS
    assert len([m for m in messages if m["type"] == "tool"]) == 4


def test_without_content_tracing_the_tool_spans_still_name_the_calls() -> None:
    spans, logs, _ = load_recording(RECORDING)
    content = ("haystack.agent.step.llm.input", "haystack.agent.step.llm.output")
    bare = [
        dataclasses.replace(
            s,
            attributes={
                k: v
                for k, v in s.attributes.items()
                if k not in content and not k.startswith("haystack.agent.step.tool.")
            },
        )
        for s in spans
    ]
    result = reconstruct(bare, logs)
    assert [c.name for c in result.tool_calls] == [c["name"] for c in fc.EXPECTED]
    assert all(c.arguments is None for c in result.tool_calls)


def test_old_haystack_message_keys_and_tool_errors() -> None:
    old = [{"_role": "assistant", "_content": [{"tool_call": {"tool_name": "f", "arguments": {}}}]}]
    assert [(m.role, [c.name for c in m.tool_calls]) for m in chat_messages(old)] == [
        ("assistant", ["f"])
    ]
    failed = span(
        "1",
        "2",
        name="haystack.agent.step.tool",
        attrs={"haystack.tool.name": "f", "haystack.tool.error": True},
    )
    (execution,) = Haystack().extract(failed)
    assert getattr(execution, "failed", False) is True


def test_non_chat_components_give_nothing() -> None:
    retriever = span(
        "1",
        "3",
        name="haystack.component.run",
        attrs={"haystack.component.output": '{"documents": []}'},
    )
    assert Haystack().extract(retriever) == []
