"""The model's own output is read in every message encoding, wherever a convention puts it.

Each case is one model call asking for the two parallel calls of the shared fixtures
(get_weather(city=Paris), get_time(timezone=Asia/Tokyo)) in one encoding, then a second model
call whose history replays them with their results: the rebuilt calls are the two, once each,
and the messages are a valid Ragas sample.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.collector.reconstruction.test_reconstruct import span
from toolscore.collector.reconstruction.conventions.messages import read_messages
from toolscore.collector.reconstruction.rebuild import reconstruct
from toolscore.scorer import parse_sample

EXPECTED = [
    {"name": "get_weather", "args": {"city": "Paris"}},
    {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}},
]
QUESTION = "What's the weather in Paris and the time in Tokyo?"
ARGS = [json.dumps(c["args"]) for c in EXPECTED]


def _openai_calls() -> list[dict[str, Any]]:
    return [
        {"id": f"call_{i}", "type": "function", "function": {"name": c["name"], "arguments": a}}
        for i, (c, a) in enumerate(zip(EXPECTED, ARGS, strict=True))
    ]


def _lc(cls: str, **kwargs: Any) -> dict[str, Any]:
    return {"lc": 1, "type": "constructor", "id": ["langchain", "schema", "messages", cls],
            "kwargs": kwargs}  # fmt: skip


def _lc_ai() -> dict[str, Any]:
    calls = [{"name": c["name"], "args": c["args"], "id": f"call_{i}", "type": "tool_call"}
             for i, c in enumerate(EXPECTED)]  # fmt: skip
    return _lc("AIMessage", content="", tool_calls=calls,
               additional_kwargs={"tool_calls": _openai_calls()})  # fmt: skip


def _results_openai() -> list[dict[str, Any]]:
    return [
        {"role": "tool", "tool_call_id": "call_0", "content": "18C"},
        {"role": "tool", "tool_call_id": "call_1", "content": "09:00"},
    ]


# encoding -> (output of call 1, history of call 2 after the question), as attribute values
ENCODINGS: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # LiteLLM: empty parts, OpenAI tool_calls beside them; each call also flattened
    "litellm parts beside": (
        {
            "gen_ai.output.messages": json.dumps(
                [
                    {
                        "role": "assistant",
                        "parts": [],
                        "tool_calls": _openai_calls(),
                        "finish_reason": "tool_calls",
                    }
                ]
            ),
            **{
                f"gen_ai.completion.{i}.function_call.{k}": v
                for i, (c, a) in enumerate(zip(EXPECTED, ARGS, strict=True))
                for k, v in (("name", c["name"]), ("arguments", a))
            },
        },
        {
            "gen_ai.input.messages": json.dumps(
                [
                    {"role": "user", "parts": [{"type": "text", "content": QUESTION}]},
                    {"role": "assistant", "parts": [], "tool_calls": _openai_calls()},
                    *[
                        {
                            "role": "tool",
                            "parts": [{"type": "text", "content": r["content"]}],
                            "tool_call_id": r["tool_call_id"],
                        }
                        for r in _results_openai()
                    ],
                ]
            )
        },
    ),
    # the calls only in the legacy flattened function_call keys (parts left empty)
    "flattened function_call": (
        {
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": []}]),
            **{
                f"gen_ai.completion.{i}.function_call.{k}": v
                for i, (c, a) in enumerate(zip(EXPECTED, ARGS, strict=True))
                for k, v in (("name", c["name"]), ("arguments", a))
            },
        },
        {
            "gen_ai.input.messages": json.dumps(
                [
                    {"role": "user", "content": QUESTION},
                    {"role": "assistant", "content": None, "tool_calls": _openai_calls()},
                    *_results_openai(),
                ]
            )
        },
    ),
    # LangSmith's OTel export: LangChain serialized messages and an LLMResult
    "langchain serialized": (
        {
            "langsmith.span.kind": "llm",
            "gen_ai.completion": json.dumps(
                {
                    "generations": [[{"text": "", "type": "ChatGeneration", "message": _lc_ai()}]],
                    "llm_output": None,
                }
            ),
        },
        {
            "langsmith.span.kind": "llm",
            "gen_ai.prompt": json.dumps(
                {
                    "messages": [
                        [
                            _lc("HumanMessage", content=QUESTION),
                            _lc_ai(),
                            _lc("ToolMessage", content="18C", tool_call_id="call_0"),
                            _lc("ToolMessage", content="09:00", tool_call_id="call_1"),
                        ]
                    ]
                }
            ),
        },
    ),
    "anthropic tool_use blocks": (
        {
            "gen_ai.output.messages": json.dumps(
                [
                    {
                        "role": "assistant",
                        "content": [
                            {"type": "text", "text": "Let me look."},
                            *[
                                {
                                    "type": "tool_use",
                                    "id": f"toolu_{i}",
                                    "name": c["name"],
                                    "input": c["args"],
                                }
                                for i, c in enumerate(EXPECTED)
                            ],
                        ],
                    }
                ]
            )
        },
        {
            "gen_ai.input.messages": json.dumps(
                [
                    {"role": "user", "content": QUESTION},
                    {
                        "role": "assistant",
                        "content": [
                            {
                                "type": "tool_use",
                                "id": f"toolu_{i}",
                                "name": c["name"],
                                "input": c["args"],
                            }
                            for i, c in enumerate(EXPECTED)
                        ],
                    },
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": "toolu_0", "content": "18C"},
                            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "09:00"},
                        ],
                    },
                ]
            )
        },
    ),
    "gemini functionCall parts": (
        {
            "gen_ai.output.messages": json.dumps(
                [
                    {
                        "role": "model",
                        "parts": [
                            {"functionCall": {"name": c["name"], "args": c["args"]}}
                            for c in EXPECTED
                        ],
                    }
                ]
            )
        },
        {
            "gen_ai.input.messages": json.dumps(
                [
                    {"role": "user", "parts": [{"text": QUESTION}]},
                    {
                        "role": "model",
                        "parts": [
                            {"functionCall": {"name": c["name"], "args": c["args"]}}
                            for c in EXPECTED
                        ],
                    },
                    {
                        "role": "user",
                        "parts": [
                            {"functionResponse": {"name": "get_weather", "response": {"r": "18C"}}},
                            {"functionResponse": {"name": "get_time", "response": {"r": "09:00"}}},
                        ],
                    },
                ]
            )
        },
    ),
    "generic parts": (
        {
            "gen_ai.output.messages": json.dumps(
                [
                    {
                        "role": "assistant",
                        "parts": [
                            {
                                "type": "generic",
                                "generic_type": "function_call",
                                "call_id": f"fc_{i}",
                                "name": c["name"],
                                "arguments": a,
                            }
                            for i, (c, a) in enumerate(zip(EXPECTED, ARGS, strict=True))
                        ],
                    }
                ]
            )
        },
        {
            "gen_ai.input.messages": json.dumps(
                [
                    {"role": "user", "parts": [{"type": "text", "content": QUESTION}]},
                    {
                        "role": "assistant",
                        "parts": [
                            {
                                "type": "tool_call",
                                "id": f"fc_{i}",
                                "name": c["name"],
                                "arguments": c["args"],
                            }
                            for i, c in enumerate(EXPECTED)
                        ],
                    },
                    {
                        "role": "tool",
                        "parts": [
                            {"type": "tool_call_response", "id": "fc_0", "response": "18C"},
                            {"type": "tool_call_response", "id": "fc_1", "response": "09:00"},
                        ],
                    },
                ]
            )
        },
    ),
    "responses api items": (
        {
            "gen_ai.output.messages": json.dumps(
                {
                    "output": [
                        {
                            "type": "function_call",
                            "call_id": f"fc_{i}",
                            "name": c["name"],
                            "arguments": a,
                        }
                        for i, (c, a) in enumerate(zip(EXPECTED, ARGS, strict=True))
                    ]
                }
            )
        },
        {
            "gen_ai.input.messages": json.dumps(
                [
                    {"role": "user", "content": QUESTION},
                    *[
                        {
                            "type": "function_call",
                            "call_id": f"fc_{i}",
                            "name": c["name"],
                            "arguments": a,
                        }
                        for i, (c, a) in enumerate(zip(EXPECTED, ARGS, strict=True))
                    ],
                    {"type": "function_call_output", "call_id": "fc_0", "output": "18C"},
                    {"type": "function_call_output", "call_id": "fc_1", "output": "09:00"},
                ]
            )
        },
    ),
}


@pytest.mark.parametrize("encoding", sorted(ENCODINGS))
def test_calls_are_read_from_every_encoding(encoding: str) -> None:
    first, second = ENCODINGS[encoding]
    question = {"gen_ai.input.messages": json.dumps([{"role": "user", "content": QUESTION}])}
    if "gen_ai.prompt" in second:
        question = {
            "gen_ai.prompt": json.dumps({"messages": [[_lc("HumanMessage", content=QUESTION)]]})
        }
    spans = [
        span("chat m", {"gen_ai.operation.name": "chat", **question, **first}, start=10),
        span("chat m", {"gen_ai.operation.name": "chat", **second}, start=50),
    ]
    result = reconstruct(spans)
    assert [{"name": c.name, "args": c.arguments} for c in result.tool_calls] == EXPECTED
    sample = parse_sample({"user_input": list(result.messages), "reference_tool_calls": EXPECTED})
    assert [m.get("type") for m in result.messages][:3] == ["human", "ai", "tool"]
    assert len(sample.predicted_tool_calls) == 2
    assert result.warnings == ()


def test_a_langchain_object_that_is_not_a_message_is_no_message() -> None:
    prompt_value = {"lc": 1, "type": "constructor",
                    "id": ["langchain", "prompts", "chat", "ChatPromptValue"],
                    "kwargs": {"messages": [_lc("HumanMessage", content="hi")]}}  # fmt: skip
    assert read_messages([prompt_value]) == ()


def test_chain_spans_of_langsmith_are_not_model_calls() -> None:
    """A LangGraph node's inputs and outputs (gen_ai.prompt / gen_ai.completion on a chain span)
    hold the conversation's messages, but the node asked the model nothing."""
    state = json.dumps({"messages": [_lc("HumanMessage", content=QUESTION), _lc_ai()]})
    spans = [
        span("agent", {"gen_ai.operation.name": "chain", "langsmith.span.kind": "chain",
                       "gen_ai.prompt": state, "gen_ai.completion": state}, start=10),
    ]  # fmt: skip
    assert reconstruct(spans).tool_calls == ()


@pytest.mark.parametrize("operation", ["invoke_agent", "handle_conversation_turn"])
def test_an_invocation_summary_is_history_after_the_model_calls(operation: str) -> None:
    """The AI SDK 7's invoke_agent span sums up every step in one output message (calls, their
    results, the answer): the model calls' own spans give the transcript its shape."""
    calls = [{"type": "tool_call", "id": f"c{i}", "name": c["name"], "arguments": c["args"]}
             for i, c in enumerate(EXPECTED)]  # fmt: skip
    results = [{"type": "tool_call_response", "id": f"c{i}", "response": r}
               for i, r in enumerate(["18C", "09:00"])]  # fmt: skip
    asked = json.dumps([{"role": "user", "parts": [{"type": "text", "content": QUESTION}]}])
    summary = json.dumps(
        [{"role": "assistant", "parts": [*calls, *results, {"type": "text", "content": "Done."}]}]
    )
    spans = [
        span("agent", {"gen_ai.operation.name": operation, "gen_ai.input.messages": asked,
                       "gen_ai.output.messages": summary}, start=1, end=100),
        span("chat", {"gen_ai.operation.name": "chat", "gen_ai.input.messages": asked,
                      "gen_ai.output.messages": json.dumps(
                          [{"role": "assistant", "parts": calls}])}, start=10),
        span("chat", {"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": QUESTION}]},
             {"role": "assistant", "parts": calls}, {"role": "tool", "parts": results}]),
            "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": "Done."}]}])}, start=50),
    ]  # fmt: skip
    result = reconstruct(spans)
    assert [m["type"] for m in result.messages] == ["human", "ai", "tool", "tool", "ai"]
    assert [{"name": c.name, "args": c.arguments} for c in result.tool_calls] == EXPECTED
