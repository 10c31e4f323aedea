"""When is a conversation ready, and who scores it: the claim queries, state in the database.

Ready: ``needs_scoring`` and no live claim, and either no span for ``settle`` seconds, or (sooner)
the conversation is keyed by its only trace (so no other trace can join it), that trace's root
span has arrived (SDKs export a span when it ends) and nothing came for ``idle`` seconds.

A claim is a lease (``claimed_by``, ``claimed_until``) taken by one ``UPDATE ... WHERE id IN
(SELECT ... FOR UPDATE SKIP LOCKED) RETURNING``: on PostgreSQL concurrent workers skip each
other's rows; on SQLite the single statement holds the one write lock. A worker that dies leaves a
lease that expires, and the conversation (still ``needs_scoring``) is claimed again.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import Connection, and_, case, func, or_, select, true
from sqlalchemy.sql.elements import ColumnElement

from toolscore.storage.pipeline import conversations, supports_skip_locked

NS = 1_000_000_000


@dataclass(frozen=True, slots=True)
class Timing:
    settle_s: float = 5.0  # quiet time after which any conversation is complete
    idle_s: float = 1.0  # quiet time for a single-trace conversation whose root span ended
    lease_s: float = 60.0  # how long a claim protects a conversation being scored

    def __post_init__(self) -> None:
        if self.settle_s < 0 or self.idle_s < 0 or self.lease_s <= 0:
            raise ValueError(f"invalid pipeline timing {self!r}: times must be >= 0")

    @property
    def settle_ns(self) -> int:
        return int(self.settle_s * NS)

    @property
    def idle_ns(self) -> int:
        return int(min(self.idle_s, self.settle_s) * NS)


DEFAULT_BIG_SPANS = 5_000
DEFAULT_MAX_SPANS = 500_000


@dataclass(frozen=True, slots=True)
class SizeLimits:
    """How conversation size changes how it is scored.

    More than ``big_spans`` spans: scored on its own, beside the rounds (which then go on
    scoring the others), its lease renewed while it is read and scored. More than ``max_spans``:
    not loaded at all (memory grows with the spans loaded); status ``error`` with the reason.
    """

    big_spans: int = DEFAULT_BIG_SPANS
    max_spans: int = DEFAULT_MAX_SPANS

    def __post_init__(self) -> None:
        if self.big_spans < 1 or self.max_spans < 1:
            raise ValueError(f"invalid conversation size limits {self!r}: must be >= 1")


@dataclass(frozen=True, slots=True)
class Claimed:
    conversation_id: str
    last_span_received_ns: int  # as read when claimed: a newer span means "score again"


def _utc(ns: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ns / NS, tz=dt.UTC)


def _early() -> ColumnElement[bool]:
    c = conversations.c
    return and_(c.id == c.last_trace_id, c.root_span_id.is_not(None))


def _ready(now_ns: int, timing: Timing) -> ColumnElement[bool]:
    c = conversations.c
    return and_(
        c.needs_scoring == true(),
        or_(c.claimed_by.is_(None), c.claimed_until < _utc(now_ns)),
        or_(
            c.last_span_received_ns <= now_ns - timing.settle_ns,
            and_(_early(), c.last_span_received_ns <= now_ns - timing.idle_ns),
        ),
    )


def claim_ready(
    conn: Connection, *, worker_id: str, now_ns: int, timing: Timing, limit: int
) -> list[Claimed]:
    """Claim up to ``limit`` ready conversations for ``worker_id`` (caller commits)."""
    c = conversations.c
    pick = select(c.id).where(_ready(now_ns, timing)).order_by(c.last_span_received_ns).limit(limit)
    if supports_skip_locked(conn):
        pick = pick.with_for_update(skip_locked=True)
    stmt = (
        conversations.update()
        .where(c.id.in_(pick.scalar_subquery()))
        .values(claimed_by=worker_id, claimed_until=_utc(now_ns + int(timing.lease_s * NS)))
        .returning(c.id, c.last_span_received_ns)
    )
    return [Claimed(i, ns) for i, ns in conn.execute(stmt)]


def next_due_ns(conn: Connection, *, now_ns: int, timing: Timing) -> int | None:
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
        due.append(settle_min + timing.settle_ns)
    if early_min is not None:
        due.append(early_min + timing.idle_ns)
    if lease_min is not None:
        lease = lease_min if isinstance(lease_min, dt.datetime) else None
        if lease is not None:
            if lease.tzinfo is None:  # SQLite returns the naive UTC text we stored
                lease = lease.replace(tzinfo=dt.UTC)
            due.append(int(lease.timestamp() * NS))
    return min(due) if due else None
