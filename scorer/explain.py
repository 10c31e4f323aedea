"""Human-readable renderings of calls and arguments for explanations."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:  # annotations only: the bulk path imports this module without dataclasses
    from collections.abc import Iterable, Mapping
    from typing import Any

    from toolscore.scorer.model import ToolCall

MAX_VALUE = 80


def format_value(value: Any) -> str:
    text = repr(value)
    if len(text) > MAX_VALUE:
        return text[: MAX_VALUE - 3] + "..."
    return text


def format_args(args: Mapping[str, Any], keys: Iterable[str] | None = None) -> str:
    if keys is None:
        return ", ".join([f"{k}={format_value(v)}" for k, v in args.items()])
    parts = [f"{k}={format_value(args[k])}" if k in args else f"{k} missing" for k in keys]
    return ", ".join(parts)


def format_call(call: ToolCall, keys: Iterable[str] | None = None) -> str:
    """``get_time(timezone='Asia/Tokyo')``; with ``keys``, only those arguments."""
    return f"{call.name}({format_args(call.args, keys)})"


def format_names(calls: Iterable[ToolCall]) -> str:
    return "[" + ", ".join([c.name for c in calls]) + "]"
