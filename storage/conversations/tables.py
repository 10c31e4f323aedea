"""Tables of the scoring pipeline: conversations, their traces, evaluations and tool calls.

``evaluations`` is the score history: one row per (conversation, metric instance, revision); only
the newest revision's rows of a conversation have ``is_current`` true. ``conversations`` holds the
completion state (last span seen, whether it needs scoring, who claimed it), so completion survives
restarts and several processes can share one database. Migration: ``0003``.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    Boolean,
    Float,
    Index,
    Integer,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from toolscore.storage.base import Base, Int64, JsonOrNull, JsonType, UtcDateTime

# Conversations with telemetry left to prune (textually equal to migration 0005's index
# predicate: SQLite uses a partial index only for queries containing the predicate as written).
PRUNABLE = "pruned_at IS NULL OR pruned_through_ns <> last_span_received_ns"

STATUS_OPEN = "open"
STATUS_SCORED = "scored"
STATUS_UNMATCHED = "unmatched"
STATUS_ERROR = "error"
STATUSES = (STATUS_OPEN, STATUS_SCORED, STATUS_UNMATCHED, STATUS_ERROR)  # all there are


# SQLite uses a partial index only for queries whose WHERE has this term as the query writes it
# (SQLAlchemy renders ``needs_scoring == true()`` so): keep them alike.
PENDING_SQLITE = "needs_scoring = 1"


class Conversation(Base):
    __tablename__ = "conversations"

    id: Mapped[str] = mapped_column(Text, primary_key=True)
    status: Mapped[str] = mapped_column(Text, nullable=False, default=STATUS_OPEN)
    first_seen_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, nullable=False)
    last_span_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, nullable=False)
    last_span_received_ns: Mapped[int] = mapped_column(Int64, nullable=False)
    needs_scoring: Mapped[bool] = mapped_column(Boolean, nullable=False)
    claimed_by: Mapped[str | None] = mapped_column(Text, nullable=True)
    claimed_until: Mapped[dt.datetime | None] = mapped_column(UtcDateTime, nullable=True)
    last_trace_id: Mapped[str] = mapped_column(Text, nullable=False)
    root_span_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    reference_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    first_user_message: Mapped[str | None] = mapped_column(Text, nullable=True)
    revision: Mapped[int] = mapped_column(Integer, nullable=False, default=0)
    scored_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime, nullable=True)
    expectation_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    expectation_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    # Retention (migration 0006, storage/retention/spans.py): telemetry received up to
    # pruned_through_ns was deleted; the current revision's first pruned_calls calls came from it.
    pruned_through_ns: Mapped[int | None] = mapped_column(Int64, nullable=True)
    pruned_calls: Mapped[int | None] = mapped_column(Integer, nullable=True)
    pruned_at: Mapped[dt.datetime | None] = mapped_column(UtcDateTime, nullable=True)
    # why no expectation was found (status unmatched), else NULL; migration 0005
    unmatched_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    # spans that look like tool runs when no call was rebuilt, else NULL; migration 0010
    warning: Mapped[str | None] = mapped_column(Text, nullable=True)
    # the conversation's service.name and gen_ai.agent.name, for coverage; migration 0018
    service_name: Mapped[str | None] = mapped_column(Text, nullable=True)
    agent_name: Mapped[str | None] = mapped_column(Text, nullable=True)

    __table_args__ = (
        # The worker's "what is ready" query scans pending rows by their last span time.
        # Partial: only pending rows (the claims ask for needs_scoring = true), so it stays small
        # and a query for done conversations cannot walk it (migration 0011).
        Index(
            None,
            "needs_scoring",
            "last_span_received_ns",
            sqlite_where=text(PENDING_SQLITE),
            postgresql_where=text("needs_scoring"),
        ),
        Index(None, "last_span_at"),
        # browsing (the web UI, migration 0019): by expectation, and those with a warning
        Index("ix_conversations_expectation_last_span_at", "expectation_id", "last_span_at"),
        Index(
            "ix_conversations_warning_last_span_at",
            "last_span_at",
            sqlite_where=text("warning IS NOT NULL"),
            postgresql_where=text("warning IS NOT NULL"),
        ),
        # Retention's "what is left to prune" (the predicate is storage.retention.spans.PRUNABLE).
        Index(
            "ix_conversations_prunable",
            "last_span_received_ns",
            sqlite_where=text(PRUNABLE),
            postgresql_where=text(PRUNABLE),
        ),
    )


class Evaluation(Base):
    __tablename__ = "evaluations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    conversation_id: Mapped[str] = mapped_column(Text, nullable=False)
    revision: Mapped[int] = mapped_column(Integer, nullable=False)
    is_current: Mapped[bool] = mapped_column(Boolean, nullable=False)
    trace_id: Mapped[str] = mapped_column(Text, nullable=False)
    root_span_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    expectation_id: Mapped[str] = mapped_column(Text, nullable=False)
    expectation_version: Mapped[int] = mapped_column(Integer, nullable=False)
    metric: Mapped[str] = mapped_column(Text, nullable=False)
    metric_type: Mapped[str] = mapped_column(Text, nullable=False)
    metric_config: Mapped[dict[str, Any]] = mapped_column(JsonType, nullable=False)
    score: Mapped[float | None] = mapped_column(Float, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    details: Mapped[dict[str, Any]] = mapped_column(JsonType, nullable=False)
    predicted_count: Mapped[int] = mapped_column(Integer, nullable=False)
    expected_count: Mapped[int] = mapped_column(Integer, nullable=False)
    created_at: Mapped[dt.datetime] = mapped_column(UtcDateTime, nullable=False)

    __table_args__ = (
        UniqueConstraint("conversation_id", "metric", "revision"),
        Index(None, "expectation_id", "created_at"),
        # superseding a round's conversations' current rows: (is_current, id IN ...) lookups,
        # not a walk of every current evaluation (migration 0009)
        Index(None, "is_current", "conversation_id"),
        Index(None, "created_at"),
    )


class ToolCallRow(Base):
    __tablename__ = "tool_calls"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    conversation_id: Mapped[str] = mapped_column(Text, nullable=False)
    revision: Mapped[int] = mapped_column(Integer, nullable=False)
    position: Mapped[int] = mapped_column(Integer, nullable=False)
    name: Mapped[str] = mapped_column(Text, nullable=False)
    arguments: Mapped[Any] = mapped_column(JsonOrNull, nullable=True)
    arguments_raw: Mapped[str | None] = mapped_column(Text, nullable=True)
    arguments_ok: Mapped[bool] = mapped_column(Boolean, nullable=False)
    call_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    trace_id: Mapped[str] = mapped_column(Text, nullable=False)
    span_id: Mapped[str | None] = mapped_column(Text, nullable=True)
    convention: Mapped[str] = mapped_column(Text, nullable=False)

    __table_args__ = (UniqueConstraint("conversation_id", "revision", "position"),)


conversations: Table = Conversation.__table__  # type: ignore[assignment]
evaluations: Table = Evaluation.__table__  # type: ignore[assignment]
tool_calls: Table = ToolCallRow.__table__  # type: ignore[assignment]
