"""Nothing silently dropped (collector/reconstruction/conventions/unrecognised.py): a conversation
from which no
call was rebuilt, but whose spans look like tool runs, says which spans and why."""

from __future__ import annotations

import json

from tests.collector.reconstruction.test_reconstruct import W, assistant, chat, span, tool, user
from toolscore.collector.reconstruction.conventions.unrecognised import runs_tool, tool_like
from toolscore.collector.reconstruction.rebuild import reconstruct


def test_spans_of_an_unknown_convention_that_name_tools_are_reported() -> None:
    spans = [
        span("agent run", {"session.id": "s1"}, start=0, scope="acme.agent"),
        span(
            "acme tool run",
            {"acme.tool.name": "get_weather", "acme.tool.input": '{"city": "Paris"}'},
            start=5,
            scope="acme.agent",
        ),
    ]
    rec = reconstruct(spans)
    assert rec.tool_calls == ()
    assert rec.unrecognised is not None
    assert rec.unrecognised.startswith("no tool call was rebuilt, but 1 span(s) look like")
    assert "'acme tool run' (scope 'acme.agent'; name 'acme tool run', acme.tool.name, " in (
        rec.unrecognised
    )
    assert "no convention reads it" in rec.unrecognised
    assert rec.readers == {}
    assert rec.used_spans == frozenset()


def test_a_span_a_convention_read_without_finding_a_call_says_which_convention() -> None:
    odd = span("ai.tool.run", {"ai.operationId": "ai.tool.run"}, start=0, scope="ai")
    rec = reconstruct([odd])  # the AI SDK's module reads scope "ai", knows no such span
    assert rec.tool_calls == ()
    assert rec.unrecognised is not None
    assert "(scope 'ai'; name 'ai.tool.run'; read by vercel_ai, which found no call in it)" in (
        rec.unrecognised
    )
    assert rec.readers == {odd.span_id: "vercel_ai"}


def test_no_warning_when_calls_were_rebuilt_or_nothing_looks_like_a_tool() -> None:
    definitions = json.dumps([{"type": "function", "name": "get_weather", "parameters": {}}])
    answered = chat(
        [user("hi")],
        [assistant(text="hello")],
        start=0,
        extra={"gen_ai.tool.definitions": definitions, "gen_ai.request.tool_choice": "auto"},
    )
    assert tool_like(answered) == ()  # tools offered to the model are not tool runs
    assert reconstruct([answered]).unrecognised is None
    ran = [chat([user("q")], [assistant(W)], start=0), tool("get_weather", W[1], "c1", start=5)]
    rec = reconstruct(ran)
    assert [c.name for c in rec.tool_calls] == ["get_weather"]
    assert rec.unrecognised is None
    assert rec.tool_calls[0].requested_in == ran[0].span_id
    assert rec.tool_calls[0].span_id == ran[1].span_id
    assert rec.used_spans == {ran[0].span_id, ran[1].span_id}


def test_what_makes_a_span_look_like_a_tool_run() -> None:
    assert tool_like(span("execute_tool get_weather", {}, start=0)) == (
        "name 'execute_tool get_weather'",
    )
    assert tool_like(span("x", {"gen_ai.operation.name": "execute_tool"}, start=0)) == (
        "gen_ai.operation.name=execute_tool",
    )
    assert tool_like(span("x", {"traceloop.span.kind": "tool"}, start=0)) == (
        "traceloop.span.kind=tool",
    )
    assert tool_like(span("toolbox", {"llm.tools.0.tool.json_schema": "{}"}, start=0)) == ()


def test_a_span_runs_a_tool_by_its_name_or_a_kind_attribute_not_by_a_key_naming_one() -> None:
    def runs(name: str, attrs: dict[str, object]) -> bool:
        record = span(name, attrs, start=0)
        reasons = tool_like(record)
        assert runs_tool(record) == any(r.startswith("name ") or "=" in r for r in reasons)
        return runs_tool(record)

    assert runs("acme tool run", {})
    assert runs("agent", {"openinference.span.kind": "TOOL"})
    assert runs("agent", {"gen_ai.operation.name": " execute_tool "})
    assert not runs("agent", {"metadata.steps.0.tool.name": "get_weather"})
    assert not runs("chat", {"gen_ai.operation.name": "chat", "gen_ai.tool.definitions": "[]"})
    assert not runs("list tools", {"tool_choice": "auto"})
    assert runs("agent", {"odd=tool_key": 1})  # a key that reads as a key=value reason
