"""Decoding tool-call arguments from every shape instrumentations send them in.

Shapes seen in real telemetry (docs/conventions.md, pitfall 4): an object; a JSON string; a JSON
string inside JSON; wrapper objects (traceloop ``{"args": [...], "kwargs": {...}}``, OpenLLMetry's
LangChain ``{"input_str", "inputs", ...}``); a bare scalar whose parameter name was lost; a Python
repr (``{'a': 1}``); truncated or invalid JSON. Nothing here raises: undecodable input is kept as
the raw string and flagged.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from toolscore.storage.plumbing.jsoncodec import json_loads

__all__ = [
    "DecodedArgs",
    "decode_arguments",
    "decode_parsed",
    "decode_tool_input",
    "repair_truncated_json",
]

_TRACELOOP_WRAPPER_KEYS = frozenset({"args", "kwargs"})
_INVALID_JSON = frozenset({"INVALID_JSON"})
_LANGCHAIN_WRAPPER_KEYS = frozenset({"input_str", "inputs"})
_MAX_NESTING = 4  # JSON inside JSON inside ... stop somewhere


@dataclass(frozen=True, slots=True)
class DecodedArgs:
    """Result of decoding. ``arguments`` is None when no named-argument dict could be recovered.

    ``raw`` keeps the original text whenever decoding failed or was partial; ``positional`` holds
    values whose parameter names were lost (bare value, traceloop positional ``args``), so the
    caller can recover the names from the model's call or from the tool definitions.
    """

    arguments: dict[str, Any] | None
    raw: str | None
    ok: bool
    positional: tuple[Any, ...] = ()
    partial: bool = False


def decode_arguments(value: object) -> tuple[dict[str, Any] | None, str | None, bool]:
    """Decode ``value`` into ``(arguments dict | None, raw string | None, ok)``. Never raises."""
    decoded = decode_tool_input(value)
    return decoded.arguments, decoded.raw, decoded.ok


def decode_tool_input(value: object) -> DecodedArgs:
    """Decode with the extra detail (positional values, partial flag). Never raises."""
    try:
        return _decode(value, raw=None, depth=0)
    except Exception as exc:  # defensive: odd objects must not break reconstruction
        return DecodedArgs(None, _safe_str(value) or f"<undecodable: {exc!r}>", False)


def decode_parsed(text: str, parsed: Any) -> DecodedArgs:
    """``decode_tool_input(text)`` for a JSON text already read: ``parsed`` is the value of
    ``text.strip()`` (which starts with ``[``, ``{`` or ``"``). Never raises."""
    try:
        return _from_parsed(parsed, raw=text, depth=0)
    except Exception as exc:  # as decode_tool_input
        return DecodedArgs(None, _safe_str(text) or f"<undecodable: {exc!r}>", False)


def _decode(value: object, *, raw: str | None, depth: int) -> DecodedArgs:
    if type(value) is dict:  # the usual two first, without the Mapping ABC's check
        return _from_mapping(value, raw=raw, depth=depth)
    if type(value) is str:
        return _from_string(value, raw=raw if raw is not None else value, depth=depth)
    if value is None:
        return DecodedArgs(None, raw, False)
    if isinstance(value, bytes | bytearray):
        value = bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, Mapping):
        return _from_mapping(value, raw=raw, depth=depth)
    if isinstance(value, str):
        return _from_string(value, raw=raw if raw is not None else value, depth=depth)
    if isinstance(value, list | tuple):
        return DecodedArgs(None, raw if raw is not None else _safe_str(value), False, tuple(value))
    # a bare scalar (number, bool): the parameter name is lost
    return DecodedArgs(None, raw if raw is not None else _safe_str(value), False, (value,))


def _from_mapping(value: Mapping[Any, Any], *, raw: str | None, depth: int) -> DecodedArgs:
    keys = set(value)
    if keys == _INVALID_JSON:  # Pydantic AI's args_as_json_str() for unparseable model output
        inner = value["INVALID_JSON"]
        text = inner if isinstance(inner, str) else _safe_str(inner)
        return _from_string(text, raw=text, depth=_MAX_NESTING)
    if keys == _TRACELOOP_WRAPPER_KEYS and _is_traceloop_wrapper(value):
        # traceloop decorators: positional values lose their parameter names
        kwargs = value.get("kwargs") or {}
        args = value.get("args") or []
        named = {str(k): v for k, v in kwargs.items()} if isinstance(kwargs, Mapping) else {}
        positional = tuple(args) if isinstance(args, list | tuple) else (args,)
        if not positional:
            return DecodedArgs(named, None, True)
        return DecodedArgs(named or None, raw or _safe_str(value), False, positional)
    if _LANGCHAIN_WRAPPER_KEYS & keys and keys & {"tags", "metadata", "kwargs", "inputs"}:
        inputs = value.get("inputs")
        if isinstance(inputs, Mapping) and inputs:
            return DecodedArgs({str(k): v for k, v in inputs.items()}, None, True)
        if "input_str" in value and depth < _MAX_NESTING:
            return _decode(value.get("input_str"), raw=raw, depth=depth + 1)
    return DecodedArgs({str(k): v for k, v in value.items()}, None, True)


def _is_traceloop_wrapper(value: Mapping[Any, Any]) -> bool:
    args = value.get("args", [])
    kwargs = value.get("kwargs", {})
    return isinstance(args, list | tuple) and isinstance(kwargs, Mapping)


def _from_string(text: str, *, raw: str, depth: int) -> DecodedArgs:
    stripped = text.strip()
    if not stripped:
        return DecodedArgs({}, None, True)  # some providers send "" for a call without arguments
    try:
        parsed = json_loads(stripped)
    except (ValueError, RecursionError):
        parsed = _NOT_PARSED
    if parsed is not _NOT_PARSED:
        return _from_parsed(parsed, raw=raw, depth=depth)
    # Python repr, e.g. old LangChain ``str(dict)``
    if stripped[:1] in "{[(":
        try:
            literal = ast.literal_eval(stripped)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            literal = _NOT_PARSED
        if isinstance(literal, Mapping):
            return _with_raw(_from_mapping(literal, raw=raw, depth=depth + 1), raw)
    if stripped.startswith("{"):
        try:
            repaired = repair_truncated_json(stripped)
        except RecursionError:  # nested beyond what json can read: kept as the raw text
            repaired = None
        if isinstance(repaired, dict) and repaired:  # {} would read as "no arguments"
            return DecodedArgs(repaired, raw, False, partial=True)
        return DecodedArgs(None, raw, False)
    # a bare value whose parameter name was lost (OpenInference LangChain single-arg tools)
    return DecodedArgs(None, raw, False, (text,))


def _from_parsed(parsed: Any, *, raw: str, depth: int) -> DecodedArgs:
    """A JSON text's value, read from the text ``raw``."""
    if isinstance(parsed, str) and depth < _MAX_NESTING:
        inner = _decode(parsed, raw=raw, depth=depth + 1)
        if inner.arguments is not None or inner.positional != (parsed,):
            return _with_raw(inner, raw)
        return DecodedArgs(None, raw, False, (parsed,))
    decoded = _decode(parsed, raw=raw, depth=depth + 1)
    return _with_raw(decoded, raw)


def _with_raw(decoded: DecodedArgs, raw: str) -> DecodedArgs:
    """Keep the original text only where decoding was not clean."""
    if decoded.ok and decoded.raw is None:
        return decoded  # made for this decoding: nobody else holds it
    if decoded.ok:
        return DecodedArgs(decoded.arguments, None, True, decoded.positional, decoded.partial)
    return DecodedArgs(decoded.arguments, raw, False, decoded.positional, decoded.partial)


class _NotParsed:
    pass


_NOT_PARSED: Any = _NotParsed()


def repair_truncated_json(text: str) -> Any:
    """Best-effort parse of JSON cut off mid-way: close the open string and brackets.

    Tries the whole text first, then cuts back to earlier separators, so a half-written value is
    dropped rather than guessed. Returns the parsed value, or None when nothing parses.
    """
    outside, ends_in_string, _ = _scan(text)
    ends = list(reversed(_cut_points(outside)))
    # the whole text only when it stops after a complete value: "Par or 12 may be cut short
    if text.rstrip()[-1:] in ('"', "}", "]") and not ends_in_string:
        ends.insert(0, len(text))
    for end in ends[:64]:
        candidate = _close(text[:end])
        if candidate is None:
            continue
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    return None


def _scan(text: str) -> tuple[list[tuple[int, str]], bool, bool]:
    """The characters outside JSON strings with their offsets, whether ``text`` ends inside a
    string, and whether it ends right after a backslash inside that string."""
    outside: list[tuple[int, str]] = []
    in_string = escaped = False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        else:
            outside.append((i, ch))
    return outside, in_string, escaped


def _cut_points(outside: list[tuple[int, str]]) -> list[int]:
    """Offsets just before a ``,`` or just after ``{``/``[`` outside strings."""
    return [i if ch == "," else i + 1 for i, ch in outside if ch in ",{["]


def _close(prefix: str) -> str | None:
    outside, in_string, escaped = _scan(prefix)
    stack: list[str] = []
    for _, ch in outside:
        if ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack:
                return None
            stack.pop()
    body = prefix
    if in_string:
        body = body[:-1] if escaped else body
        body += '"'
    body = body.rstrip()
    if body.endswith(":"):
        return None
    if body.endswith(","):
        body = body[:-1]
    return body + "".join(reversed(stack))


def _safe_str(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except Exception:
        try:
            return str(value)
        except Exception:
            return "<unprintable>"
