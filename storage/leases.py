"""Claims on conversations while they are scored: their size, renewing and releasing a lease.

A claim is a lease (``claimed_by``, ``claimed_until``; ``toolscore.collector.pipeline.claim``).
A conversation that takes longer to score than the lease (a big one) has its lease renewed by
its worker while the work progresses, so no other worker takes it over and starts again.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence

from sqlalchemy import Connection, func, select

from toolscore.storage.pipeline import conversation_traces, conversations
from toolscore.storage.telemetry import spans_table

_CHUNK = 500


def _chunks(ids: Sequence[str]) -> Iterable[Sequence[str]]:
    for i in range(0, len(ids), _CHUNK):
        yield ids[i : i + _CHUNK]


def span_counts(conn: Connection, conversation_ids: Sequence[str]) -> Mapping[str, int]:
    """How many spans each conversation has stored (conversations without spans: absent).

    Reads the spans' primary-key index only, so it is cheap next to loading the spans.
    """
    ct = conversation_traces.c
    counts: dict[str, int] = {}
    for chunk in _chunks(list(conversation_ids)):
        stmt = (
            select(ct.conversation_id, func.count())
            .select_from(
                conversation_traces.join(spans_table, spans_table.c.trace_id == ct.trace_id)
            )
            .where(ct.conversation_id.in_(chunk))
            .group_by(ct.conversation_id)
        )
        counts.update({conv: int(n) for conv, n in conn.execute(stmt)})
    return counts


def renew_leases(
    conn: Connection, conversation_ids: Sequence[str], *, worker_id: str, until: dt.datetime
) -> list[str]:
    """Extend ``worker_id``'s claims on ``conversation_ids`` to ``until`` (caller commits);
    returns the ids still claimed by it (a claim already taken over is not taken back)."""
    c = conversations.c
    renewed: list[str] = []
    for chunk in _chunks(list(conversation_ids)):
        stmt = (
            conversations.update()
            .where(c.id.in_(chunk), c.claimed_by == worker_id)
            .values(claimed_until=until)
            .returning(c.id)
        )
        renewed.extend(conn.execute(stmt).scalars())
    return renewed


def lease_of(conn: Connection, conversation_id: str) -> tuple[str | None, dt.datetime | None]:
    """Who claims ``conversation_id`` and until when (tests, tools)."""
    c = conversations.c
    row = conn.execute(
        select(c.claimed_by, c.claimed_until).where(c.id == conversation_id)
    ).one_or_none()
    return (None, None) if row is None else (row[0], row[1])
