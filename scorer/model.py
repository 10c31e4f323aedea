"""Value types shared by every part of the scorer (and by its callers)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call: a tool name and its decoded JSON arguments (key order preserved)."""

    name: str
    args: Mapping[str, Any]


#: One reference entry: a call, or (for ``order: grouped``) a group of calls in any order.
ReferenceItem: TypeAlias = ToolCall | tuple[ToolCall, ...]
Reference: TypeAlias = tuple[ReferenceItem, ...]


@dataclass(frozen=True, slots=True)
class Message:
    """One Ragas message: ``type`` is ``human``, ``ai`` or ``tool``."""

    type: str
    content: str
    tool_calls: tuple[ToolCall, ...] | None = None
    metadata: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Sample:
    """A Ragas ``MultiTurnSample`` reduced to what scoring needs.

    ``predicted_tool_calls`` are the tool calls of every ``ai`` message, in message order.
    ``reference_tool_calls`` is ``None`` when the sample has none (a per-sample error for scoring).
    """

    id: Any
    user_input: tuple[Message, ...]
    predicted_tool_calls: tuple[ToolCall, ...]
    reference_tool_calls: Reference | None


@dataclass(frozen=True, slots=True)
class Score:
    """The result of one metric on one sample.

    ``value`` is in [0, 1], or ``None`` when the sample could not be scored, in which case
    ``error`` says why. ``details`` is a JSON-able explanation (pairing, argument scores, reasons).
    """

    value: float | None
    details: Mapping[str, Any] = field(default_factory=dict)
    error: str | None = None


class SampleError(ValueError):
    """A sample that cannot be read; the message says what is wrong and where."""


class ConfigError(ValueError):
    """An invalid scoring configuration; the message starts with the offending path."""
