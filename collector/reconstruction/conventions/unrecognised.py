"""Nothing silently dropped: spans that look like tool runs when no call was rebuilt.

A span looks like a tool run when its name has the word ``tool`` in it, when an attribute key
names a tool (``acme.tool.name``, ``tool_input``), or when a kind-like attribute says ``tool``
(``openinference.span.kind = TOOL``, ``gen_ai.operation.name = execute_tool``). Tool
*definitions* on model spans (``gen_ai.tool.definitions``, ``llm.tools.*``, ``tool_choice``) do
not count: a model that answered without calling a tool is not a dropped call.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import lru_cache

from toolscore.storage.records import SpanRecord

__all__ = ["runs_tool", "tool_like", "unrecognised_warning"]

_TOOL_WORD = re.compile(r"(?<![a-z])tool(?![a-z])|(?<![a-z])tool_|_tool(?![a-z])", re.IGNORECASE)
_NOT_A_RUN = re.compile(r"tools|definition|tool_choice|tool\.choice|available", re.IGNORECASE)
_KIND_KEYS = re.compile(r"(kind|type|operation\.name|operation)$", re.IGNORECASE)
_TOOL_VALUES = frozenset({"tool", "execute_tool", "tool_call", "function", "mcp_tool_call"})
_SHOWN = 3


def tool_like(span: SpanRecord) -> tuple[str, ...]:
    """What makes ``span`` look like a tool run (empty: nothing): its name, and the attribute
    keys (or ``key=value``) that name a tool."""
    found: list[str] = []
    for key, value in span.attributes.items():
        if _NOT_A_RUN.search(key):
            continue
        if _TOOL_WORD.search(key):
            found.append(key)
        elif _KIND_KEYS.search(key) and str(value).strip().lower() in _TOOL_VALUES:
            found.append(f"{key}={value}")
    if _TOOL_WORD.search(span.name) and not _NOT_A_RUN.search(span.name):
        found.insert(0, f"name {span.name!r}")
    return tuple(found)


def runs_tool(span: SpanRecord) -> bool:
    """Whether one of :func:`tool_like`'s reasons is the name or a ``key=value`` (a key merely
    naming a tool, as an agent span's ``metadata.steps.0.tool.name``, is not enough), without
    making the reasons (hot path: each key is classified once, attribute keys recur)."""
    if _tool_name(span.name):
        return True
    for key, value in span.attributes.items():
        what = _KEY_CLASS.get(key)
        if what is None:
            what = _classify(key)
        if what == _ODD_TOOL_KEY:
            return True
        if what == _KIND_KEY and str(value).strip().lower() in _TOOL_VALUES:
            return True
    return False


_OTHER_KEY, _ODD_TOOL_KEY, _KIND_KEY = 0, 1, 2
_KEY_CLASS: dict[str, int] = {}
_MAX_CLASSIFIED = 1 << 16  # keys are the senders' to choose: the memo stays bounded


def _classify(key: str) -> int:
    """What a key says of its span: a tool run by itself (an odd key naming a tool), maybe by
    its value (a kind-like key), or nothing."""
    odd = "=" in key or key.startswith("name ")  # such a key reads as either reason
    kind = _KIND_KEYS.search(key)
    if not (kind or odd) or _NOT_A_RUN.search(key):
        what = _OTHER_KEY
    elif _TOOL_WORD.search(key):
        what = _ODD_TOOL_KEY if odd else _OTHER_KEY
    else:
        what = _KIND_KEY if kind else _OTHER_KEY
    if len(_KEY_CLASS) < _MAX_CLASSIFIED:
        _KEY_CLASS[key] = what
    return what


@lru_cache(maxsize=4096)
def _tool_name(name: str) -> bool:
    return bool(_TOOL_WORD.search(name)) and not _NOT_A_RUN.search(name)


def unrecognised_warning(spans: Sequence[SpanRecord], readers: Mapping[str, str]) -> str | None:
    """The warning for a conversation from which no call was rebuilt, when some of its spans look
    like tool runs (None: none do). ``readers``: span id -> the convention that read it."""
    suspects = [(s, why) for s in spans if (why := tool_like(s))]
    if not suspects:
        return None
    shown = []
    for span, why in suspects[:_SHOWN]:
        reader = readers.get(span.span_id)
        by = f"read by {reader}, which found no call in it" if reader else "no convention reads it"
        shown.append(
            f"span {span.span_id} {span.name!r} (scope {span.scope_name or '-'!r}; "
            f"{', '.join(why[:4])}; {by})"
        )
    more = f" and {len(suspects) - _SHOWN} more" if len(suspects) > _SHOWN else ""
    return (
        f"no tool call was rebuilt, but {len(suspects)} span(s) look like tool runs: "
        + "; ".join(shown)
        + more
        + " -- calls they ran are not scored (a convention or span shape toolscore does not "
        "read: docs/conventions.md)"
    )
