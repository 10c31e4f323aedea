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
from collections.abc import Collection, Mapping, Sequence

from toolscore.collector.reconstruction.conventions import ToolExecution

_SEPARATORS = ("_", "-", ".", "/", ":", "__")
_MAX_DEPTH = 256  # a cycle in broken parent ids must not loop


def same_tool(outer: str, inner: str) -> bool:
    """Whether a tool named ``outer`` and one named ``inner`` are one tool at two layers."""
    if outer == inner:
        return True
    return any(outer.endswith(sep + inner) for sep in _SEPARATORS) and bool(inner)


Key = tuple[str, str]  # (trace id, span id): span ids repeat across traces


def _key(execution: ToolExecution) -> Key | None:
    """Where the execution was recorded; None without a usable span id (whatever a convention
    read from an attribute may be)."""
    span_id = execution.span_id
    if not isinstance(span_id, str) or not span_id:
        return None
    return (str(execution.trace_id), span_id)


def _nearest_tool_ancestor(
    execution: ToolExecution,
    key: Key | None,
    parents: Mapping[Key, str | None],
    by_span: Mapping[Key, ToolExecution],
) -> ToolExecution | None:
    if key is None:
        return None
    trace = key[0]
    span_id = parents.get(key)
    for _ in range(_MAX_DEPTH):
        if not span_id:
            return None
        found = by_span.get((trace, span_id))
        if found is not None:
            return found if same_tool(found.name, execution.name) else None
        span_id = parents.get((trace, span_id))
    return None


def join_layers(
    executions: Sequence[ToolExecution],
    parents: Mapping[Key, str | None],
    parents_of_any: Collection[Key],
) -> tuple[list[ToolExecution], dict[str, str]]:
    """The executions with each deeper layer joined into its outermost one, in the given order;
    and span id of each joined layer -> span id of the execution it joined. ``parents``: each
    span's parent span id, by (trace id, span id); ``parents_of_any``: the spans some span
    names as its parent (an execution whose span is none has no layer under it)."""
    keys = [_key(e) for e in executions]
    if not any(k in parents_of_any for k in keys if k) and len(set(keys)) == len(keys):
        return list(executions), {}  # no tool span under another (the usual case)
    pairs = list(zip(executions, keys, strict=True))
    by_span = {k: e for e, k in pairs if k is not None}
    outer_of: dict[Key, Key] = {}
    for execution, inner in pairs:
        ancestor = _nearest_tool_ancestor(execution, inner, parents, by_span)
        outer = ancestor and _key(ancestor)
        if inner is not None and outer:
            outer_of[inner] = outer
    if not outer_of:  # nothing to join (the usual case); of one span's executions, its last
        return [by_span.get(k, e) if k is not None else e for e, k in pairs], {}
    root: dict[Key, Key] = {}
    for key, outer in outer_of.items():
        top, steps = outer, 0
        while top in outer_of and steps < _MAX_DEPTH:
            top, steps = outer_of[top], steps + 1
        root[key] = top
    filled = {k: e for e, k in pairs if k is not None and k not in root}
    for execution, layer in pairs:  # outer layers come first in time, so fill in that order
        into = root.get(layer or ("", ""))
        if into is not None and into in filled:
            filled[into] = _fill(filled[into], execution)
    kept = [
        filled.get(k, e) if k is not None else e for e, k in pairs if (k or ("", "")) not in root
    ]
    return kept, {inner[1]: outer[1] for inner, outer in root.items()}


def _fill(outer: ToolExecution, inner: ToolExecution) -> ToolExecution:
    return dataclasses.replace(
        outer,
        notes=(*outer.notes, f"joined {inner.span_id} {inner.convention} (a deeper layer)"),
        arguments=outer.arguments if outer.arguments is not None else inner.arguments,
        call_id=outer.call_id or inner.call_id,
        result=outer.result if outer.result is not None else inner.result,
        failed=outer.failed or inner.failed,
    )
