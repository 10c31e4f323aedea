"""Unwrap only with evidence (docs/conventions.md, "Evidence").

Tool spans record a call as the tool's code saw it: the arguments inside the call signature
(``{"kwargs": {...}}``, ``{"args": [], "kwargs": {...}}``, ``{"input": {...}, "options": null}``)
and sometimes the tool's name only in the span name (``get_weather.__call__``, ``.run``,
``.task``). A wrapper is removed, and a name taken from a span name, only when the result is
confirmed: the unwrapped keys are the tool's declared parameters (the tool definitions sent to
the model, or the tool span's own schema) or the keys the model asked for; the stem is a tool
the model was offered or called. Without that evidence the span is kept as recorded and the
conversation carries a caution. A model output whose one call holds several JSON objects
(parallel calls merged into one entry by an instrumentation) is split using the tool spans'
arguments and names.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from toolscore.collector.reconstruction.conventions import (
    Exchange,
    Message,
    ToolCallRef,
    ToolExecution,
)
from toolscore.collector.reconstruction.conventions.base import maybe_json
from toolscore.collector.reconstruction.transcript import Canon

# wrapper keys -> the key holding the arguments (the others carry the call's plumbing)
_WRAPPERS: Mapping[frozenset[str], str] = {
    frozenset({"kwargs"}): "kwargs",
    frozenset({"args", "kwargs"}): "kwargs",
    frozenset({"input", "options"}): "input",
    frozenset({"input", "config"}): "input",
    frozenset({"input"}): "input",
}
_METHOD_SUFFIX = re.compile(
    r"^(?P<stem>.+?)\.(?:__call__|_?a?run|task|tool|invoke|ainvoke|call|execute|forward)$"
)


class Evidence:
    """What the telemetry says of the tools: declared parameters, names offered or called, and
    the keys of each call the model asked for. The model's calls and texts are gathered when
    first asked for: most tool spans need no evidence (no wrapper, no method name)."""

    __slots__ = ("_asked", "_canon", "_exchanges", "_texts", "parameters")

    def __init__(
        self,
        parameters: Mapping[str, tuple[str, ...]],
        exchanges: Sequence[Exchange],
        canon: Canon,
    ) -> None:
        self.parameters = parameters
        self._exchanges = exchanges
        self._canon = canon
        self._asked: dict[str, list[frozenset[str]]] | None = None
        # what the model wrote (text-protocol agents, DSPy's ReAct: the tool's name on a line of
        # its own, its arguments as a JSON object): the model's own words name the call
        self._texts: tuple[str, ...] = ()

    @property
    def asked(self) -> Mapping[str, list[frozenset[str]]]:
        if self._asked is None:
            self._asked, self._texts = _gather(self._exchanges, self._canon)
        return self._asked

    @property
    def texts(self) -> tuple[str, ...]:
        if self._asked is None:
            self._asked, self._texts = _gather(self._exchanges, self._canon)
        return self._texts

    def known(self, name: str) -> bool:
        return name in self.parameters or name in self.asked or bool(self._said(name))

    def confirms(self, name: str, keys: frozenset[str]) -> bool:
        declared = self.parameters.get(name)
        if declared is not None and keys and keys <= set(declared):
            return True
        return keys in self.asked.get(name, []) or keys in self._said(name)

    def _said(self, name: str) -> list[frozenset[str]]:
        """The key sets of the JSON objects in the model's texts that name ``name`` on a line
        of their own (an empty set for a text naming it with no object)."""
        line = re.compile(rf"^\s*{re.escape(name)}\s*$", re.MULTILINE)
        found: list[frozenset[str]] = []
        for text in self.texts:
            if line.search(text):
                objects = [v for v in _objects(text) if isinstance(v, dict)]
                found += [frozenset(o) for o in objects] or [frozenset()]
        return found


def evidence(
    exchanges: Sequence[Exchange], parameters: Mapping[str, tuple[str, ...]], canon: Canon
) -> Evidence:
    return Evidence(parameters, exchanges, canon)


def _gather(
    exchanges: Sequence[Exchange], canon: Canon
) -> tuple[dict[str, list[frozenset[str]]], tuple[str, ...]]:
    asked: dict[str, list[frozenset[str]]] = {}
    for exchange in exchanges:
        for message in exchange.outputs:
            for call in message.tool_calls:
                decoded = canon.peek(call.arguments).arguments
                keys = frozenset(decoded) if isinstance(decoded, dict) else frozenset()
                asked.setdefault(call.name, []).append(keys)
    texts = tuple(
        m.content
        for e in exchanges
        for m in e.outputs
        if m.role == "assistant" and ("{" in m.content or "\n" in m.content)
    )
    return asked, texts


_DECODER = json.JSONDecoder()


def _objects(text: str) -> list[Any]:
    """The JSON values starting at each ``{`` of ``text`` that parse."""
    decoder = _DECODER
    found: list[Any] = []
    index = text.find("{")
    while index != -1:
        try:
            value, end = decoder.raw_decode(text, index)
        except ValueError:
            index = text.find("{", index + 1)
            continue
        found.append(value)
        index = text.find("{", end)
    return found


def _unwrapped(arguments: Any, canon: Canon) -> tuple[dict[str, Any], str] | None:
    """The arguments inside a wrapper, and the wrapper's description; None if not one."""
    value = canon.parsed(arguments)
    if not isinstance(value, dict):
        return None
    keys = frozenset(value)
    inner_key = _WRAPPERS.get(keys)
    if inner_key is None:
        return None
    inner = maybe_json(value.get(inner_key))
    if not isinstance(inner, dict):
        return None
    args = value.get("args")
    if "args" in keys and args not in (None, [], ()):
        return None  # positional values: decoded by name elsewhere
    # the execution's own arguments from here on: not the parse the rules share
    inner = maybe_json(maybe_json(arguments).get(inner_key))
    return inner, "{" + ", ".join(sorted(keys)) + "}"


def _name_of(execution: ToolExecution, ev: Evidence, cautions: list[str]) -> str:
    match = _METHOD_SUFFIX.match(execution.name) if "." in execution.name else None
    if match is None or ev.known(execution.name):
        return execution.name
    stem = match.group("stem").rsplit(".", 1)[-1]
    if ev.known(stem):
        return stem
    cautions.append(
        f"tool span {execution.span_id} {execution.name!r}: its name may be {stem!r} "
        "(a method of it), but no tool definition or model call confirms it: kept as recorded"
    )
    return execution.name


def confirm(
    executions: Sequence[ToolExecution], ev: Evidence, canon: Canon, cautions: list[str]
) -> list[ToolExecution]:
    """The executions with names taken from span names and wrappers removed where the evidence
    confirms them; what looks so but is not confirmed stays, with a caution."""
    out: list[ToolExecution] = []
    for execution in executions:
        name = _name_of(execution, ev, cautions)
        arguments = execution.arguments
        found = _unwrapped(arguments, canon)
        if found is not None:
            inner, shape = found
            outer = frozenset(canon.parsed(arguments))
            if ev.confirms(name, frozenset(inner)) and not ev.confirms(name, outer):
                arguments = inner
            elif not ev.confirms(name, outer):
                cautions.append(
                    f"tool span {execution.span_id} {name!r}: arguments look wrapped ({shape}) "
                    "but no tool definition or model call confirms the tool's parameters: "
                    "kept as recorded"
                )
        if name != execution.name or arguments is not execution.arguments:
            notes = list(execution.notes)
            if name != execution.name:
                notes.append(f"name {name!r} from span name {execution.name!r} (a known tool)")
            if arguments is not execution.arguments:
                notes.append("arguments unwrapped (the tool's parameters confirm them)")
            execution = dataclasses.replace(
                execution, name=name, arguments=arguments, notes=tuple(notes)
            )
        out.append(execution)
    return out


def _json_values(text: str) -> list[Any]:
    """``text`` as consecutive JSON values (``{...}{...}``); [] unless there are several."""
    decoder = _DECODER
    values: list[Any] = []
    index = 0
    text = text.strip()
    while index < len(text):
        try:
            value, end = decoder.raw_decode(text, index)
        except ValueError:
            return []
        values.append(value)
        index = end
        while index < len(text) and text[index].isspace():
            index += 1
    return values if len(values) > 1 else []


def split_merged(
    exchanges: Sequence[Exchange],
    executions: Sequence[ToolExecution],
    canon: Canon,
    cautions: list[str],
) -> list[Exchange]:
    """Split a model-output call holding several JSON objects (parallel calls an instrumentation
    merged into one entry) into one call each; the names of the ones after the first come from
    the tool spans that ran with those arguments (calls of one message, the ids unknown: a
    later history that gives them ids is the same calls)."""
    out: list[Exchange] = []
    for exchange in exchanges:
        if not any(isinstance(c.arguments, str) for m in exchange.outputs for c in m.tool_calls):
            out.append(exchange)  # only a text can hold several objects
            continue
        outputs = tuple(
            _split_message(m, exchange, executions, canon, cautions) for m in exchange.outputs
        )
        changed = any(a is not b for a, b in zip(outputs, exchange.outputs, strict=True))
        out.append(dataclasses.replace(exchange, outputs=outputs) if changed else exchange)
    return out


def _split_message(
    message: Message,
    exchange: Exchange,
    executions: Sequence[ToolExecution],
    canon: Canon,
    cautions: list[str],
) -> Message:
    calls: list[ToolCallRef] = []
    for call in message.tool_calls:
        parts = _json_values(call.arguments) if isinstance(call.arguments, str) else []
        if not parts or not all(isinstance(p, dict) for p in parts):
            calls.append(call)
            continue
        named = [_name_for(p, exchange.trace_id, executions, canon) for p in parts[1:]]
        calls.append(ToolCallRef(call.name, parts[0], call.call_id))
        split = "split from a merged entry, named by a tool span"
        calls += [
            ToolCallRef(n, p, None, split) for n, p in zip(named, parts[1:], strict=True) if n
        ]
        cautions.append(
            f"call {call.name!r}: {len(parts)} calls merged into one entry by the "
            f"instrumentation; split by the tool spans' arguments ({sum(1 for n in named if n)} "
            f"of {len(parts) - 1} named by a tool span)"
        )
    if len(calls) == len(message.tool_calls) and all(
        a is b for a, b in zip(calls, message.tool_calls, strict=True)
    ):
        return message
    return dataclasses.replace(message, tool_calls=tuple(calls))


def _name_for(
    part: dict[str, Any], trace_id: str, executions: Sequence[ToolExecution], canon: Canon
) -> str | None:
    text = canon(part)
    for execution in executions:
        if execution.trace_id == trace_id and canon(execution.arguments) == text:
            return execution.name
    return None
