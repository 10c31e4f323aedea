"""Reading Ragas ``MultiTurnSample`` JSON into :class:`Sample`.

Accepts exactly what Ragas 0.4.3 accepts (its pydantic models and the ``user_input`` validator)
and refuses the rest with a :class:`SampleError` naming the offending path. One extension: a
``reference_tool_calls`` entry may be a list of calls, a *group* for ``order: grouped``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from orjson import OPT_PASSTHROUGH_SUBCLASS, dumps

from toolscore.scorer.model import ConfigError, Message, Reference, Sample, SampleError, ToolCall
from toolscore.scorer.nesting import CONTAINER_TYPES as _CONTAINER_TYPES
from toolscore.scorer.nesting import DEPTH_PROBLEM, depth_exceeds
from toolscore.scorer.readings import (
    ANY_OF,
    COMPARE,
    MAX_READINGS,
    OptionalCall,
    count_readings,
    has_alternatives,
    is_any_of,
    is_compare,
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


def _call_problem(obj: object) -> _Bad:
    """Why ``obj`` is not a tool call."""
    if type(obj) is not dict:
        return _Bad("", f"a tool call must be an object, got {_describe(obj)}")
    name = obj.get("name")
    if type(name) is not str:
        if "name" not in obj:
            return _Bad(".name", "missing")
        return _Bad(".name", f"must be a string, got {_describe(name)}")
    if "args" not in obj:
        return _Bad(".args", "missing (use {} for a call without arguments)")
    return _Bad(".args", f"must be an object, got {_describe(obj.get('args'))}")


def parse_tool_call(obj: object, path: str = "tool_call") -> ToolCall:
    """One ``{"name": str, "args": {...}}`` object (other keys are ignored, as Ragas does)."""
    try:
        (call,) = _tool_calls([obj])
    except _Bad as bad:  # its path starts with the position in the list, [0]
        raise _Bad(bad.rel.removeprefix("[0]"), bad.problem).error(path) from None
    return call  # type: ignore[no-any-return]


def _tool_calls(
    value: object,
    reference: bool = False,
    groups: bool = False,
    _new: Any = object.__new__,
    _set_name: Any = _SET_NAME,
    _set_args: Any = _SET_ARGS,
) -> tuple[Any, ...]:
    """An array of checked calls; with ``reference``, reference calls (:func:`_reference_call`);
    with ``groups``, an item may also be a group (an array of calls).

    Each call is built through the slot descriptors: the same object as ``ToolCall(name,
    args)`` at half the cost (every call of every sample is built here).
    """
    if type(value) is not list:
        raise _Bad("", f"must be an array of tool calls, got {_describe(value)}")
    calls: list[Any] = []
    try:
        for obj in value:
            if type(obj) is dict and "name" in obj and "args" in obj:
                name = obj["name"]  # subscripts, not .get(): cheaper, and this runs for every call
                args = obj["args"]
                if type(name) is str and type(args) is dict:
                    nested = False
                    for one in args.values():  # flat arguments (the usual case) cannot nest deep
                        if type(one) in _CONTAINER_TYPES:
                            if depth_exceeds(args):
                                raise _Bad(".args", DEPTH_PROBLEM)
                            nested = True
                            break
                    call = _new(ToolCall)
                    _set_name(call, name)
                    _set_args(call, args)
                    if reference and (nested or len(obj) > 2):
                        call = _reference_call(obj, call)
                    calls.append(call)
                    continue
            if groups and type(obj) is list:
                if not obj:
                    raise _Bad("", "a group of calls must not be empty")
                calls.append(_tool_calls(obj, reference))
                continue
            raise _call_problem(obj)
    except _Bad as bad:
        raise bad.under(f"[{len(calls)}]") from None
    return tuple(calls)


def _reference_call(obj: dict[str, Any], call: ToolCall) -> ToolCall:
    """A reference call: ``optional: true`` (scorer/readings.py) and arguments that may be
    ``{"any_of": [...]}``."""
    optional = obj.get("optional", False)
    if type(optional) is not bool:
        raise _Bad(".optional", f"must be true or false, got {_describe(optional)}")
    for key, value in call.args.items():
        if type(value) is dict and ANY_OF in value and not is_any_of(value):
            raise _Bad(f".args.{key}", "any_of must be the only key, with a non-empty array")
        for one in value[ANY_OF] if is_any_of(value) else (value,):
            if type(one) is dict and COMPARE in one:
                _check_compare(one, f".args.{key}")
    return OptionalCall(call.name, call.args) if optional else call


def _check_compare(value: dict[str, Any], rel: str) -> None:
    if not is_compare(value):
        raise _Bad(rel, "a compared value is {compare: COMPARATOR, value: VALUE}, nothing else")
    from toolscore.scorer.comparators import parse_comparator  # only for such references

    try:
        parse_comparator(value[COMPARE], "compare")
    except ConfigError as exc:
        raise _Bad(f"{rel}.compare", str(exc).removeprefix("compare: ")) from None


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


def parse_reference(obj: object, path: str = "reference_tool_calls") -> Reference:
    """A ``reference_tool_calls`` value: calls, or groups of calls (arrays) for ``grouped``."""
    try:
        reference = _tool_calls(obj, reference=True, groups=True)
    except _Bad as bad:
        raise bad.error(path) from None
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
    parts: list[_Parts] = []
    try:
        sample_id, predicted, reference = _read(obj, parts)
    except SampleError as exc:
        if line is None:
            raise
        raise SampleError(f"line {line}: {exc}") from None
    messages = tuple([Message(*p) for p in parts])
    return Sample(sample_id, messages, predicted, reference)


def read_calls(obj: object) -> tuple[Any, tuple[ToolCall, ...], Reference | None]:
    """``(id, predicted calls, reference)`` of a sample, validated exactly as by
    :func:`parse_sample` but without building its messages (what scoring needs)."""
    return _read(obj, None)


def _read(
    obj: object, parts: list[_Parts] | None
) -> tuple[Any, tuple[ToolCall, ...], Reference | None]:
    """The sample's id, predicted calls and reference; its messages appended to ``parts``."""
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
    predicted, raw_predicted = _read_messages(raw_messages, parts)
    calls = tuple(predicted)
    reference = _read_reference(obj.get("reference_tool_calls"), calls, raw_predicted)
    if len(obj) > 1 + ("id" in obj) + ("reference_tool_calls" in obj):  # other fields
        _check_optional_fields(obj)
    return obj.get("id"), calls, reference


def _read_messages(
    raw_messages: list[Any], parts: list[_Parts] | None
) -> tuple[list[ToolCall], list[Any]]:
    """The predicted calls of every ai message, and the same calls as given."""
    predicted: list[ToolCall] = []
    raw_predicted: list[Any] = []  # the predicted calls as given
    previous = ""  # Ragas's tool-message rules, checked in the same pass
    misplaced_tool = False  # reported once every message has been read, as Ragas does
    i = 0
    try:
        for raw in raw_messages:
            if (  # the usual message without calls: type and content only
                type(raw) is dict
                and len(raw) == 2
                and "content" in raw
                and type(raw["content"]) is str
                and "type" in raw
                and raw["type"] in _MESSAGE_TYPES
            ):
                kind, tool_calls = raw["type"], None
                if parts is not None:
                    parts.append((kind, raw["content"], None, None))
            else:
                message = _message(raw)
                if parts is not None:
                    parts.append(message)
                kind, _, tool_calls, _ = message
            if tool_calls:
                predicted += tool_calls
                raw_predicted += raw["tool_calls"]
                previous = "ai+calls"
            elif kind != "tool":
                previous = kind
            elif previous != "ai+calls":
                misplaced_tool = True
            i += 1
    except _Bad as bad:
        raise bad.under(f"[{i}]").error("user_input") from None
    if misplaced_tool:  # raises with the position and the rule
        _check_tool_message_order([_message(m) for m in raw_messages])
    return predicted, raw_predicted


def _read_reference(
    raw_reference: object, calls: tuple[ToolCall, ...], raw_predicted: list[Any]
) -> Reference | None:
    if raw_reference is None:
        return None
    if (
        raw_reference == raw_predicted
        and calls
        and _plain(raw_predicted)
        and _same_text(raw_reference, raw_predicted)
    ):
        # The reference is the predicted calls: one set of objects serves both, and metrics
        # recognise a perfect prediction by ``predicted is reference``.
        return calls
    return parse_reference(raw_reference)


def _plain(calls: list[dict[str, Any]]) -> bool:
    """Whether checked calls read the same as reference calls: no other key than name and
    args (``optional``), no ``any_of`` argument (scorer/readings.py)."""
    for call in calls:
        if len(call) != 2:
            return False
        for value in call["args"].values():
            if type(value) is dict and ANY_OF in value:
                return False
    return True


def _same_text(a: Any, b: Any) -> bool:
    """Whether equal values ``a`` and ``b`` (``a == b``) are also alike value for value.

    ``==`` alone equates ``1``, ``1.0`` and ``true`` (and ``0.0``, ``-0.0``), whose ``str()``
    differ, and ignores key order; equal JSON texts of equal values also mean equal types and
    order. Values that are equal and both written ``null`` (None, an infinity, one NaN object)
    are alike. Subclasses of str or int (whose ``str()`` may differ) are not compared.
    """
    try:
        return dumps(a, None, OPT_PASSTHROUGH_SUBCLASS) == dumps(b, None, OPT_PASSTHROUGH_SUBCLASS)
    except TypeError:  # not JSON (integers beyond 64 bits, a lone surrogate): not alike here
        return False
