"""One call seen at several layers (the agent's tool span, an MCP client's, the MCP server's) is
one call: joined by the spans' ancestry, not added."""

from __future__ import annotations

import json

from tests.collector.otlp_requests import load_requests, records
from tests.collector.reconstruction.test_reconstruct import span
from toolscore.collector.reconstruction.layers import same_tool
from toolscore.collector.reconstruction.rebuild import reconstruct


def _mcp_layers(name: str, args: dict[str, object], *, start: int, parent: str) -> list:  # type: ignore[type-arg]
    """An agent's execute_tool span, FastMCP's client span and the MCP server's span under it
    (the server's behind the SDK's 'MCP send' span), as the pydantic-ai-mcp recording has them."""
    agent = span(f"execute_tool {name}", {"gen_ai.operation.name": "execute_tool",
                 "gen_ai.tool.name": name, "gen_ai.tool.call.id": f"id-{name}",
                 "gen_ai.tool.call.arguments": json.dumps(args)},
                 start=start, parent=parent, scope="agent")  # fmt: skip
    client = span(f"tools/call {name}", {"mcp.method.name": "tools/call",
                  "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name},
                  start=start + 1, parent=agent.span_id, scope="fastmcp")  # fmt: skip
    send = span(f"MCP send tools/call {name}", {"mcp.method.name": "tools/call"},
                start=start + 2, parent=client.span_id, scope="mcp")  # fmt: skip
    server = span(f"tools/call {name}", {"mcp.method.name": "tools/call",
                  "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name,
                  "gen_ai.tool.call.result": "ok"},
                  start=start + 3, parent=send.span_id, scope="mcp")  # fmt: skip
    return [agent, client, send, server]


def test_an_mcp_call_under_the_agents_tool_span_is_one_call() -> None:
    root = span("agent run", {}, start=0)
    spans = [root, *_mcp_layers("get_weather", {"city": "Paris"}, start=10, parent=root.span_id)]
    spans += _mcp_layers("get_time", {"timezone": "Asia/Tokyo"}, start=20, parent=root.span_id)
    result = reconstruct(spans)
    assert [(c.name, c.arguments) for c in result.tool_calls] == [
        ("get_weather", {"city": "Paris"}),
        ("get_time", {"timezone": "Asia/Tokyo"}),
    ]
    assert all(c.arguments_recorded for c in result.tool_calls)


def test_a_deeper_layer_fills_what_the_outer_one_lacks() -> None:
    root = span("agent run", {}, start=0)
    agent, client, send, server = _mcp_layers("get_weather", {"city": "Paris"}, start=10,
                                              parent=root.span_id)  # fmt: skip
    bare = span(agent.name, {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name":
                "get_weather"}, start=10, parent=root.span_id, span_id=agent.span_id)  # fmt: skip
    traced = span(server.name, {**server.attributes, "gen_ai.tool.call.arguments":
                  '{"city": "Paris"}'}, start=13, parent=send.span_id)  # fmt: skip
    result = reconstruct([root, bare, client, send, traced])
    assert [(c.name, c.arguments) for c in result.tool_calls] == [
        ("get_weather", {"city": "Paris"})
    ]


def test_calls_of_other_tools_inside_a_tool_stay_calls() -> None:
    root = span("agent run", {}, start=0)
    outer = span("execute_tool plan_trip", {"gen_ai.operation.name": "execute_tool",
                 "gen_ai.tool.name": "plan_trip", "gen_ai.tool.call.arguments": "{}"},
                 start=10, parent=root.span_id)  # fmt: skip
    inner = span("execute_tool get_weather", {"gen_ai.operation.name": "execute_tool",
                 "gen_ai.tool.name": "get_weather", "gen_ai.tool.call.arguments":
                 '{"city": "Paris"}'}, start=11, parent=outer.span_id)  # fmt: skip
    assert [c.name for c in reconstruct([root, outer, inner]).tool_calls] == [
        "plan_trip",
        "get_weather",
    ]


def test_a_prefixed_name_is_the_same_tool() -> None:
    assert same_tool("weather_get_weather", "get_weather")
    assert same_tool("mcp/get_weather", "get_weather")
    assert not same_tool("get_weather_now", "get_weather")
    assert not same_tool("forget_weather", "get_weather")


def test_the_pydantic_ai_mcp_recording_rebuilds_its_four_calls() -> None:
    recording = load_requests("pydantic-ai-mcp")
    spans, logs = records(recording.requests)
    result = reconstruct(spans, logs)
    assert [{"name": c.name, "args": c.arguments} for c in result.tool_calls] == (
        recording.expected
    )
    assert (result.warnings, result.unread, result.unrecognised) == ((), (), None)


def test_show_spans_says_which_rule_produced_each_call() -> None:
    from toolscore.collector.views.spans import call_rules, render_rules

    mcp = reconstruct(*records(load_requests("pydantic-ai-mcp").requests))
    assert all("by call id" in c.rule and "joined" in c.rule for c in mcp.tool_calls)
    bee = reconstruct(*records(load_requests("beeai-openinference").requests))
    rules = [c.rule for c in bee.tool_calls]
    assert "split from a merged entry" in rules[1] and "arguments unwrapped" in rules[0]
    text = "\n".join(render_rules(call_rules(bee)))
    assert "HOW IT WAS REBUILT" in text and "#2" in text


def test_a_tool_span_that_ran_other_arguments_than_asked_is_said() -> None:
    root = span("agent run", {}, start=0)
    chat = span("chat", {"gen_ai.operation.name": "chat", "gen_ai.output.messages": json.dumps(
        [{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "get_weather",
                                          "arguments": {"city": "Paris"}}]}])},
        start=5, parent=root.span_id)  # fmt: skip
    tool = span("execute_tool get_weather", {"gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather", "gen_ai.tool.call.id": "c1",
                "gen_ai.tool.call.arguments": '{"city": "Lyon"}'}, start=10,
                parent=root.span_id)  # fmt: skip
    result = reconstruct([root, chat, tool])
    assert [c.arguments for c in result.tool_calls] == [{"city": "Paris"}]
    assert any("ran with" in c and "Lyon" in c for c in result.cautions)
