"""Messages in every encoding instrumentations write, read into one form (:class:`Message`).

The model's own output is the primary record of the calls it asked for, so calls are read from
wherever a convention puts them, in any of these shapes (docs/conventions.md, "Message
encodings"):

- OTel GenAI parts: ``{role, parts: [{type: text|tool_call|tool_call_response, ...}]}``, the
  2026 generic parts ``{type: "generic", generic_type: ...}`` read as their ``generic_type``, and
  OpenAI-shaped ``tool_calls`` / ``tool_call_id`` beside the parts (LiteLLM leaves the parts
  empty);
- OpenAI chat messages (``tool_calls[].function``, the legacy ``function_call``), and Responses
  API items (``function_call`` / ``function_call_output``);
- Anthropic content blocks (``tool_use`` / ``tool_result``), Gemini parts (``functionCall`` /
  ``functionResponse``), Bedrock Converse blocks (``toolUse`` / ``toolResult``);
- LangChain messages: serialized (``{"lc": 1, "id": [..., "AIMessage"], "kwargs": {...}}``), as
  ``messages_to_dict`` writes them (``{"type": "ai", "data": {...}}``) or plain
  (``{"type": "ai", "tool_calls": [{"name", "args", "id"}]}``);

inside any of these containers: a list (or LangChain's list of lists), ``{"messages": ...}``,
an ``LLMResult`` (``{"generations": [[{"message" | "text"}]]}``), an OpenAI response
(``{"choices": [{"message"}]}``), a Gemini response (``{"candidates": [{"content"}]}``) or a
Responses API response (``{"output": [...]}``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolscore.collector.reconstruction.conventions.base import (
    ROLE_ALIASES,
    Message,
    ToolCallRef,
    as_text,
    maybe_json,
    norm_role,
    opt_str,
)

__all__ = ["read_message", "read_messages"]

_MAX_DEPTH = 4
_LANGCHAIN_ROLES = {
    "HumanMessage": "user",
    "HumanMessageChunk": "user",
    "AIMessage": "assistant",
    "AIMessageChunk": "assistant",
    "ToolMessage": "tool",
    "ToolMessageChunk": "tool",
    "FunctionMessage": "tool",
    "SystemMessage": "system",
    "SystemMessageChunk": "system",
    "ChatMessage": "",  # its own ``role`` field
}
_CALL_TYPES = frozenset({"tool_call", "function_call", "tool_use", "function", "tool-call"})
_RESULT_TYPES = frozenset(
    {"tool_call_response", "tool_result", "function_call_output", "function_response"}
)
_TEXT_TYPES = frozenset({"text", "input_text", "output_text"})
_ITEM_TYPES = _CALL_TYPES | _RESULT_TYPES  # a Responses API item's own types


def read_messages(value: object) -> tuple[Message, ...]:
    """Every message of ``value`` (a container of messages in any encoding above), in order."""
    found = [m for raw in _message_list(value, 0) for m in read_message(raw)]
    return merge_call_messages(found)


def _message_list(value: object, depth: int) -> list[Any]:
    value = maybe_json(value)
    if depth > _MAX_DEPTH:
        return []
    if isinstance(value, list | tuple):
        if value and all(isinstance(maybe_json(v), list) for v in value):
            return [m for batch in value for m in _message_list(batch, depth + 1)]
        return list(value)
    if type(value) is not dict and not isinstance(value, Mapping):
        return []
    for key in ("messages", "input_messages"):
        if key in value and not _is_message(value):
            return _message_list(value[key], depth + 1)
    if isinstance(value.get("generations"), list):
        return _generations(value["generations"])
    if isinstance(value.get("choices"), list):
        return [c.get("message") for c in value["choices"] if isinstance(c, Mapping)]
    if isinstance(value.get("candidates"), list):
        return [c.get("content") for c in value["candidates"] if isinstance(c, Mapping)]
    if isinstance(value.get("output"), list) and not _is_message(value):
        return list(value["output"])
    return [value]


def _is_message(value: Mapping[str, Any]) -> bool:
    return "role" in value or "lc" in value or "parts" in value


def _generations(generations: list[Any]) -> list[Any]:
    """An ``LLMResult``'s first candidate of each prompt: its chat message, else its text."""
    out: list[Any] = []
    for batch in generations:
        candidates = batch if isinstance(batch, list) else [batch]
        first = next((g for g in candidates if isinstance(g, Mapping)), None)
        if first is None:
            continue
        message = maybe_json(first.get("message"))
        out.append(message if message else {"role": "assistant", "content": first.get("text")})
    return out


def _langchain(raw: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """A LangChain message as plain fields with a ``role``; None when ``raw`` is not one."""
    if raw.get("lc") == 1 and isinstance(raw.get("kwargs"), Mapping):
        ids = raw.get("id")
        cls = str(ids[-1]) if isinstance(ids, list) and ids else ""
        if cls not in _LANGCHAIN_ROLES:
            return {}  # a serialized object that is not a message (a prompt value, a document)
        fields = dict(raw["kwargs"])
        fields["role"] = _LANGCHAIN_ROLES[cls] or fields.get("role")
        return fields
    kind = raw.get("type")
    if "role" in raw or not isinstance(kind, str) or kind not in ROLE_ALIASES:
        return None
    data = raw.get("data")
    fields = dict(data) if isinstance(data, Mapping) else dict(raw)
    fields["role"] = kind if kind != "chat" else fields.get("role")
    return fields


class _Reading:
    """What one message holds: its text, the calls it makes, the results it carries."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.calls: list[ToolCallRef] = []
        self.results: list[Message] = []

    def call(self, name: object, arguments: Any, call_id: object) -> None:
        self.calls.append(ToolCallRef(str(name or ""), arguments, opt_str(call_id)))

    def result(self, content: object, call_id: object) -> None:
        text = as_text(maybe_json(content))
        self.results.append(Message("tool", text, tool_call_id=opt_str(call_id)))

    def part(self, part: object) -> None:
        if type(part) is not dict:  # a part parsed with its message is one already
            part = maybe_json(part)
            if isinstance(part, str):
                self.texts.append(part)
                return
            if not isinstance(part, Mapping):
                return
        self._block(part)

    def _block(self, part: Mapping[str, Any]) -> None:
        kind = part.get("type")
        if kind == "generic":  # OTel GenAI 2026: a provider's own part, its type beside
            kind = part.get("generic_type")
        if kind in _CALL_TYPES and ("name" in part or isinstance(part.get("function"), Mapping)):
            self._request(part)
        elif kind in _RESULT_TYPES:
            self.result(_first(part, "response", "result", "content", "output"), _id(part))
        elif kind in _TEXT_TYPES or (kind is None and ("text" in part or "content" in part)):
            self.texts.append(_text(part))
        else:
            self._provider_block(part)

    def _request(self, part: Mapping[str, Any]) -> None:
        function = part.get("function")
        source = function if function is not None and isinstance(function, Mapping) else part
        arguments = _first(source, "arguments", "args", "input")
        name = source.get("name")
        self.calls.append(ToolCallRef(str(name or ""), arguments, opt_str(_id(part))))

    def _provider_block(self, part: Mapping[str, Any]) -> None:
        for key in ("functionCall", "function_call", "toolUse"):
            inner = part.get(key)
            if isinstance(inner, Mapping) and inner.get("name"):
                args = _first(inner, "args", "arguments", "input")
                self.call(inner.get("name"), args, inner.get("id") or inner.get("toolUseId"))
                return
        for key in ("functionResponse", "function_response", "toolResult"):
            inner = part.get(key)
            if isinstance(inner, Mapping):
                content = _first(inner, "response", "content", "output")
                self.result(content, inner.get("id") or inner.get("toolUseId"))
                return

    def tool_calls(self, value: object) -> None:
        for call in _list(value):
            call = maybe_json(call)
            if type(call) is dict or isinstance(call, Mapping):
                self._request(call)


def _first(source: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        if key in source and source[key] is not None:
            return source[key]
    return None


def _id(part: Mapping[str, Any]) -> Any:
    return _first(part, "id", "call_id", "tool_call_id", "tool_use_id", "toolCallId")


def _text(part: Mapping[str, Any]) -> str:
    for key in ("content", "text"):
        if isinstance(part.get(key), str):
            return str(part[key])
    return as_text(part.get("content"))


def _list(value: object) -> list[Any]:
    value = maybe_json(value)
    if isinstance(value, list | tuple):
        return list(value)
    return [value] if value is not None and isinstance(value, Mapping) else []


def read_message(raw: object) -> list[Message]:
    """One message in any encoding above: a message, then the tool results it carries."""
    raw = maybe_json(raw)
    if type(raw) is not dict and not isinstance(raw, Mapping):
        return []
    fields = _langchain(raw)
    if fields is not None and not fields:
        return []
    msg: Mapping[str, Any] = fields if fields is not None else raw
    if msg.get("type") in _ITEM_TYPES and "role" not in msg:
        return _item(msg)  # a Responses API item
    reading = _read_fields(msg)
    role = norm_role(msg.get("role"))
    if role == "tool" and not reading.results:
        call_id = _first(msg, "tool_call_id", "tool_use_id", "id")
        return [Message("tool", "\n".join(reading.texts), tool_call_id=opt_str(call_id))]
    out: list[Message] = []
    if reading.texts or reading.calls or not reading.results:
        content = "\n".join(t for t in reading.texts if t)
        out.append(Message("assistant" if reading.calls else role, content, tuple(reading.calls)))
    out.extend(reading.results)
    return out


def _read_fields(msg: Mapping[str, Any]) -> _Reading:
    reading = _Reading()
    # Each encoding uses few of these fields: an absent one is not read (messages are many).
    for key in ("parts", "content"):
        value = msg.get(key)
        if value is None:
            continue
        value = maybe_json(value) if key == "parts" else value
        if isinstance(value, list):
            for part in value:
                reading.part(part)
        elif isinstance(value, str) and value:
            reading.texts.append(value)
    before = len(reading.calls)
    calls = msg.get("tool_calls")
    if calls is not None:
        reading.tool_calls(calls)
    if len(reading.calls) == before:
        extra = msg.get("additional_kwargs")
        if extra is not None and isinstance(extra, Mapping):
            reading.tool_calls(extra.get("tool_calls"))
    function_call = msg.get("function_call")
    if function_call is not None:
        function_call = maybe_json(function_call)
        if len(reading.calls) == before and isinstance(function_call, Mapping):
            reading.call(function_call.get("name"), function_call.get("arguments"), None)
    if len(reading.calls) > 1:
        _dedupe_calls(reading)
    return reading


def _dedupe_calls(reading: _Reading) -> None:
    """A call written both as a content block and beside it (LangChain's Anthropic messages)
    counts once."""
    seen: set[str] = set()
    kept: list[ToolCallRef] = []
    for call in reading.calls:
        if call.call_id and call.call_id in seen:
            continue
        if call.call_id:
            seen.add(call.call_id)
        kept.append(call)
    reading.calls = kept


def _item(item: Mapping[str, Any]) -> list[Message]:
    reading = _Reading()
    reading.part(item)
    if reading.calls:
        return [Message("assistant", "", tuple(reading.calls))]
    return reading.results


def merge_call_messages(messages: Sequence[Message]) -> tuple[Message, ...]:
    """Consecutive assistant messages holding only calls are one message: instrumentations that
    write each parallel call as its own entry (LiteLLM's ``gen_ai.completion.{i}.function_call``)
    split what the model sent at once."""
    out: list[Message] = []
    for message in messages:
        previous = out[-1] if out else None
        if (
            previous is not None
            and message.role == previous.role == "assistant"
            and message.tool_calls
            and previous.tool_calls
            and not message.content.strip()
            and not previous.content.strip()
        ):
            out[-1] = Message("assistant", "", previous.tool_calls + message.tool_calls)
            continue
        out.append(message)
    return tuple(out)
