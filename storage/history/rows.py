"""What a scoring writes: one conversation's next revision, its evaluations and its tool calls.

The scoring pipeline builds these values; :func:`~toolscore.storage.history.evaluations.
write_revisions` turns them into rows of ``evaluations`` and ``tool_calls`` (adding the
bookkeeping columns: conversation, revision, expectation, time). Every value is already
storable (``storage.plumbing.storable``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class EvaluationRow:
    """One metric instance's result on one conversation."""

    metric: str
    metric_type: str
    metric_config: Mapping[str, Any]
    score: float | None
    error: str | None
    details: Mapping[str, Any]
    predicted_count: int
    expected_count: int


@dataclass(frozen=True, slots=True)
class CallRow:
    """One rebuilt tool call, at its position in the conversation."""

    position: int
    name: str
    arguments: Any  # a JSON value, or None when they were not recorded or not readable
    arguments_raw: str | None
    arguments_ok: bool
    call_id: str | None
    trace_id: str
    span_id: str | None
    convention: str


@dataclass(frozen=True, slots=True)
class Revision:
    """One conversation's scoring result, ready to be stored as its next revision."""

    conversation_id: str
    status: str
    trace_id: str
    root_span_id: str | None
    first_user_message: str | None = None
    expectation_id: str | None = None
    expectation_version: int | None = None
    evaluations: tuple[EvaluationRow, ...] = ()
    calls: tuple[CallRow, ...] = ()
    error: str | None = None
    unmatched_reason: str | None = None  # why no expectation was found (status unmatched)
    warning: str | None = None  # tool-like spans from which no call was rebuilt
    service_name: str | None = None  # the resource's service.name (coverage)
    agent_name: str | None = None  # a span's gen_ai.agent.name (coverage)


def call_from_row(row: Mapping[Any, Any]) -> CallRow:
    """A stored ``tool_calls`` row (every column) as the :class:`CallRow` it was written from."""
    return CallRow(
        position=row["position"],
        name=row["name"],
        arguments=row["arguments"],
        arguments_raw=row["arguments_raw"],
        arguments_ok=row["arguments_ok"],
        call_id=row["call_id"],
        trace_id=row["trace_id"],
        span_id=row["span_id"],
        convention=row["convention"],
    )


def evaluation_from_row(row: Mapping[Any, Any]) -> EvaluationRow:
    """A stored ``evaluations`` row (every column) as the :class:`EvaluationRow` written."""
    return EvaluationRow(
        metric=row["metric"],
        metric_type=row["metric_type"],
        metric_config=row["metric_config"],
        score=row["score"],
        error=row["error"],
        details=row["details"],
        predicted_count=row["predicted_count"],
        expected_count=row["expected_count"],
    )


__all__ = ["CallRow", "EvaluationRow", "Revision", "call_from_row", "evaluation_from_row"]
