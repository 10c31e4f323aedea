"""Test data for the history features: a migrated database and evaluation rows in it."""

from __future__ import annotations

import datetime as dt
import hashlib
import itertools
from typing import Any

from sqlalchemy import Engine, insert, update

from toolscore.storage import migrate
from toolscore.storage.conversations.tables import conversations, evaluations
from toolscore.storage.plumbing.engine import create_engine

_ids = itertools.count(1)
T0 = dt.datetime(2026, 11, 2, 9, 0, tzinfo=dt.UTC)


def migrated_engine(url: str) -> Engine:
    """An engine on ``url`` after ``alembic upgrade heads`` (the real schema and views)."""
    migrate.upgrade(url, "heads")
    return create_engine(url)


def trace_id_for(conversation_id: str) -> str:
    return hashlib.sha256(conversation_id.encode()).hexdigest()[:32]


def add_conversation(
    engine: Engine,
    conversation_id: str,
    *,
    first_seen_at: dt.datetime = T0,
    trace_id: str | None = None,
    root_span_id: str | None = "00f067aa0ba902b7",
) -> None:
    with engine.begin() as conn:
        conn.execute(
            insert(conversations).values(
                id=conversation_id,
                status="scored",
                first_seen_at=first_seen_at,
                last_span_at=first_seen_at,
                last_span_received_ns=int(first_seen_at.timestamp() * 1e9),
                needs_scoring=False,
                last_trace_id=trace_id or trace_id_for(conversation_id),
                root_span_id=root_span_id,
                revision=0,
            )
        )


def add_evaluation(
    engine: Engine,
    conversation_id: str,
    metric: str = "tool_call_accuracy",
    score: float | None = 1.0,
    *,
    revision: int = 1,
    expectation_id: str = "weather",
    expectation_version: int = 1,
    metric_type: str | None = None,
    created_at: dt.datetime = T0,
    trace_id: str | None = None,
    root_span_id: str | None = "00f067aa0ba902b7",
    details: dict[str, Any] | None = None,
    error: str | None = None,
    predicted_count: int = 2,
    expected_count: int = 2,
    supersede: bool = True,
) -> int:
    """Insert an evaluation row (current; earlier revisions of it become not current)."""
    with engine.begin() as conn:
        if supersede:
            conn.execute(
                update(evaluations)
                .where(evaluations.c.conversation_id == conversation_id)
                .where(evaluations.c.metric == metric)
                .values(is_current=False)
            )
        result = conn.execute(
            insert(evaluations).values(
                conversation_id=conversation_id,
                revision=revision,
                is_current=True,
                trace_id=trace_id or trace_id_for(conversation_id),
                root_span_id=root_span_id,
                expectation_id=expectation_id,
                expectation_version=expectation_version,
                metric=metric,
                metric_type=metric_type or metric,
                metric_config={},
                score=score,
                error=error,
                details=details if details is not None else {"matched": predicted_count},
                predicted_count=predicted_count,
                expected_count=expected_count,
                created_at=created_at,
            )
        )
        key = result.inserted_primary_key
        assert key is not None
        return int(key[0])
