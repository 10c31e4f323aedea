"""The OpenAI Agents SDK traced by Logfire (``logfire.instrument_openai_agents()``, its own
convention module) and by OpenInference, on recordings of the real SDK.

The recordings come from openai-agents 0.20 under logfire 5.4 or
openinference-instrumentation-openai-agents 2.6, run by ``openai_agents_app.py`` (see
test_live_openai_agents.py; ``TOOLSCORE_RECORD=1`` refreshes them): the SDK's Responses and Chat
Completions models against a scripted local server (model calls recorded, with call ids), a
scripted ``agents.Model`` (only tool spans, no call ids) and the Responses model with
``trace_include_sensitive_data=False`` (names only). Those with model calls also run through the
generic checks of test_recorded.py (Ragas parity, valid samples).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.collector.reconstruction.conventions.openai_agents_app import SCENARIOS as SCRIPTS
from tests.collector.reconstruction.conventions.openai_agents_app import seen
from tests.collector.recording import RECORDED, Recording, load_recording
from toolscore.collector.reconstruction.control_calls import ControlCalls
from toolscore.collector.reconstruction.conventions import REGISTRY
from toolscore.collector.reconstruction.conventions.logfire_openai_agents import (
    TEMPLATES,
    LogfireOpenAIAgents,
)
from toolscore.collector.reconstruction.conversation_keys import (
    DEFAULT_CONVERSATION_KEYS,
    conversation_id_for_trace,
)
from toolscore.collector.reconstruction.rebuild import Reconstruction, reconstruct
from toolscore.storage.records import SpanRecord

OWN = RECORDED / "openai-agents"  # tool spans only: not for the generic checks
KINDS = ["responses", "chat", "scripted", "responses-nocontent"]
MODES = [*KINDS, *(f"openinference-{k}" for k in KINDS)]
SCENARIOS = list(SCRIPTS)
GROUP = {s: SCRIPTS[s][0] for s in SCENARIOS}


def recording_path(mode: str, scenario: str) -> Path:
    instrumentation = "openinference" if mode.startswith("openinference-") else "logfire"
    kind = mode.removeprefix("openinference-")
    if kind in ("responses", "chat"):
        return RECORDED / f"openai-agents-{instrumentation}-{kind}-{scenario}.json"
    return OWN / f"{instrumentation}-{kind}-{scenario}.json"


def _calls(result: Reconstruction) -> list[dict[str, Any]]:
    return [{"name": c.name, "args": c.arguments or {}} for c in result.tool_calls]


# the expected calls list the handoffs the model made (the default policy leaves them out)
HANDOFFS_COUNTED = ControlCalls.parse(["include=handoff"])


def check(mode: str, scenario: str, recording: Recording) -> None:
    """What each kind of run must reconstruct to (shared with the live test)."""
    spans, logs, recorded_expectation = recording
    expected = seen(mode, scenario)
    assert recorded_expectation == expected
    result = reconstruct(spans, logs, control_calls=HANDOFFS_COUNTED)
    openinference = mode.startswith("openinference-")
    convention = "openinference" if openinference else "logfire_openai_agents"
    assert {c.convention for c in result.tool_calls} == {convention}
    traces = {s.trace_id for s in spans}
    assert len(traces) == (2 if scenario == "multi-turn" else 1)
    for trace in traces:  # Logfire: the SDK's group id (root span); OpenInference: session.id
        mine = [s for s in spans if s.trace_id == trace]
        assert conversation_id_for_trace(mine, DEFAULT_CONVERSATION_KEYS) == GROUP[scenario]
    if mode.endswith("nocontent"):  # tool spans without input: names only, flagged
        assert [c.name for c in result.tool_calls] == [c["name"] for c in expected]
        assert all(c.arguments is None and not c.arguments_ok for c in result.tool_calls)
        assert len(result.warnings) == len(expected)
        return
    assert _calls(result) == expected
    assert result.warnings == ()
    if mode.endswith("scripted"):  # tool spans only: no call ids, no user message
        assert all(c.call_id is None for c in result.tool_calls)
        return
    assert len({c.call_id for c in result.tool_calls}) == len(expected)  # each call once
    assert all(c.call_id and c.call_id.startswith("call_") for c in result.tool_calls)
    per_turn = {"parallel": [2], "multi-turn": [1, 1], "handoff": [2]}[scenario]
    ai_calls = [len(m["tool_calls"]) for m in result.messages if m.get("tool_calls")]
    assert ai_calls == per_turn  # parallel calls stay one assistant message, in model order
    types = [m["type"] for m in result.messages]
    assert types.count("human") == len(per_turn) and types[-1] == "ai"
    assert result.first_user_message is not None


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("mode", MODES)
def test_recording(mode: str, scenario: str) -> None:
    check(mode, scenario, load_recording(recording_path(mode, scenario)))


@pytest.mark.parametrize(
    "mode", ["responses", "chat", "openinference-responses", "openinference-chat"]
)
def test_handoffs_count_once_and_can_be_left_out(mode: str) -> None:
    spans, logs, _ = load_recording(recording_path(mode, "handoff"))
    included = reconstruct(spans, logs, control_calls=ControlCalls(include=True))
    assert _calls(included) == [
        {"name": "lookup_invoice", "args": {"number": 7}},
        {"name": "transfer_to_billing", "args": {}},  # OpenInference leaves "{}" out
    ]
    assert included.tool_calls[1].arguments_ok
    handoff_spans = [s for s in spans if s.name.startswith(("handoff to", "Handoff:"))]
    assert len(handoff_spans) == 1  # seen, and not a second call
    excluded = reconstruct(spans, logs)  # the default leaves control calls out
    assert [c.name for c in excluded.tool_calls] == ["lookup_invoice"]
    assert [m["type"] for m in excluded.messages] == ["human", "ai", "tool", "ai"]


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
