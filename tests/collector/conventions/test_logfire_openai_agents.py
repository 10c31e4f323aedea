"""Logfire's OpenAI Agents integration (``logfire.instrument_openai_agents()``), on recordings.

The recordings come from the real SDK (openai-agents 0.20, logfire 5.4) run by
``openai_agents_app.py`` (see test_live_openai_agents.py, ``TOOLSCORE_RECORD=1`` to refresh):
the SDK's Responses and Chat Completions models against a scripted local server (model calls
recorded, with call ids), a scripted ``agents.Model`` (only tool spans, no call ids) and the
Responses model with ``trace_include_sensitive_data=False`` (names only). Those with model calls
also run through the generic checks of test_recorded.py (Ragas parity, valid samples).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from collector.conventions import REGISTRY
from collector.conventions.logfire_openai_agents import (
    TEMPLATES,
    LogfireOpenAIAgents,
    handoff_tool_name,
)
from collector.conversation_keys import DEFAULT_CONVERSATION_KEYS, conversation_id_for_trace
from collector.model import SpanRecord
from collector.reconstruct import Reconstruction, reconstruct
from tests.collector.recording import RECORDED, Recording, load_recording

OWN = RECORDED / "openai-agents-logfire"  # without model calls: not for the generic checks
MODELS = ["responses", "chat", "scripted", "responses-nocontent"]
SCENARIOS = ["parallel", "multi-turn", "handoff"]
GROUP = {s: f"thread-{s}" for s in SCENARIOS}


def recording_path(model: str, scenario: str) -> Path:
    if model in ("responses", "chat"):
        return RECORDED / f"openai-agents-logfire-{model}-{scenario}.json"
    return OWN / f"{model}-{scenario}.json"


def _calls(result: Reconstruction) -> list[dict[str, Any]]:
    return [{"name": c.name, "args": c.arguments or {}} for c in result.tool_calls]


def check(model: str, scenario: str, recording: Recording) -> None:
    """What each kind of run must reconstruct to (shared with the live test)."""
    spans, logs, expected = recording
    result = reconstruct(spans, logs)
    assert {c.convention for c in result.tool_calls} == {"logfire_openai_agents"}
    traces = {s.trace_id for s in spans}
    assert len(traces) == (2 if scenario == "multi-turn" else 1)
    for trace in traces:  # the SDK's group id names the conversation, on the root span only
        mine = [s for s in spans if s.trace_id == trace]
        assert conversation_id_for_trace(mine, DEFAULT_CONVERSATION_KEYS) == GROUP[scenario]
    names = [c["name"] for c in expected]
    if model == "responses-nocontent":  # tool spans without input: names only, flagged
        assert [c.name for c in result.tool_calls] == names
        assert all(c.arguments is None and not c.arguments_ok for c in result.tool_calls)
        assert len(result.warnings) == len(expected)
        return
    assert _calls(result) == expected
    if model == "scripted":  # tool spans only: no call ids, no user message
        assert all(c.call_id is None for c in result.tool_calls)
        handoffs = [c for c in result.tool_calls if c.name.startswith("transfer_to_")]
        assert all(not c.arguments_ok for c in handoffs)  # a handoff span has no arguments
        assert len(result.warnings) == len(handoffs)
        return
    assert result.warnings == ()
    assert len({c.call_id for c in result.tool_calls}) == len(expected)  # each call once
    assert all(c.call_id and c.call_id.startswith("call_") for c in result.tool_calls)
    per_turn = {"parallel": [2], "multi-turn": [1, 1], "handoff": [2]}[scenario]
    ai_calls = [len(m["tool_calls"]) for m in result.messages if m.get("tool_calls")]
    assert ai_calls == per_turn  # parallel calls stay one assistant message, in model order
    types = [m["type"] for m in result.messages]
    assert types.count("human") == len(per_turn) and types[-1] == "ai"
    assert result.first_user_message is not None


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("model", MODELS)
def test_recording(model: str, scenario: str) -> None:
    check(model, scenario, load_recording(recording_path(model, scenario)))


def test_handoffs_can_be_left_out() -> None:
    for model in ("responses", "chat", "scripted"):
        spans, logs, _ = load_recording(recording_path(model, "handoff"))
        assert [c.name for c in reconstruct(spans, logs).tool_calls] == [
            "lookup_invoice",
            "transfer_to_billing",
        ]
        result = reconstruct(spans, logs, handoffs=False)
        assert [c.name for c in result.tool_calls] == ["lookup_invoice"]
        if model != "scripted":
            assert [m["type"] for m in result.messages] == ["human", "ai", "tool", "ai"]


def test_the_handoff_span_attaches_to_the_models_transfer_call() -> None:
    spans, logs, _ = load_recording(recording_path("responses", "handoff"))
    transfer = reconstruct(spans, logs).tool_calls[1]
    span = next(s for s in spans if s.span_id == transfer.span_id)
    assert span.attributes["logfire.msg_template"] == "Handoff: {from_agent} → {to_agent}"
    assert transfer.call_id == "call_0_1"


def test_every_span_of_the_integration_is_claimed_by_this_module() -> None:
    """Detected by attributes (the template) as well as by the scope; first in line."""
    spans, _, _ = load_recording(recording_path("responses", "parallel"))
    module = LogfireOpenAIAgents()
    assert all(s.scope_name == "logfire.openai_agents" for s in spans)
    for span in spans:
        first = next(c for c in REGISTRY if c.applies(span))
        assert first.name == "logfire_openai_agents"
        if span.attributes["logfire.msg_template"] in TEMPLATES:  # not the dynamic Turn / Task
            renamed = SpanRecord(**{**_fields(span), "scope_name": "other"})
            assert module.applies(renamed), span.name
    kinds = {s.attributes["logfire.msg_template"] for s in spans} & TEMPLATES
    assert {"Function: {name}", "Responses API with {gen_ai.request.model!r}"} <= kinds


def _fields(span: SpanRecord) -> dict[str, Any]:
    return {name: getattr(span, name) for name in SpanRecord.__dataclass_fields__}


def test_logfire_json_encoding_is_read_through_the_schema() -> None:
    """``input`` is the raw argument string (schema ``{}``); null means not recorded."""
    module = LogfireOpenAIAgents()

    def function_span(attrs: dict[str, Any]) -> SpanRecord:
        return SpanRecord(
            trace_id="1" * 32,
            span_id="2" * 16,
            parent_span_id=None,
            name="Function: {name}",
            kind=1,
            start_ns=1,
            end_ns=2,
            attributes={"logfire.msg_template": "Function: {name}", "name": "f", **attrs},
        )

    plain = module.extract(
        function_span(
            {
                "input": '{"a": 1}',
                "output": "null",  # the tool returned the text "null"
                "logfire.json_schema": '{"type":"object","properties":{"input":{},"output":{}}}',
            }
        )
    )[0]
    assert (plain.arguments, plain.result) == ('{"a": 1}', "null")  # type: ignore[union-attr]
    absent = module.extract(
        function_span(
            {
                "input": "null",
                "output": "null",
                "logfire.json_schema": '{"type":"object","properties":'
                '{"input":{"type":"null"},"output":{"type":"null"}}}',
            }
        )
    )[0]
    assert (absent.arguments, absent.result) == (None, None)  # type: ignore[union-attr]


def test_response_items_group_parallel_calls_and_skip_server_side_tools() -> None:
    module = LogfireOpenAIAgents()
    response = {
        "id": "resp_9",
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"type": "web_search_call", "id": "ws_1", "status": "completed"},
            {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "ok"}],
            },
            {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
            {"type": "custom_tool_call", "call_id": "b", "name": "g", "input": "x"},
        ],
    }
    span = SpanRecord(
        trace_id="1" * 32,
        span_id="3" * 16,
        parent_span_id=None,
        name="Responses API with 'gpt-4o'",
        kind=1,
        start_ns=1,
        end_ns=2,
        attributes={
            "logfire.msg_template": "Responses API with {gen_ai.request.model!r}",
            "raw_input": "hello",  # a bare string input: one user message
            "response": json.dumps(response),
        },
    )
    (exchange,) = module.extract(span)
    assert [(m.role, m.content) for m in exchange.inputs] == [("user", "hello")]  # type: ignore[union-attr]
    (message,) = exchange.outputs  # type: ignore[union-attr]
    assert message.content == "ok"
    assert [(c.name, c.arguments, c.call_id) for c in message.tool_calls] == [
        ("f", "{}", "a"),
        ("g", "x", "b"),
    ]
    assert exchange.response_id == "resp_9"  # type: ignore[union-attr]


def test_handoff_tool_names_follow_the_sdk() -> None:
    assert handoff_tool_name("billing") == "transfer_to_billing"
    assert handoff_tool_name("Billing Agent") == "transfer_to_billing_agent"
    assert handoff_tool_name("Refunds-EU") == "transfer_to_refunds_eu"
