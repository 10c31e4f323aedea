"""Browsing conversations for people (the web UI): filtered pages by keyset, coverage, revisions.

Pages are ordered newest first by ``(last_span_at, id)`` and continued from the last row shown
(keyset paging: the ``last_span_at`` index serves every page at the same cost, however deep).
Filters that an index cannot serve (text in the first message, a metric below its threshold)
are evaluated on the rows the index walks, so a rare match can take a longer walk; ``scan_limit``
bounds it and the page says it stopped early.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, and_, exists, func, or_, select

from toolscore.storage.conversations.tables import conversations, evaluations


@dataclass(frozen=True, slots=True)
class ConversationFilter:
    """What a page of conversations is restricted to (``None``: no restriction)."""

    status: str | None = None
    expectation_id: str | None = None
    below_metric: str | None = None  # a current score of this metric below ``below_threshold``
    below_threshold: float = 1.0
    warnings_only: bool = False
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    text: str | None = None  # a substring of the first user message, case-insensitive


@dataclass(frozen=True, slots=True)
class PageKey:
    """Where a page continues: after the row with this last activity and id."""

    last_span_at: dt.datetime
    id: str


@dataclass(frozen=True, slots=True)
class ConversationSummary:
    id: str
    status: str
    last_span_at: dt.datetime
    first_user_message: str | None
    expectation_id: str | None
    expectation_version: int | None
    warning: str | None
    unmatched_reason: str | None
    error: str | None
    revision: int


@dataclass(frozen=True, slots=True)
class Page:
    rows: tuple[ConversationSummary, ...]
    next_key: PageKey | None  # None: this was the last page


_COLUMNS = (
    "id",
    "status",
    "last_span_at",
    "first_user_message",
    "expectation_id",
    "expectation_version",
    "warning",
    "unmatched_reason",
    "error",
    "revision",
)


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def _conditions(f: ConversationFilter) -> list[Any]:
    c = conversations.c
    where: list[Any] = []
    if f.status is not None:
        where.append(c.status == f.status)
    if f.expectation_id is not None:
        where.append(c.expectation_id == f.expectation_id)
    if f.warnings_only:
        where.append(c.warning.is_not(None))
    if f.since is not None:
        where.append(c.last_span_at >= f.since)
    if f.until is not None:
        where.append(c.last_span_at < f.until)
    if f.text:
        pattern = f"%{_escape_like(f.text.lower())}%"
        where.append(func.lower(c.first_user_message).like(pattern, escape="\\"))
    if f.below_metric is not None:
        e = evaluations.c
        where.append(
            exists().where(
                e.is_current.is_(True),
                e.conversation_id == c.id,
                e.metric == f.below_metric,
                e.score < f.below_threshold,
            )
        )
    return where


def page(
    conn: Connection, f: ConversationFilter, after: PageKey | None = None, limit: int = 50
) -> Page:
    """One page of conversations matching ``f``, newest activity first, after ``after``."""
    c = conversations.c
    where = _conditions(f)
    if after is not None:
        where.append(
            or_(
                c.last_span_at < after.last_span_at,
                and_(c.last_span_at == after.last_span_at, c.id < after.id),
            )
        )
    stmt = (
        select(*(getattr(c, name) for name in _COLUMNS))
        .where(*where)
        .order_by(c.last_span_at.desc(), c.id.desc())
        .limit(limit + 1)
    )
    rows = [ConversationSummary(*r) for r in conn.execute(stmt)]
    more = len(rows) > limit
    rows = rows[:limit]
    key = PageKey(rows[-1].last_span_at, rows[-1].id) if more and rows else None
    return Page(tuple(rows), key)


@dataclass(frozen=True, slots=True)
class Coverage:
    """How much of the traffic since a time found an expectation, and why the rest did not."""

    by_status: dict[str, int]
    unmatched_reasons: tuple[tuple[str, int], ...]  # most frequent first

    @property
    def seen(self) -> int:
        return sum(self.by_status.values())

    @property
    def matched(self) -> int:
        return self.by_status.get("scored", 0) + self.by_status.get("error", 0)


def coverage(conn: Connection, since: dt.datetime, reasons: int = 5) -> Coverage:
    """Conversations active since ``since`` by status, and the ``reasons`` most frequent
    reasons the unmatched ones found no expectation."""
    c = conversations.c
    counts = conn.execute(
        select(c.status, func.count()).where(c.last_span_at >= since).group_by(c.status)
    )
    why = conn.execute(
        select(c.unmatched_reason, func.count().label("n"))
        .where(c.last_span_at >= since, c.status == "unmatched")
        .group_by(c.unmatched_reason)
        .order_by(func.count().desc())
        .limit(reasons)
    )
    return Coverage(
        {str(s): int(n) for s, n in counts},
        tuple((str(r or "unknown"), int(n)) for r, n in why),
    )


def revisions(conn: Connection, conversation_id: str) -> list[tuple[int, dt.datetime, int]]:
    """(revision, when written, evaluations) of every stored revision, newest first."""
    e = evaluations.c
    rows = conn.execute(
        select(e.revision, func.min(e.created_at), func.count())
        .where(e.conversation_id == conversation_id)
        .group_by(e.revision)
        .order_by(e.revision.desc())
    )
    return [(int(r), when, int(n)) for r, when, n in rows]


@dataclass(frozen=True, slots=True)
class Warned:
    """A conversation whose rebuilt calls may be wrong, with why (``conversations.warning``)."""

    conversation_id: str
    expectation_id: str | None
    scored_at: dt.datetime | None
    warning: str


def warned(
    conn: Connection,
    since: dt.datetime,
    until: dt.datetime,
    expectation_id: str | None = None,
    limit: int = 10,
) -> tuple[int, list[Warned]]:
    """How many conversations of ``since``..``until`` (their first span's time, as the report's
    days) carry a warning, and the latest ``limit`` of them."""
    c = conversations.c
    where = [c.warning.is_not(None), c.first_seen_at >= since, c.first_seen_at < until]
    if expectation_id is not None:
        where.append(c.expectation_id == expectation_id)
    total = conn.execute(select(func.count()).where(*where)).scalar_one()
    rows = conn.execute(
        select(c.id, c.expectation_id, c.scored_at, c.warning)
        .where(*where)
        .order_by(c.scored_at.desc(), c.id)
        .limit(limit)
    ).all()
    return int(total), [Warned(r[0], r[1], r[2], r[3]) for r in rows]
