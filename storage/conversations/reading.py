"""The conversations repository: reading conversations, their traces, calls and scores."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import Connection, func, select
from sqlalchemy.engine import Dialect

from toolscore.storage.conversations.tables import conversations, evaluations, tool_calls
from toolscore.storage.plumbing.chunks import chunks
from toolscore.storage.plumbing.dialect import in_ids
from toolscore.storage.plumbing.row_lists import each_id
from toolscore.storage.telemetry.traces import traces_table


@dataclass(frozen=True, slots=True)
class ScoringHead:
    """What scoring needs to know of a conversation besides its telemetry."""

    id: str
    last_trace_id: str
    root_span_id: str | None
    reference_id: str | None


def heads_and_traces(
    conn: Connection, ids: Sequence[str], *, without_traces: Collection[str] = ()
) -> tuple[list[ScoringHead], dict[str, str]]:
    """The conversations of ``ids`` that exist (in chunk order) and trace id -> conversation id
    of their traces, leaving out the traces of conversations in ``without_traces``."""
    heads: list[ScoringHead] = []
    trace_conv: dict[str, str] = {}
    for chunk in chunks(ids):
        heads.extend(
            ScoringHead(*row) for row in conn.execute(_heads(conn.dialect), {"ids": chunk})
        )
        loaded = [conv_id for conv_id in chunk if conv_id not in without_traces]
        for trace_id, conv_id in conn.execute(_traces(conn.dialect), {"ids": loaded}):
            trace_conv[trace_id] = conv_id
    return heads, trace_conv


# Built once, with bound parameters (scoring runs them every round).
@cache
def _heads(dialect: Dialect) -> Any:
    c = conversations.c
    return select(c.id, c.last_trace_id, c.root_span_id, c.reference_id).where(
        in_ids(dialect, c.id)
    )


@cache
def _traces(dialect: Dialect) -> Any:
    t = traces_table.c
    return each_id(dialect, select(t.trace_id, t.conversation_id), t.conversation_id)


# --- what the read-only commands show (``toolscore conversations``, ``show``) -----------------
# Whole rows cross as plain dicts of every column: the commands print them all (``--json``).


@dataclass(frozen=True, slots=True)
class CurrentScore:
    conversation_id: str
    metric: str
    score: float | None
    error: str | None


def recent(conn: Connection, *, limit: int, status: str | None = None) -> list[dict[str, Any]]:
    """The ``limit`` conversations active most recently (optionally only those in ``status``)."""
    c = conversations.c
    stmt = select(conversations).order_by(c.last_span_at.desc(), c.id)
    if status is not None:
        stmt = stmt.where(c.status == status)
    return [dict(r) for r in conn.execute(stmt.limit(limit)).mappings()]


def current_scores(conn: Connection, conversation_ids: Sequence[str]) -> list[CurrentScore]:
    """The current evaluations' scores of the conversations, in the order they were written."""
    if not conversation_ids:
        return []
    e = evaluations.c
    rows = conn.execute(
        select(e.conversation_id, e.metric, e.score, e.error)
        .where(e.conversation_id.in_(conversation_ids), e.is_current.is_(True))
        .order_by(e.id)
    )
    return [CurrentScore(*r) for r in rows]


def conversation(conn: Connection, conversation_id: str) -> dict[str, Any] | None:
    """The conversation's row (every column), or None."""
    row = (
        conn.execute(select(conversations).where(conversations.c.id == conversation_id))
        .mappings()
        .first()
    )
    return None if row is None else dict(row)


def revision_calls(
    conn: Connection, conversation_id: str, revision: int | None
) -> list[dict[str, Any]]:
    """The ``tool_calls`` rows of a revision (``None``: the newest with calls), by position."""
    t = tool_calls.c
    which: Any = revision
    if revision is None:
        which = select(func.max(t.revision)).where(t.conversation_id == conversation_id)
        which = which.scalar_subquery()
    stmt = (
        select(tool_calls)
        .where(t.conversation_id == conversation_id, t.revision == which)
        .order_by(t.position)
    )
    return [dict(r) for r in conn.execute(stmt).mappings()]


def revision_evaluations(
    conn: Connection, conversation_id: str, revision: int | None
) -> list[dict[str, Any]]:
    """The ``evaluations`` rows of a revision (``None``: the current ones), in written order."""
    e = evaluations.c
    which = e.is_current.is_(True) if revision is None else e.revision == revision
    stmt = select(evaluations).where(e.conversation_id == conversation_id, which).order_by(e.id)
    return [dict(r) for r in conn.execute(stmt).mappings()]


def trace_ids(conn: Connection, conversation_id: str) -> list[str]:
    """The traces that make up the conversation."""
    t = traces_table.c
    stmt = select(t.trace_id).where(t.conversation_id == conversation_id)
    return list(conn.execute(stmt).scalars())
