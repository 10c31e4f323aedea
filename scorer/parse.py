"""Reading Ragas ``MultiTurnSample`` JSON into :class:`Sample`.

Accepts exactly what Ragas 0.4.3 accepts (its pydantic models and the ``user_input`` validator)
and refuses the rest with a :class:`SampleError` naming the offending path. One extension: a
``reference_tool_calls`` entry may be a list of calls, a *group* for ``order: grouped``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolscore.scorer.model import Message, Reference, ReferenceItem, Sample, SampleError, ToolCall
from toolscore.scorer.nesting import DEPTH_PROBLEM, depth_exceeds, has_containers
from toolscore.scorer.readings import (
    ANY_OF,
    MAX_READINGS,
    OptionalCall,
    count_readings,
    has_alternatives,
    is_any_of,
)

_MESSAGE_TYPES = ("human", "ai", "tool")


def _describe(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


class _Bad(Exception):
    """A problem at a path relative to the value being read; callers prepend their part.

    Paths are built only when something is wrong, which keeps the happy path cheap.
    """

    def __init__(self, rel: str, problem: str) -> None:
        super().__init__(rel, problem)
        self.rel, self.problem = rel, problem

    def under(self, prefix: str) -> _Bad:
        return _Bad(prefix + self.rel, self.problem)

    def error(self, root: str) -> SampleError:
        return SampleError(f"{root}{self.rel}: {self.problem}")


def _fail(path: str, problem: str) -> SampleError:
    return SampleError(f"{path}: {problem}")


_SET_NAME = vars(ToolCall)["name"].__set__
_SET_ARGS = vars(ToolCall)["args"].__set__


def _make_tool_call(
    name: str,
    args: dict[str, Any],
    _new: Any = object.__new__,
    _set_name: Any = _SET_NAME,
    _set_args: Any = _SET_ARGS,
) -> ToolCall:
    """``ToolCall(name, args)`` through the slot descriptors: same object, ~40% cheaper, and
    building calls is a large share of bulk parsing."""
    call: ToolCall = _new(ToolCall)
    _set_name(call, name)
    _set_args(call, args)
    return call


def _tool_call(obj: object) -> ToolCall:
    if type(obj) is not dict:
        raise _Bad("", f"a tool call must be an object, got {_describe(obj)}")
    name = obj.get("name")
    args = obj.get("args")
    if type(name) is not str:
        if "name" not in obj:
            raise _Bad(".name", "missing")
        raise _Bad(".name", f"must be a string, got {_describe(name)}")
    if type(args) is not dict:
        if "args" not in obj:
            raise _Bad(".args", "missing (use {} for a call without arguments)")
        raise _Bad(".args", f"must be an object, got {_describe(args)}")
    if has_containers(args) and depth_exceeds(args):
        raise _Bad(".args", DEPTH_PROBLEM)
    return _make_tool_call(name, args)


def parse_tool_call(obj: object, path: str = "tool_call") -> ToolCall:
    """One ``{"name": str, "args": {...}}`` object (other keys are ignored, as Ragas does)."""
    try:
        return _tool_call(obj)
    except _Bad as bad:
        raise bad.error(path) from None


def _tool_calls(value: object) -> tuple[ToolCall, ...]:
    if type(value) is not list:
        raise _Bad("", f"must be an array of tool calls, got {_describe(value)}")
    calls: list[ToolCall] = []
    try:
        for tc in value:
            calls.append(_tool_call(tc))
    except _Bad as bad:
        raise bad.under(f"[{len(calls)}]") from None
    return tuple(calls)


_Parts = tuple[str, str, tuple[ToolCall, ...] | None, Any]  # type, content, tool_calls, metadata


def _message(obj: object) -> _Parts:
    if type(obj) is not dict:
        raise _Bad("", f"a message must be an object, got {_describe(obj)}")
    kind = obj.get("type")
    if kind is None and "type" not in obj:
        # pydantic's smart union: without "type", a message with "tool_calls" is an AIMessage
        # if it validates as one, otherwise a HumanMessage (extra keys ignored).
        if "tool_calls" in obj:
            try:
                return _message({**obj, "type": "ai"})
            except _Bad:
                pass
        kind = "human"
    elif kind not in _MESSAGE_TYPES:
        raise _Bad(".type", f"unknown message type {kind!r} (expected 'human', 'ai' or 'tool')")
    content = obj.get("content")
    if type(content) is not str:
        if "content" not in obj:
            raise _Bad(".content", "missing")
        raise _Bad(".content", f"must be a string, got {_describe(content)}")
    metadata = obj.get("metadata")
    if metadata is not None and type(metadata) is not dict:
        raise _Bad(".metadata", f"must be an object or null, got {_describe(metadata)}")
    tool_calls = None
    if kind == "ai":
        raw_calls = obj.get("tool_calls")
        if raw_calls is not None:
            try:
                tool_calls = _tool_calls(raw_calls)
            except _Bad as bad:
                raise bad.under(".tool_calls") from None
    return (kind, content, tool_calls, metadata)


def _check_tool_message_order(messages: list[_Parts]) -> None:
    """Ragas's ``MultiTurnSample.validate_user_input`` rules for tool messages."""
    seen_ai = False
    previous: _Parts | None = None
    for i, message in enumerate(messages):
        if message[0] == "ai":
            seen_ai = True
        elif message[0] == "tool":
            if not seen_ai:
                raise _fail(f"user_input[{i}]", "a tool message must come after an ai message")
            if previous is not None:
                if previous[0] == "ai" and not previous[2]:
                    raise _fail(
                        f"user_input[{i}]",
                        "a tool message must follow an ai message that called tools",
                    )
                if previous[0] == "human":
                    raise _fail(
                        f"user_input[{i}]",
                        "a tool message must follow an ai message or another tool message",
                    )
        previous = message


def _reference_call(obj: object) -> ToolCall:
    """A reference call: a tool call, ``optional: true`` (scorer/readings.py) and arguments
    that may be ``{"any_of": [...]}``."""
    call = _tool_call(obj)
    assert type(obj) is dict  # checked by _tool_call
    optional = obj.get("optional", False)
    if type(optional) is not bool:
        raise _Bad(".optional", f"must be true or false, got {_describe(optional)}")
    for key, value in call.args.items():
        if type(value) is dict and ANY_OF in value and not is_any_of(value):
            raise _Bad(f".args.{key}", "any_of must be the only key, with a non-empty array")
    return OptionalCall(call.name, call.args) if optional else call


def parse_reference(obj: object, path: str = "reference_tool_calls") -> Reference:
    """A ``reference_tool_calls`` value: calls, or groups of calls (arrays) for ``grouped``."""
    if type(obj) is not list:
        raise _fail(path, f"must be an array of tool calls, got {_describe(obj)}")
    items: list[ReferenceItem] = []
    try:
        for item in obj:
            if type(item) is list:
                if not item:
                    raise _Bad("", "a group of calls must not be empty")
                group: list[ToolCall] = []
                try:
                    group.extend(_reference_call(c) for c in item)
                except _Bad as bad:
                    raise bad.under(f"[{len(group)}]") from None
                items.append(tuple(group))
            else:
                items.append(_reference_call(item))
    except _Bad as bad:
        raise bad.under(f"[{len(items)}]").error(path) from None
    reference = tuple(items)
    if has_alternatives(reference) and (n := count_readings(reference)) > MAX_READINGS:
        raise _fail(
            path,
            f"{n} readings (optional calls x any_of alternatives): at most {MAX_READINGS}",
        )
    return reference


def _check_optional_fields(obj: Mapping[str, Any]) -> None:
    """The other ``MultiTurnSample`` fields: Ragas refuses the sample when they are mistyped."""
    reference = obj.get("reference")
    if reference is not None and type(reference) is not str:
        raise _fail("reference", f"must be a string or null, got {_describe(reference)}")
    rubrics = obj.get("rubrics")
    if rubrics is not None:
        if type(rubrics) is not dict:
            raise _fail("rubrics", f"must be an object or null, got {_describe(rubrics)}")
        for key, value in rubrics.items():
            if type(value) is not str:
                raise _fail(f"rubrics.{key}", f"must be a string, got {_describe(value)}")
    topics = obj.get("reference_topics")
    if topics is not None:
        if type(topics) is not list:
            raise _fail("reference_topics", f"must be an array or null, got {_describe(topics)}")
        for i, topic in enumerate(topics):
            if type(topic) is not str:
                raise _fail(f"reference_topics[{i}]", f"must be a string, got {_describe(topic)}")


def parse_sample(obj: object, *, line: int | None = None) -> Sample:
    """Build a :class:`Sample` from decoded JSON, or raise :class:`SampleError`.

    ``line`` (1-based) is only used to prefix error messages.
    """
    try:
        sample_id, parts, predicted, reference = _read(obj)
    except SampleError as exc:
        if line is None:
            raise
        raise SampleError(f"line {line}: {exc}") from None
    messages = tuple([Message(*p) for p in parts])
    return Sample(sample_id, messages, predicted, reference)


def read_calls(obj: object) -> tuple[Any, tuple[ToolCall, ...], Reference | None]:
    """``(id, predicted calls, reference)`` of a sample, validated exactly as by
    :func:`parse_sample` but without building its messages (the bulk scoring path)."""
    sample_id, _, predicted, reference = _read(obj)
    return sample_id, predicted, reference


def _read(obj: object) -> tuple[Any, list[_Parts], tuple[ToolCall, ...], Reference | None]:
    if type(obj) is not dict:
        raise SampleError(f"a sample must be a JSON object, got {_describe(obj)}")
    raw_messages = obj.get("user_input")
    if type(raw_messages) is not list:
        if raw_messages is None and "user_input" not in obj:
            raise _fail("user_input", "missing")
        raise _fail(
            "user_input",
            f"must be an array of messages, got {_describe(raw_messages)}",
        )
    parts: list[_Parts] = []
    try:
        for m in raw_messages:
            parts.append(_message(m))
    except _Bad as bad:
        raise bad.under(f"[{len(parts)}]").error("user_input") from None
    predicted: list[ToolCall] = []
    previous = ""  # Ragas's tool-message rules, checked in the same pass
    for kind, _, tool_calls, _ in parts:
        if tool_calls:
            predicted.extend(tool_calls)
            previous = "ai+calls"
        elif kind == "tool":
            if previous in ("", "human", "ai"):
                _check_tool_message_order(parts)  # raises with the position and the rule
        else:
            previous = kind
    raw_reference = obj.get("reference_tool_calls")
    reference = None if raw_reference is None else parse_reference(raw_reference)
    _check_optional_fields(obj)
    return obj.get("id"), parts, tuple(predicted), reference
