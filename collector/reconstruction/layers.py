"""One call seen at several layers is one call (docs/conventions.md, "Join, don't add").

An agent framework's tool span, under it an MCP client's ``tools/call <name>`` span (FastMCP:
``gen_ai.operation.name = execute_tool``, no arguments, no call id), under that the MCP server's
own ``tools/call <name>`` span (another process, the same trace): three tool executions of one
call. A tool execution whose nearest tool-execution ancestor runs the same tool (the same name,
or the ancestor's name ending in it after a separator: a framework's prefix for a server's
tools) joins that ancestor: it fills what the ancestor lacks (arguments, call id, result) and
never counts on its own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from toolscore.collector.reconstruction.conventions import ToolExecution
from toolscore.storage.records import SpanRecord

_SEPARATORS = ("_", "-", ".", "/", ":", "__")
_MAX_DEPTH = 256  # a cycle in broken parent ids must not loop


def same_tool(outer: str, inner: str) -> bool:
    """Whether a tool named ``outer`` and one named ``inner`` are one tool at two layers."""
    if outer == inner:
        return True
    return any(outer.endswith(sep + inner) for sep in _SEPARATORS) and bool(inner)


def _nearest_tool_ancestor(
    execution: ToolExecution,
    parents: Mapping[str, str | None],
    by_span: Mapping[str, ToolExecution],
) -> ToolExecution | None:
    span_id = parents.get(execution.span_id or "")
    for _ in range(_MAX_DEPTH):
        if not span_id:
            return None
        found = by_span.get(span_id)
        if found is not None:
            return found if same_tool(found.name, execution.name) else None
        span_id = parents.get(span_id)
    return None


def join_layers(
    executions: Sequence[ToolExecution], spans: Sequence[SpanRecord]
) -> tuple[list[ToolExecution], dict[str, str]]:
    """The executions with each deeper layer joined into its outermost one, in the given order;
    and span id of each joined layer -> span id of the execution it joined."""
    parents = {s.span_id: s.parent_span_id for s in spans}
    by_span = {e.span_id: e for e in executions if e.span_id}
    outer_of: dict[str, str] = {}
    for execution in executions:
        ancestor = _nearest_tool_ancestor(execution, parents, by_span)
        if ancestor is not None and execution.span_id and ancestor.span_id:
            outer_of[execution.span_id] = ancestor.span_id
    root: dict[str, str] = {}
    for span_id, outer in outer_of.items():
        top, steps = outer, 0
        while top in outer_of and steps < _MAX_DEPTH:
            top, steps = outer_of[top], steps + 1
        root[span_id] = top
    filled = {e.span_id: e for e in executions if e.span_id and e.span_id not in root}
    for execution in executions:  # outer layers come first in time, so fill in that order
        into = root.get(execution.span_id or "")
        if into is not None and into in filled:
            filled[into] = _fill(filled[into], execution)
    kept = [
        filled.get(e.span_id, e) if e.span_id else e
        for e in executions
        if (e.span_id or "") not in root
    ]
    return kept, root


def _fill(outer: ToolExecution, inner: ToolExecution) -> ToolExecution:
    return dataclasses.replace(
        outer,
        notes=(*outer.notes, f"joined {inner.span_id} {inner.convention} (a deeper layer)"),
        arguments=outer.arguments if outer.arguments is not None else inner.arguments,
        call_id=outer.call_id or inner.call_id,
        result=outer.result if outer.result is not None else inner.result,
        failed=outer.failed or inner.failed,
    )
