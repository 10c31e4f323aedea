"""Observations: what a convention module extracts from one span (or a group of log records).

Two kinds, independent of the convention they came from:

- :class:`Exchange`: one model call, with the messages it was sent (``inputs``, the history) and
  the messages it produced (``outputs``; assistant messages with ordered tool calls). Histories
  repeat earlier calls; the merger in :mod:`toolscore.collector.reconstruction.rebuild`
  deduplicates them.
- :class:`ToolExecution`: one tool run (a tool span): name, arguments as found, call id, result.

A convention module implements :class:`Convention`. Values are kept as found (``arguments`` may be
a dict, a JSON string, a wrapper...); :mod:`toolscore.collector.reconstruction.tool_args` decodes
them later.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from toolscore.storage.plumbing.jsoncodec import json_loads
from toolscore.storage.records import Attributes, LogRecordData, SpanRecord


@dataclass(frozen=True, slots=True)
class ToolCallRef:
    """A tool call as the model requested it (inside an assistant message)."""

    name: str
    arguments: Any  # as found: dict, JSON string, None when content capture was off...
    call_id: str | None = None
    note: str | None = None  # how it was read, when not as recorded (show --spans)


@dataclass(frozen=True, slots=True)
class Message:
    role: str  # "user" | "assistant" | "tool" | "system" (normalised)
    content: str = ""
    tool_calls: tuple[ToolCallRef, ...] = ()
    tool_call_id: str | None = None  # for role "tool": which call this is the result of


@dataclass(frozen=True, slots=True)
class Exchange:
    convention: str
    trace_id: str
    span_id: str | None
    sort_ns: int  # where this exchange sits in time (span start; history-only: span end)
    inputs: tuple[Message, ...] = ()
    outputs: tuple[Message, ...] = ()
    response_id: str | None = None


@dataclass(frozen=True, slots=True)
class ToolExecution:
    convention: str
    trace_id: str
    span_id: str | None
    start_ns: int
    name: str
    arguments: Any
    call_id: str | None = None
    result: str | None = None
    failed: bool = False
    notes: tuple[str, ...] = ()  # what was inferred of it, and how (show --spans)


Observation = Exchange | ToolExecution


@dataclass(frozen=True, slots=True)
class Triggers:
    """What a span must show for a convention's ``applies`` to be true (or to raise): its scope
    is one of ``scopes``, or it has one of the attribute ``keys``, or its name starts with one of
    ``name_prefixes``, or (``events``) it has events. Spans showing none are not offered to the
    convention (:mod:`toolscore.collector.reconstruction.conventions` dispatches on this); a
    convention without
    ``triggers`` is offered every span."""

    scopes: frozenset[str] = frozenset()
    keys: frozenset[str] = frozenset()
    name_prefixes: tuple[str, ...] = ()
    events: bool = False


class Convention(Protocol):
    """One instrumentation convention. Adding a convention = one module implementing this."""

    name: str

    def applies(self, span: SpanRecord) -> bool:
        """Whether this module understands ``span`` (checked in registry order; first wins)."""
        ...

    def extract(self, span: SpanRecord) -> Sequence[Observation]:
        """Observations carried by ``span``. May raise; the caller records a warning."""
        ...

    def extract_logs(self, logs: Sequence[LogRecordData]) -> Sequence[Observation]:
        """Observations carried by log records (most conventions have none)."""
        ...


# --- helpers shared by the modules -------------------------------------------------------------

ROLE_ALIASES: Mapping[str, str] = {
    "human": "user",
    "user": "user",
    "ai": "assistant",
    "assistant": "assistant",
    "model": "assistant",
    "tool": "tool",
    "function": "tool",
    "ipython": "tool",
    "system": "system",
    "developer": "system",
}


def norm_role(role: object) -> str:
    text = str(role or "").strip().lower()
    return ROLE_ALIASES.get(text, text or "user")


_NOT_TEXT = frozenset({dict, list, tuple, int, float, bool, type(None)})


def maybe_json(value: object) -> Any:
    """Parse a JSON string; return anything else (or unparseable text) unchanged."""
    if type(value) in _NOT_TEXT:  # parsed values, read again and again by the readers
        return value
    if type(value) is not str and isinstance(value, bytes | bytearray):
        value = bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, str):
        stripped = value.strip()
        if stripped[:1] in ("[", "{", '"'):
            try:
                return json_loads(stripped)
            except ValueError:
                return value
    return value


def as_text(value: object) -> str:
    """Render message content as text (Ragas messages carry strings)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = [_part_text(part) for part in value]
        return "\n".join(t for t in texts if t)
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _part_text(part: object) -> str:
    if isinstance(part, str):
        return part
    if isinstance(part, Mapping):
        for key in ("text", "content"):
            if isinstance(part.get(key), str):
                return str(part[key])
        return ""
    return as_text(part)


def opt_str(value: object) -> str | None:
    if type(value) is str:  # the usual case, without the str() call
        return value.strip() or None
    if value is None:
        return None
    text = str(value).strip()
    return text or None


_INDEX = re.compile(r"^\d+$")


def unflatten(attrs: Attributes, prefix: str) -> Any:
    """Rebuild ``prefix.0.message.role``-style flattened keys into nested lists/dicts.

    Numeric path segments become list indices (sorted numerically, gaps dropped). If the prefix
    itself holds a value (a JSON string or a list), that value is returned instead.
    """
    if prefix in attrs:
        return maybe_json(attrs[prefix])
    dotted = prefix + "."
    tree: dict[str, Any] = {}
    for key, value in attrs.items():
        if not key.startswith(dotted):
            continue
        node = tree
        parts = key[len(dotted) :].split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
            node = child
        node[parts[-1]] = value
    return _listify(tree) if tree else None


def _listify(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    if node and all(_INDEX.match(k) for k in node):
        return [_listify(node[k]) for k in sorted(node, key=int)]
    return {k: _listify(v) for k, v in node.items()}


def as_list(value: object) -> list[Any]:
    value = maybe_json(value)
    if isinstance(value, list):
        return value
    if isinstance(value, tuple):
        return list(value)
    if value is None:
        return []
    return [value]


def first_attr(attrs: Attributes, keys: Iterable[str]) -> Any:
    for key in keys:
        if key in attrs and attrs[key] is not None:
            return attrs[key]
    return None
