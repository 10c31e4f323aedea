"""Claims on conversations while they are scored: taking, sizing, renewing a lease.

A claim is a lease (``claimed_by``, ``claimed_until``) taken by one ``UPDATE ... WHERE id IN
(SELECT ... FOR UPDATE SKIP LOCKED) RETURNING``: on PostgreSQL concurrent workers skip each
other's rows; on SQLite the single statement holds the one write lock. A worker that dies leaves a
lease that expires, and the conversation (still ``needs_scoring``) is claimed again. When a
conversation is ready is decided in ``toolscore.collector.pipeline.claim`` (its ``Timing``).

A conversation that takes longer to score than the lease (a big one) has its lease renewed by
its worker while the work progresses, so no other worker takes it over and starts again.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from sqlalchemy import Connection, and_, bindparam, case, func, or_, select, true
from sqlalchemy.engine import Dialect
from sqlalchemy.sql.elements import ColumnElement

from toolscore.storage.conversations.tables import conversations
from toolscore.storage.plumbing.chunks import chunks
from toolscore.storage.plumbing.dialect import skip_locked_in
from toolscore.storage.plumbing.row_lists import each_id
from toolscore.storage.telemetry.spans import spans_table
from toolscore.storage.telemetry.traces import traces_table

NS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class Claimed:
    conversation_id: str
    last_span_received_ns: int  # as read when claimed: a newer span means "score again"
    # ready after the short idle time rather than the settle time (see Readiness)
    early: bool = False


@dataclass(frozen=True, slots=True)
class Readiness:
    """When a conversation needing scoring is ready (ns): ``settle_ns`` after its last span, or
    ``idle_ns`` after it when keyed by its only trace (no other can join) whose root span came."""

    settle_ns: int
    idle_ns: int


def _utc(ns: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ns / NS, tz=dt.UTC)


def _early() -> ColumnElement[bool]:
    c = conversations.c
    return and_(c.id == c.last_trace_id, c.root_span_id.is_not(None))


@cache
def _claim_statement(dialect: Dialect, limit: int) -> Any:
    """The claim, built once per dialect and limit (building costs more than running it)."""
    c = conversations.c
    ready = and_(
        c.needs_scoring == true(),
        or_(c.claimed_by.is_(None), c.claimed_until < bindparam("now", type_=c.claimed_until.type)),
        or_(
            c.last_span_received_ns <= bindparam("settled"),
            and_(_early(), c.last_span_received_ns <= bindparam("idled")),
        ),
    )
    pick = select(c.id).where(ready).order_by(c.last_span_received_ns).limit(limit)
    pick = skip_locked_in(dialect, pick)
    return (
        conversations.update()
        .where(c.id.in_(pick.scalar_subquery()))
        .values(claimed_by=bindparam("worker"), claimed_until=bindparam("until"))
        .returning(c.id, c.last_span_received_ns, _early())
    )


def claim_ready(
    conn: Connection,
    *,
    worker_id: str,
    now_ns: int,
    ready: Readiness,
    lease_ns: int,
    limit: int,
) -> list[Claimed]:
    """Claim up to ``limit`` ready conversations for ``worker_id`` (caller commits)."""
    params = {
        "now": _utc(now_ns),
        "settled": now_ns - ready.settle_ns,
        "idled": now_ns - ready.idle_ns,
        "worker": worker_id,
        "until": _utc(now_ns + lease_ns),
    }
    stmt = _claim_statement(conn.dialect, limit)
    return [Claimed(i, ns, bool(early)) for i, ns, early in conn.execute(stmt, params)]


def next_due_ns(conn: Connection, *, now_ns: int, ready: Readiness) -> int | None:
    """When the next pending conversation becomes ready (``None``: nothing pending)."""
    c = conversations.c
    free = c.claimed_by.is_(None)
    row = conn.execute(
        select(
            func.min(case((free, c.last_span_received_ns))),
            func.min(case((and_(free, _early()), c.last_span_received_ns))),
            func.min(c.claimed_until),
        ).where(c.needs_scoring == true())
    ).one()
    settle_min, early_min, lease_min = row
    due: list[int] = []
    if settle_min is not None:
        due.append(settle_min + ready.settle_ns)
    if early_min is not None:
        due.append(early_min + ready.idle_ns)
    if lease_min is not None:
        lease = lease_min if isinstance(lease_min, dt.datetime) else None
        if lease is not None:
            if lease.tzinfo is None:  # SQLite returns the naive UTC text we stored
                lease = lease.replace(tzinfo=dt.UTC)
            due.append(int(lease.timestamp() * NS))
    return min(due) if due else None


def span_counts(conn: Connection, conversation_ids: Sequence[str]) -> Mapping[str, int]:
    """How many spans each conversation has stored (conversations without spans: absent).

    Reads the spans' primary-key index only, so it is cheap next to loading the spans.
    """
    counts: dict[str, int] = {}
    for chunk in chunks(conversation_ids):
        for conv, n in conn.execute(_counts(conn.dialect), {"ids": chunk}):
            if n:
                counts[conv] = counts.get(conv, 0) + int(n)
    return counts


@cache
def _counts(dialect: Dialect) -> Any:
    """(conversation, spans of one of its traces), a row per trace: counted trace by trace
    (a correlated count, one index lookup per trace; a join would let the planner pick a hash
    join over every stored span)."""
    t = traces_table.c
    spans = (
        select(func.count())
        .select_from(spans_table)
        .where(spans_table.c.trace_seq == t.seq)
        .scalar_subquery()
    )
    return each_id(dialect, select(t.conversation_id, spans), t.conversation_id)


def renew_leases(
    conn: Connection, conversation_ids: Sequence[str], *, worker_id: str, until: dt.datetime
) -> list[str]:
    """Extend ``worker_id``'s claims on ``conversation_ids`` to ``until`` (caller commits);
    returns the ids still claimed by it (a claim already taken over is not taken back)."""
    c = conversations.c
    renewed: list[str] = []
    for chunk in chunks(conversation_ids):
        stmt = (
            conversations.update()
            .where(c.id.in_(chunk), c.claimed_by == worker_id)
            .values(claimed_until=until)
            .returning(c.id)
        )
        renewed.extend(conn.execute(stmt).scalars())
    return renewed


def end_leases_but(
    conn: Connection, keep: Sequence[str], *, worker_id: str, until: dt.datetime
) -> int:
    """End ``worker_id``'s claims on every conversation but ``keep`` at ``until`` (caller
    commits); how many. For a worker whose round failed without telling which it claimed."""
    c = conversations.c
    stmt = conversations.update().where(c.claimed_by == worker_id, c.claimed_until > until)
    if keep:
        stmt = stmt.where(c.id.not_in(list(keep)))
    return int(conn.execute(stmt.values(claimed_until=until)).rowcount or 0)


def lease_of(conn: Connection, conversation_id: str) -> tuple[str | None, dt.datetime | None]:
    """Who claims ``conversation_id`` and until when (tests, tools)."""
    c = conversations.c
    row = conn.execute(
        select(c.claimed_by, c.claimed_until).where(c.id == conversation_id)
    ).one_or_none()
    return (None, None) if row is None else (row[0], row[1])
