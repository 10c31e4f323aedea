"""The states conversations without a key were left in, to join the traces that replay them.

``replay_tails``: one row per (fingerprint of a conversation's state after a model call,
conversation) with when it was recorded (collector/reconstruction/replay.py says what a
fingerprint is; collector/pipeline/assign.py decides). Rows older than the replay window are
deleted as new ones are recorded, so the table holds one window's worth. Migration ``0020``.
:func:`rooted` tells which traces' root spans are stored (a trace joins only once its root is).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

from sqlalchemy import Connection, Index, Table, Text, select
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import Mapped, mapped_column

from toolscore.storage.base import Base, Int64
from toolscore.storage.plumbing.chunks import chunks
from toolscore.storage.plumbing.dialect import insert_ignore_duplicates
from toolscore.storage.plumbing.row_lists import each_id
from toolscore.storage.telemetry.spans import spans_table
from toolscore.storage.telemetry.traces import traces_table


class ReplayTail(Base):
    __tablename__ = "replay_tails"

    fingerprint: Mapped[str] = mapped_column(Text, primary_key=True)
    conversation_id: Mapped[str] = mapped_column(Text, primary_key=True)
    at_ns: Mapped[int] = mapped_column(Int64, nullable=False)

    __table_args__ = (Index("ix_replay_tails_at_ns", "at_ns"),)


replay_tails: Table = ReplayTail.__table__  # type: ignore[assignment]


def latest_tails(conn: Connection, fingerprints: Sequence[str], since_ns: int) -> dict[str, str]:
    """fingerprint -> the conversation most recently left in that state since ``since_ns``."""
    t = replay_tails.c
    found: dict[str, tuple[int, str]] = {}
    for chunk in chunks(sorted(set(fingerprints))):
        rows = conn.execute(
            select(t.fingerprint, t.conversation_id, t.at_ns).where(
                t.fingerprint.in_(chunk), t.at_ns >= since_ns
            )
        )
        for fingerprint, conversation_id, at_ns in rows:
            if fingerprint not in found or (at_ns, conversation_id) > found[fingerprint]:
                found[fingerprint] = (at_ns, conversation_id)
    return {f: conv for f, (_at, conv) in found.items()}


def record_tails(conn: Connection, tails: Mapping[str, str], at_ns: int, since_ns: int) -> None:
    """Record fingerprint -> conversation at ``at_ns``; forget what is older than ``since_ns``."""
    if not tails:
        return
    rows = [
        {"fingerprint": f, "conversation_id": c, "at_ns": at_ns} for f, c in sorted(tails.items())
    ]
    insert_ignore_duplicates(conn, replay_tails, rows)
    conn.execute(replay_tails.delete().where(replay_tails.c.at_ns < since_ns))


@cache
def _roots_of(dialect: Dialect) -> Any:
    t, s = traces_table.c, spans_table.c
    query = (
        select(t.trace_id, s.span_id)
        .select_from(traces_table.join(spans_table, s.trace_seq == t.seq))
        .where(s.parent_span_id.is_(None))
    )
    return each_id(dialect, query, t.trace_id)


def rooted(conn: Connection, trace_ids: Sequence[str]) -> dict[str, str]:
    """trace id -> its stored root span's id, for those of ``trace_ids`` whose root is stored
    (read through the spans' key, not decoded)."""
    found: dict[str, str] = {}
    for chunk in chunks(sorted(set(trace_ids))):
        for trace_id, span_id in conn.execute(_roots_of(conn.dialect), {"ids": chunk}):
            found.setdefault(trace_id, span_id)
    return found
