"""Handoffs to other agents (docs/conventions.md, pitfall 14): counted, or left out on request.

The OpenAI Agents SDK shows a handoff to the model as a ``transfer_to_<agent>`` function call
(and OpenInference adds a ``handoff to X`` TOOL span, which never counts on its own: it would
count the same handoff twice). By default (``--control-calls exclude``) ``reconstruct`` drops the
calls and their results, and the messages stay a valid Ragas sample; ``include=handoff`` keeps
them.
"""

from __future__ import annotations

from typing import Any

from tests.collector.reconstruction.test_reconstruct import (
    assistant,
    chat,
    result,
    span,
    tool,
    user,
)
from toolscore.collector.reconstruction.control_calls import ControlCalls
from toolscore.collector.reconstruction.rebuild import reconstruct
from toolscore.scorer import parse_sample

LOOKUP = ("lookup", {"q": "invoice 7"}, "c1")
TRANSFER = ("transfer_to_billing", {}, "c2")


def _turn() -> list[Any]:
    """lookup, then a handoff to the billing agent, which answers."""
    history = [user("my invoice?"), assistant(LOOKUP), result("c1", "found")]
    return [
        chat([user("my invoice?")], [assistant(LOOKUP)], start=0),
        tool("lookup", LOOKUP[1], "c1", start=10),
        chat(history, [assistant(TRANSFER)], start=20),
        chat(
            [*history, assistant(TRANSFER), result("c2", '{"assistant": "billing"}')],
            [assistant(text="Billing here: it is paid.")],
            start=40,
        ),
    ]


def _names(spans: list[Any], **kw: Any) -> list[str]:
    return [c.name for c in reconstruct(spans, **kw).tool_calls]


def _valid_sample(messages: tuple[dict[str, Any], ...]) -> list[tuple[str, Any]]:
    sample = parse_sample({"user_input": list(messages), "reference_tool_calls": []})
    return [(c.name, c.args) for c in sample.predicted_tool_calls]


INCLUDE = ControlCalls.parse(["include=handoff"])


def test_transfer_calls_count_on_request() -> None:
    assert _names(_turn(), control_calls=INCLUDE) == ["lookup", "transfer_to_billing"]
    assert _names(_turn(), control_calls=ControlCalls(include=True)) == [
        "lookup",
        "transfer_to_billing",
    ]
    # another kind's override leaves handoffs to the default
    assert _names(_turn(), control_calls=ControlCalls.parse(["include=crewai.delegation"])) == [
        "lookup"
    ]


def test_transfer_calls_and_their_results_are_left_out_by_default() -> None:
    rec = reconstruct(_turn())
    assert [c.name for c in rec.tool_calls] == ["lookup"]
    assert [c.position for c in rec.tool_calls] == [0]
    assert [m["type"] for m in rec.messages] == ["human", "ai", "tool", "ai"]
    assert rec.messages[-1]["content"] == "Billing here: it is paid."
    assert _valid_sample(rec.messages) == [("lookup", {"q": "invoice 7"})]


def test_a_handoff_next_to_a_tool_call_leaves_the_tool_call_and_its_result() -> None:
    spans = [
        chat([user("q")], [assistant(LOOKUP, TRANSFER, text="one moment")], start=0),
        chat(
            [user("q"), assistant(LOOKUP, TRANSFER), result("c1", "found"), result("c2", "x")],
            [assistant(text="done")],
            start=20,
        ),
    ]
    rec = reconstruct(spans)
    assert [c.name for c in rec.tool_calls] == ["lookup"]
    assert [(m["type"], m["content"]) for m in rec.messages] == [
        ("human", "q"),
        ("ai", "one moment"),
        ("tool", "found"),
        ("ai", "done"),
    ]
    assert _valid_sample(rec.messages) == [("lookup", {"q": "invoice 7"})]


def test_results_without_call_ids_follow_their_dropped_handoff() -> None:
    """OpenInference LLM spans: tool results in histories may carry no call id."""

    def oi_llm(inputs: list[dict[str, Any]], output: dict[str, Any], start: int) -> Any:
        attrs: dict[str, Any] = {"openinference.span.kind": "LLM"}
        for i, message in enumerate(inputs):
            for key, value in message.items():
                attrs[f"llm.input_messages.{i}.message.{key}"] = value
        for key, value in output.items():
            attrs[f"llm.output_messages.0.message.{key}"] = value
        return span("response", attrs, start=start)

    call = {
        "tool_calls.0.tool_call.function.name": "transfer_to_billing",
        "tool_calls.0.tool_call.function.arguments": "{}",
        "role": "assistant",
    }
    spans = [
        oi_llm([{"role": "user", "content": "q"}], call, 0),
        span(
            "handoff to billing",
            {"openinference.span.kind": "TOOL", "tool.name": "handoff to billing"},
            start=10,
        ),
        oi_llm(
            [
                {"role": "user", "content": "q"},
                call,
                {"role": "tool", "content": '{"assistant": "billing"}'},
            ],
            {"role": "assistant", "content": "billing speaking"},
            20,
        ),
    ]
    # the handoff span adds nothing
    assert _names(spans, control_calls=INCLUDE) == ["transfer_to_billing"]
    rec = reconstruct(spans)
    assert rec.tool_calls == ()
    assert [m["type"] for m in rec.messages] == ["human", "ai"]
    assert _valid_sample(rec.messages) == []


def test_handoff_tool_spans_alone_never_count() -> None:
    spans = [
        span(
            "handoff to Billing",
            {"openinference.span.kind": "TOOL", "tool.name": "handoff to Billing"},
            start=0,
        )
    ]
    assert _names(spans) == [] == _names(spans, control_calls=INCLUDE)
