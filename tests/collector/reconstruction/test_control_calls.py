"""Framework control calls (docs/conventions.md, "Control calls"): recognised by the names each
framework's source gives them, left out by default, kept by ``--control-calls include[=KIND]``.

Driven with the real libraries where they are test dependencies (smolagents' recording, a
Pydantic AI agent with a structured output); the other kinds by their names.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from tests.collector.reconstruction.conventions import four_calls as fc
from tests.collector.reconstruction.test_reconstruct import assistant, chat, result, user
from tests.collector.recording import RECORDED, load_recording, span_from_sdk
from toolscore.collector.reconstruction.control_calls import (
    CONTROL_KINDS,
    ControlCallError,
    ControlCalls,
    control_kind,
)
from toolscore.collector.reconstruction.rebuild import reconstruct
from toolscore.scorer import parse_sample


@pytest.mark.parametrize(
    ("name", "convention", "kind"),
    [
        ("transfer_to_billing", "openinference", "handoff"),  # OpenAI Agents SDK, LangGraph
        ("transfer_back_to_supervisor", "openinference", "handoff"),  # langgraph-supervisor
        ("transfer_to_agent", "google_adk", "handoff"),  # ADK's agent transfer tool
        ("final_answer", "smolagents", "smolagents.final_answer"),
        ("final_answer", "otel_genai", None),  # a user's tool of that name elsewhere
        ("final_result", "pydantic_ai", "pydantic_ai.final_result"),
        ("final_result_Weather", "pydantic_ai", "pydantic_ai.final_result"),
        ("final_result", "openinference", None),
        ("Delegate work to coworker", "openinference", "crewai.delegation"),
        ("ask_question_to_coworker", "openllmetry", "crewai.delegation"),
        ("transfer_money", "otel_genai", None),
        ("get_weather", "otel_genai", None),
    ],
)
def test_control_calls_are_recognised_by_their_frameworks_names(
    name: str, convention: str, kind: str | None
) -> None:
    assert control_kind(name, convention) == kind


def test_the_policy_reads_clauses_in_order_and_describes_itself() -> None:
    assert ControlCalls.parse([""]) == ControlCalls()
    policy = ControlCalls.parse(["include exclude=handoff;exclude=crewai.delegation"])
    assert policy.describe() == "include exclude=crewai.delegation,handoff"
    assert ControlCalls.parse([policy.describe()]) == policy
    assert [k for k in CONTROL_KINDS if policy.includes(k)] == [
        "smolagents.final_answer",
        "pydantic_ai.final_result",
        "turn_end",
    ]
    assert policy.includes(None)  # not a control call
    assert ControlCalls.parse(["include=handoff", "exclude"]) == ControlCalls()  # later wins
    with pytest.raises(ControlCallError, match="unknown control-call kind"):
        ControlCalls.parse(["exclude=final_answer"])


def test_smolagents_final_answer_is_the_answer_by_default_and_a_call_on_request() -> None:
    spans, logs, _ = load_recording(RECORDED / "smolagents-openinference-multi-turn.json")
    default = reconstruct(spans, logs)
    assert [{"name": c.name, "args": c.arguments} for c in default.tool_calls] == fc.EXPECTED
    kept = reconstruct(
        spans, logs, control_calls=ControlCalls.parse(["include=smolagents.final_answer"])
    )
    names = [c.name for c in kept.tool_calls]
    assert names.count("final_answer") == 2  # one per turn
    assert [n for n in names if n != "final_answer"] == [c.name for c in default.tool_calls]
    assert [
        c.name for c in reconstruct(spans, logs, control_calls=ControlCalls(True)).tool_calls
    ] == names


class Weather(BaseModel):
    city: str
    temp_c: int


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider))
    yield memory
    Agent.instrument_all(False)
    provider.shutdown()


def _structured_run(exporter: InMemorySpanExporter) -> list[Any]:
    """A real Pydantic AI agent with a structured output: one tool call, then the output tool."""

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("get_weather", {"city": "Paris"}, "c1")])
        output = info.output_tools[0].name
        return ModelResponse(parts=[ToolCallPart(output, {"city": "Paris", "temp_c": 18}, "c2")])

    agent = Agent(FunctionModel(script), output_type=Weather)

    @agent.tool_plain
    def get_weather(city: str) -> str:
        return f"18C in {city}"

    assert agent.run_sync("Weather in Paris?").output == Weather(city="Paris", temp_c=18)
    return [span_from_sdk(s) for s in exporter.get_finished_spans()]


def test_pydantic_ai_output_tool_is_the_answer_by_default(
    exporter: InMemorySpanExporter,
) -> None:
    spans = _structured_run(exporter)
    default = reconstruct(spans)
    assert [(c.name, c.arguments) for c in default.tool_calls] == [
        ("get_weather", {"city": "Paris"})
    ]
    assert [m["type"] for m in default.messages] == ["human", "ai", "tool", "ai"]
    assert default.messages[-1]["content"] == '{"city": "Paris", "temp_c": 18}'
    sample = parse_sample({"user_input": list(default.messages), "reference_tool_calls": []})
    assert [c.name for c in sample.predicted_tool_calls] == ["get_weather"]
    kept = reconstruct(
        spans, control_calls=ControlCalls.parse(["include=pydantic_ai.final_result"])
    )
    assert [c.name for c in kept.tool_calls] == ["get_weather", "final_result"]


def test_crewai_delegation_and_its_result_are_left_out_by_default() -> None:
    delegate = ("Delegate work to coworker", {"task": "t", "coworker": "Researcher"}, "c2")
    search = ("search", {"q": "x"}, "c1")
    history = [user("go"), assistant(search), result("c1", "found")]
    spans = [
        chat([user("go")], [assistant(search)], start=0),
        chat(history, [assistant(delegate)], start=10),
        chat(
            [*history, assistant(delegate), result("c2", "done")], [assistant(text="ok")], start=20
        ),
    ]
    default = reconstruct(spans)
    assert [c.name for c in default.tool_calls] == ["search"]
    assert [m["type"] for m in default.messages] == ["human", "ai", "tool", "ai"]
    included = reconstruct(spans, control_calls=ControlCalls.parse(["include=crewai.delegation"]))
    assert [c.name for c in included.tool_calls] == ["search", "Delegate work to coworker"]


def _turn(*steps: list[tuple[str, dict[str, object]]]) -> list:  # type: ignore[type-arg]
    """One turn of OTel GenAI chat spans: each step a model call asking for ``calls``."""
    import json

    from tests.collector.reconstruction.test_reconstruct import span

    history: list[dict[str, object]] = [
        {"role": "user", "parts": [{"type": "text", "content": "go"}]}
    ]
    spans = []
    for n, calls in enumerate(steps):
        parts = [{"type": "tool_call", "id": f"c{n}{i}", "name": name, "arguments": args}
                 for i, (name, args) in enumerate(calls)]  # fmt: skip
        out = [{"role": "assistant", "parts": parts}]
        spans.append(span("chat", {"gen_ai.operation.name": "chat",
                     "gen_ai.input.messages": json.dumps(history),
                     "gen_ai.output.messages": json.dumps(out)}, start=10 * (n + 1)))  # fmt: skip
        results = [{"type": "tool_call_response", "id": p["id"], "response": "ok"} for p in parts]
        history = [*history, *out, {"role": "tool", "parts": results}]
    return spans


def test_a_tool_that_ends_the_turn_is_a_control_call_in_any_framework() -> None:
    from toolscore.collector.reconstruction.rebuild import reconstruct

    for name in ("final_answer", "finish", "final_result", "final_result_Trip"):
        spans = _turn([("get_weather", {"city": "Paris"})], [(name, {"response": "18C."})])
        result = reconstruct(spans)
        assert [c.name for c in result.tool_calls] == ["get_weather"], name
        assert result.messages[-1] == {"type": "ai", "content": "18C."}, name
        kept = reconstruct(spans, control_calls=ControlCalls.parse(["include=turn_end"]))
        assert [c.name for c in kept.tool_calls] == ["get_weather", name]


def test_a_finish_tool_the_turn_goes_on_after_is_the_users_tool() -> None:
    from toolscore.collector.reconstruction.rebuild import reconstruct

    spans = _turn([("finish", {"task": "laundry"})], [("get_weather", {"city": "Paris"})])
    assert [c.name for c in reconstruct(spans).tool_calls] == ["finish", "get_weather"]
