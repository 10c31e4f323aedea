"""Reconstruction merges every record of a conversation into one call list and message list.

Specification by example: each test builds the spans a real instrumentation would send (see
docs/conventions.md) and states what the conversation's tool calls must be.
"""

from __future__ import annotations

import json
from itertools import count
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolscore.collector.reconstruction.rebuild import reconstruct
from toolscore.storage.records import LogRecordData, SpanEvent, SpanRecord

_ids = count(1)
T1 = "1" * 32
T2 = "2" * 32


def span(
    name: str,
    attrs: dict[str, Any],
    *,
    trace: str = T1,
    start: int,
    end: int | None = None,
    parent: str | None = None,
    span_id: str | None = None,
    events: tuple[SpanEvent, ...] = (),
    status: int = 0,
    scope: str = "test",
) -> SpanRecord:
    return SpanRecord(
        trace_id=trace,
        span_id=span_id or f"{next(_ids):016x}",
        parent_span_id=parent,
        name=name,
        kind=1,
        start_ns=start,
        end_ns=end if end is not None else start + 10,
        attributes=attrs,
        scope_name=scope,
        status_code=status,
        events=events,
    )


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "content": text}]}


def assistant(*calls: tuple[str, Any, str | None], text: str = "") -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"type": "text", "content": text}] if text else []
    for name, args, call_id in calls:
        part: dict[str, Any] = {"type": "tool_call", "name": name, "arguments": args}
        if call_id:
            part["id"] = call_id
        parts.append(part)
    return {"role": "assistant", "parts": parts}


def result(call_id: str, value: Any) -> dict[str, Any]:
    return {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": call_id, "response": value}],
    }


def chat(inputs: list[Any], outputs: list[Any], **kw: Any) -> SpanRecord:
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": json.dumps(inputs),
        "gen_ai.output.messages": json.dumps(outputs),
    }
    attrs.update(kw.pop("extra", {}))
    return span("chat m", attrs, **kw)


def tool(
    name: str, args: Any, call_id: str | None = None, out: str = "ok", **kw: Any
) -> SpanRecord:
    attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
    if call_id:
        attrs["gen_ai.tool.call.id"] = call_id
    if args is not None:
        attrs["gen_ai.tool.call.arguments"] = args if isinstance(args, str) else json.dumps(args)
    attrs["gen_ai.tool.call.result"] = out
    return span(f"execute_tool {name}", attrs, **kw)


def calls(spans: list[SpanRecord], logs: tuple[LogRecordData, ...] = ()) -> list[tuple[str, Any]]:
    return [(c.name, c.arguments) for c in reconstruct(spans, logs).tool_calls]


W = ("get_weather", {"city": "Paris"}, "c1")
T = ("get_time", {"timezone": "Asia/Tokyo"}, "c2")


def test_parallel_calls_keep_the_message_order_not_the_tool_span_order() -> None:
    spans = [
        chat([user("q")], [assistant(W, T)], start=0),
        tool("get_time", T[1], "c2", start=20),  # started first, ends first
        tool("get_weather", W[1], "c1", start=21),
        chat(
            [user("q"), assistant(W, T), result("c1", 1), result("c2", 2)],
            [assistant(text="done")],
            start=40,
        ),
    ]
    assert calls(spans) == [
        ("get_weather", {"city": "Paris"}),
        ("get_time", {"timezone": "Asia/Tokyo"}),
    ]


def test_each_call_counts_once_though_seen_in_output_tool_span_and_later_histories() -> None:
    spans = [
        chat([user("q")], [assistant(W)], start=0),
        tool("get_weather", W[1], "c1", start=20),
        chat([user("q"), assistant(W), result("c1", 1)], [assistant(T)], start=40),
        tool("get_time", T[1], "c2", start=60),
        chat(
            [user("q"), assistant(W), result("c1", 1), assistant(T), result("c2", 2)],
            [assistant(text="done")],
            start=80,
        ),
    ]
    result_ = reconstruct(spans)
    assert [(c.name, c.call_id) for c in result_.tool_calls] == [
        ("get_weather", "c1"),
        ("get_time", "c2"),
    ]
    assert [m["type"] for m in result_.messages] == ["human", "ai", "tool", "ai", "tool", "ai"]


def test_multi_turn_across_traces_is_ordered_by_trace_time_whatever_the_input_order() -> None:
    turn1 = [
        chat([user("weather?")], [assistant(W)], start=100, trace=T1),
        tool("get_weather", W[1], "c1", start=120, trace=T1),
        chat(
            [user("weather?"), assistant(W), result("c1", 18)],
            [assistant(text="18C")],
            start=140,
            trace=T1,
        ),
    ]
    history = [
        user("weather?"),
        assistant(W),
        result("c1", 18),
        assistant(text="18C"),
        user("and time?"),
    ]
    turn2 = [
        chat(history, [assistant(T)], start=1000, trace=T2),
        tool("get_time", T[1], "c2", start=1020, trace=T2),
        chat(
            [*history, assistant(T), result("c2", 9)], [assistant(text="9am")], start=1040, trace=T2
        ),
    ]
    result_ = reconstruct(turn2 + turn1)  # the caller's order does not matter
    assert [(c.name, c.trace_id) for c in result_.tool_calls] == [
        ("get_weather", T1),
        ("get_time", T2),
    ]
    humans = [m["content"] for m in result_.messages if m["type"] == "human"]
    assert humans == ["weather?", "and time?"]
    assert result_.first_user_message == "weather?"
    assert result_.root_span_id == turn2[0].span_id  # root of the last trace


def test_the_same_call_made_again_in_a_later_turn_counts_again() -> None:
    again = ("get_weather", {"city": "Paris"}, "c9")
    spans = [
        chat([user("q")], [assistant(W)], start=0),
        chat(
            [user("q"), assistant(W), result("c1", 1), user("again")], [assistant(again)], start=50
        ),
    ]
    assert calls(spans) == [("get_weather", {"city": "Paris"})] * 2


def test_history_without_call_ids_does_not_repeat_calls() -> None:
    # Google ADK mints call ids and strips them from the history it sends back
    spans = [
        chat([user("q")], [assistant(W, T)], start=0),
        chat(
            [user("q"), assistant((W[0], W[1], None), (T[0], T[1], None))],
            [assistant(text="done")],
            start=50,
        ),
    ]
    assert calls(spans) == [
        ("get_weather", {"city": "Paris"}),
        ("get_time", {"timezone": "Asia/Tokyo"}),
    ]


def test_tool_spans_without_ids_attach_by_name_and_arguments() -> None:
    spans = [
        chat([user("q")], [assistant(("f", {"x": 1}, "a"), ("f", {"x": 2}, "b"))], start=0),
        tool("f", {"x": 2}, None, out="two", start=10),
        tool("f", {"x": 1}, None, out="one", start=11),
    ]
    result_ = reconstruct(spans)
    assert [c.arguments for c in result_.tool_calls] == [{"x": 1}, {"x": 2}]
    assert [c.span_id for c in result_.tool_calls] == [spans[2].span_id, spans[1].span_id]
    assert [m["content"] for m in result_.messages if m["type"] == "tool"] == ["one", "two"]
    assert result_.warnings == ()


def test_a_bare_value_tool_span_attaches_to_the_call_with_that_value() -> None:
    spans = [
        chat([user("q")], [assistant(T)], start=0),
        tool("get_time", "Asia/Tokyo", None, start=10),  # OpenInference LangChain: key lost
    ]
    result_ = reconstruct(spans)
    assert calls(spans) == [("get_time", {"timezone": "Asia/Tokyo"})]
    assert result_.tool_calls[0].span_id == spans[1].span_id


def test_tool_spans_alone_give_the_calls_in_start_order() -> None:
    # content capture off: model spans carry no messages, tool spans still name the calls
    spans = [
        span("chat m", {"gen_ai.operation.name": "chat"}, start=0),
        tool("get_weather", W[1], None, start=20),
        tool("get_time", T[1], None, start=30),
    ]
    assert calls(spans) == [
        ("get_weather", {"city": "Paris"}),
        ("get_time", {"timezone": "Asia/Tokyo"}),
    ]


def test_tool_spans_without_model_output_are_placed_by_time_between_turns() -> None:
    spans = [
        chat([user("first")], [assistant(W)], start=0),
        tool("get_weather", W[1], "c1", start=10),
        tool("lookup", {"q": "x"}, "zz", start=15),  # no model output mentions it
        chat(
            [user("first"), assistant(W), result("c1", 1), user("second")], [assistant(T)], start=50
        ),
    ]
    result_ = reconstruct(spans)
    assert [c.name for c in result_.tool_calls] == ["get_weather", "lookup", "get_time"]
    assert any("lookup" in w for w in result_.warnings)


def test_truncated_model_arguments_fall_back_to_the_tool_span() -> None:
    spans = [
        chat([user("q")], [assistant(("f", '{"city": "Par', "c1"))], start=0),
        tool("f", {"city": "Paris"}, "c1", start=10),
    ]
    [call] = reconstruct(spans).tool_calls
    assert (call.arguments, call.arguments_ok, call.arguments_raw) == (
        {"city": "Paris"},
        True,
        None,
    )


def test_undecodable_arguments_are_kept_raw_flagged_and_warned() -> None:
    spans = [chat([user("q")], [assistant(("f", '{"city": "Paris", "n": 1', "c1"))], start=0)]
    result_ = reconstruct(spans)
    [call] = result_.tool_calls
    assert call.arguments == {"city": "Paris"}  # the part that parsed
    assert call.arguments_raw == '{"city": "Paris", "n": 1'
    assert call.arguments_ok is False
    assert any("call #0 f" in w for w in result_.warnings)
    assert result_.messages[1]["tool_calls"] == [{"name": "f", "args": {"city": "Paris"}}]


def test_double_encoded_and_object_arguments_decode_alike() -> None:
    spans = [
        chat(
            [user("q")],
            [assistant(("f", json.dumps(json.dumps({"a": 1})), "c1"), ("g", {"b": 2}, "c2"))],
            start=0,
        )
    ]
    assert calls(spans) == [("f", {"a": 1}), ("g", {"b": 2})]


def test_a_model_call_recorded_twice_counts_once() -> None:
    # framework chat span + nested provider span for one API call, no call ids
    outer = chat([user("q")], [assistant(("f", {"a": 1}, None))], start=0, span_id="a" * 16)
    inner = chat([user("q")], [assistant(("f", {"a": 1}, None))], start=1, parent="a" * 16)
    assert calls([outer, inner]) == [("f", {"a": 1})]
    same_response = [
        chat(
            [user("q")],
            [assistant(("f", {"a": 1}, None))],
            start=0,
            extra={"gen_ai.response.id": "r1"},
        ),
        chat(
            [user("q")],
            [assistant(("f", {"a": 1}, None))],
            start=5,
            extra={"gen_ai.response.id": "r1"},
        ),
    ]
    assert calls(same_response) == [("f", {"a": 1})]


CALL = "llm.output_messages.0.message.tool_calls.0.tool_call"


def test_conventions_mix_in_one_trace() -> None:
    llm = span(
        "ChatOpenAI",
        {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": "q",
            "llm.output_messages.0.message.role": "assistant",
            f"{CALL}.id": "c1",
            f"{CALL}.function.name": "get_weather",
            f"{CALL}.function.arguments": '{"city":"Paris"}',
        },
        start=0,
    )
    result_ = reconstruct([llm, tool("get_weather", W[1], "c1", start=10)])
    assert [(c.name, c.convention, c.span_id) for c in result_.tool_calls] == [
        ("get_weather", "openinference", result_.tool_calls[0].span_id)
    ]
    assert result_.tool_calls[0].span_id != llm.span_id  # the tool span that ran it


def test_legacy_log_events_are_joined_to_their_span() -> None:
    chat_span = span("chat gpt", {"gen_ai.operation.name": "chat"}, start=0, span_id="c" * 16)

    def log(name: str, body: Any, t: int) -> LogRecordData:
        return LogRecordData(t, t, T1, "c" * 16, 9, "", name, body)

    logs = (
        log("gen_ai.user.message", {"content": "q"}, 1),
        log(
            "gen_ai.choice",
            {
                "index": 0,
                "message": {
                    "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": '{"a":1}'}}]
                },
            },
            5,
        ),
    )
    assert calls([chat_span], logs) == [("f", {"a": 1})]


def test_odd_input_never_raises() -> None:
    odd = [
        span(
            "chat", {"gen_ai.operation.name": "chat", "gen_ai.output.messages": "not json"}, start=0
        ),
        span(
            "chat",
            {"gen_ai.operation.name": "chat", "gen_ai.output.messages": [1, 2, None]},
            start=1,
        ),
        span(
            "chat",
            {"gen_ai.input.messages": json.dumps([{"role": None, "parts": [None, 3]}])},
            start=2,
        ),
        span("x", {"openinference.span.kind": "LLM", "llm.output_messages.0": 5}, start=3),
        span("x", {"openinference.span.kind": "TOOL"}, start=4),
        span("x", {"llm.output_messages.x.y": {"z": 1}, "openinference.span.kind": 7}, start=5),
        span("t", {"gen_ai.operation.name": "execute_tool"}, start=6),
        span("e", {}, start=7, events=(SpanEvent("gen_ai.choice", 1, {"message": "[[["}),)),
    ]
    result_ = reconstruct(odd)
    assert isinstance(result_.warnings, tuple)
    assert reconstruct([]).tool_calls == ()
    assert reconstruct([]).root_span_id is None


def test_langchain_wrapper_arguments_on_an_openllmetry_tool_span_attach_by_value() -> None:
    wrapper = {
        "input_str": "{'city': 'Paris'}",
        "tags": [],
        "metadata": {},
        "inputs": {"city": "Paris"},
        "kwargs": {"tool_call_id": "c1"},
    }
    spans = [
        chat([user("q")], [assistant(W)], start=0),
        tool("get_weather", wrapper, None, out="18C", start=10),
    ]
    result_ = reconstruct(spans)
    assert [(c.name, c.arguments, c.span_id) for c in result_.tool_calls] == [
        ("get_weather", {"city": "Paris"}, spans[1].span_id)
    ]
    assert result_.messages[2] == {"type": "tool", "content": "18C"}


def test_positional_arguments_of_an_unmatched_tool_span_are_named_from_the_tool_definitions() -> (
    None
):
    definitions = [
        {"type": "function", "name": "get_time", "parameters": {"properties": {"timezone": {}}}}
    ]
    spans = [
        span(
            "chat",
            {"gen_ai.operation.name": "chat", "gen_ai.tool.definitions": json.dumps(definitions)},
            start=0,
        ),
        span(
            "get_time.tool",
            {
                "traceloop.span.kind": "tool",
                "traceloop.entity.name": "get_time",
                "traceloop.entity.input": '{"args": ["Asia/Tokyo"], "kwargs": {}}',
            },
            start=10,
        ),
    ]
    [call] = reconstruct(spans).tool_calls
    assert (call.name, call.arguments, call.arguments_ok, call.convention) == (
        "get_time",
        {"timezone": "Asia/Tokyo"},
        True,
        "openllmetry",
    )


def test_pydantic_ai_format_2_tool_spans() -> None:
    spans = [
        span(
            "running tool",
            {"tool_arguments": '{"city":"Paris"}', "gen_ai.tool.name": "get_weather"},
            start=0,
            scope="pydantic-ai",
        )
    ]
    assert calls(spans) == [("get_weather", {"city": "Paris"})]


def test_handoff_tool_spans_are_not_calls() -> None:
    spans = [
        span(
            "handoff to Billing",
            {"openinference.span.kind": "TOOL", "tool.name": "handoff to Billing"},
            start=0,
        ),
        span(
            "lookup",
            {"openinference.span.kind": "TOOL", "tool.name": "lookup", "input.value": '{"q": 1}'},
            start=5,
        ),
    ]
    assert calls(spans) == [("lookup", {"q": 1})]


def test_a_failed_tool_run_still_counts_the_requested_call_once() -> None:
    spans = [
        chat([user("q")], [assistant(W)], start=0),
        tool("get_weather", W[1], "c1", start=10, status=2),
        tool("get_weather", W[1], "c1", start=20),  # retried by the framework, same call id
    ]
    assert calls(spans) == [("get_weather", {"city": "Paris"})]


KEYS = [
    "gen_ai.operation.name",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.name",
    "gen_ai.tool.call.id",
    "gen_ai.tool.call.arguments",
    "openinference.span.kind",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.name",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments",
    "llm.input_messages.0.message.content",
    "tool.name",
    "input.value",
    "gen_ai.completion.0.tool_calls.0.name",
    "gen_ai.completion.0.tool_calls.0.arguments",
    "traceloop.span.kind",
    "traceloop.entity.input",
    "ai.operationId",
    "ai.response.toolCalls",
    "ai.toolCall.name",
    "ai.prompt.messages",
    "pydantic_ai.all_messages",
    "gcp.vertex.agent.llm_response",
    "gen_ai.tool.definitions",
]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
attr_values = st.one_of(
    json_values,
    json_values.map(json.dumps),
    st.sampled_from(["chat", "execute_tool", "LLM", "TOOL", "tool", "ai.toolCall", "[", "{"]),
)


@given(
    st.lists(
        st.tuples(
            st.dictionaries(st.sampled_from(KEYS), attr_values, max_size=6),
            st.sampled_from(
                ["test", "pydantic-ai", "ai", "strands.telemetry.tracer", "gcp.vertex.agent"]
            ),
        ),
        max_size=6,
    )
)
@settings(max_examples=120, deadline=None)
def test_arbitrary_attribute_values_never_break_the_merge(
    specs: list[tuple[dict[str, Any], str]],
) -> None:
    spans = [
        span("s", attrs, start=i * 10, scope=scope, trace=T1 if i % 2 else T2)
        for i, (attrs, scope) in enumerate(specs)
    ]
    result = reconstruct(spans)
    assert not any(w.startswith("reconstruction failed") for w in result.warnings), result.warnings
    assert [c.position for c in result.tool_calls] == list(range(len(result.tool_calls)))
    ai_calls = [tc for m in result.messages if m["type"] == "ai" for tc in m.get("tool_calls", [])]
    assert [tc["name"] for tc in ai_calls] == [c.name for c in result.tool_calls]
