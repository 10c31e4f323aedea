"""Reading Ragas MultiTurnSample JSON: what is accepted, and errors that say where."""

from __future__ import annotations

import pytest

from toolscore.scorer import SampleError, ToolCall, parse_reference, parse_sample


def refused(obj: object, **kwargs: object) -> str:
    with pytest.raises(SampleError) as info:
        parse_sample(obj, **kwargs)  # type: ignore[arg-type]
    return str(info.value)


def test_predicted_calls_are_every_ai_messages_calls_in_order():
    sample = parse_sample(
        {
            "id": 7,
            "user_input": [
                {"type": "human", "content": "weather and time?"},
                {"type": "ai", "content": "", "tool_calls": [{"name": "w", "args": {"c": "P"}}]},
                {"type": "tool", "content": "18C"},
                {"type": "ai", "content": "", "tool_calls": [{"name": "t", "args": {}}]},
                {"type": "tool", "content": "21:04"},
                {"type": "ai", "content": "done"},
            ],
            "reference_tool_calls": [{"name": "w", "args": {"c": "P"}}],
        }
    )
    assert sample.id == 7
    assert sample.predicted_tool_calls == (ToolCall("w", {"c": "P"}), ToolCall("t", {}))
    assert [m.type for m in sample.user_input] == ["human", "ai", "tool", "ai", "tool", "ai"]
    assert sample.reference_tool_calls == (ToolCall("w", {"c": "P"}),)


def test_missing_reference_is_none_not_empty():
    assert parse_sample({"user_input": []}).reference_tool_calls is None
    assert parse_sample({"user_input": [], "reference_tool_calls": []}).reference_tool_calls == ()


def test_message_without_type_is_read_as_pydantic_reads_it():
    sample = parse_sample(
        {
            "user_input": [
                {"content": "", "tool_calls": [{"name": "a", "args": {}}]},
                {"content": "x"},
            ]
        }
    )
    assert [m.type for m in sample.user_input] == ["ai", "human"]


def test_extra_keys_are_ignored_like_ragas_does():
    sample = parse_sample(
        {
            "user_input": [
                {"type": "ai", "content": "", "tool_calls": [{"name": "a", "args": {}, "id": "c1"}]}
            ],
            "reference_tool_calls": [],
            "rubrics": {"r": "x"},
            "something_else": 1,
        }
    )
    assert sample.predicted_tool_calls == (ToolCall("a", {}),)


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ("text", "a sample must be a JSON object, got a string"),
        ({}, "user_input: missing"),
        ({"user_input": "hello"}, "user_input: must be an array of messages, got a string"),
        ({"user_input": [1]}, "user_input[0]: a message must be an object, got a number"),
        (
            {"user_input": [{"type": "human", "content": "x"}, {"type": "bot", "content": "x"}]},
            "user_input[1].type: unknown message type 'bot'",
        ),
        ({"user_input": [{"type": "ai"}]}, "user_input[0].content: missing"),
        (
            {"user_input": [{"type": "ai", "content": "", "tool_calls": [{"args": {}}]}]},
            "user_input[0].tool_calls[0].name: missing",
        ),
        (
            {
                "user_input": [
                    {"type": "ai", "content": "", "tool_calls": [{"name": "a", "args": 1}]}
                ]
            },
            "user_input[0].tool_calls[0].args: must be an object, got a number",
        ),
        (
            {"user_input": [{"type": "ai", "content": "", "tool_calls": {}}]},
            "user_input[0].tool_calls: must be an array of tool calls",
        ),
        (
            {"user_input": [{"type": "ai", "content": "x"}, {"type": "tool", "content": "r"}]},
            "user_input[1]: a tool message must follow an ai message that called tools",
        ),
        (
            {
                "user_input": [
                    {"type": "ai", "content": "", "tool_calls": [{"name": "a", "args": {}}]},
                    {"type": "human", "content": "x"},
                    {"type": "tool", "content": "r"},
                ]
            },
            "user_input[2]: a tool message must follow an ai message or another tool message",
        ),
        (
            {"user_input": [], "reference_tool_calls": [{"name": "a"}]},
            "reference_tool_calls[0].args: missing",
        ),
        (
            {"user_input": [], "reference_tool_calls": {"name": "a", "args": {}}},
            "reference_tool_calls: must be an array",
        ),
        ({"user_input": [], "reference_tool_calls": [[]]}, "reference_tool_calls[0]: a group"),
        ({"user_input": [], "reference": 5}, "reference: must be a string or null"),
        ({"user_input": [], "reference_topics": ["a", 1]}, "reference_topics[1]: must be a string"),
    ],
)
def test_refused_samples_say_what_and_where(obj, message):
    assert refused(obj).startswith(message)


def test_line_number_prefixes_the_error():
    assert refused({"user_input": 1}, line=12).startswith("line 12: user_input:")


def test_reference_groups_for_grouped_order():
    reference = parse_reference(
        [
            {"name": "a", "args": {}},
            [{"name": "b", "args": {"x": 1}}, {"name": "c", "args": {}}],
        ]
    )
    assert reference == (ToolCall("a", {}), (ToolCall("b", {"x": 1}), ToolCall("c", {})))
    with pytest.raises(SampleError, match=r"reference_tool_calls\[1\]\[0\]\.name: missing"):
        parse_reference([{"name": "a", "args": {}}, [{"args": {}}]])
