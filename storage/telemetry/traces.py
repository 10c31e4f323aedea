"""Table ``traces``: a row per trace: its sequence number, the first column of the span key, and
its conversation (:mod:`toolscore.storage.conversations.assignments`).

``spans`` are unique on ``(trace_seq, span_id)`` (PostgreSQL: plus ``start_ns``, the partition
key) rather than on the random 32-hex trace id: each new trace takes the next number, so every
span insert lands at the right end of the key however much is stored, and the key holds an
8-byte integer (docs/scaling.md#as-the-data-grows). A trace keeps its number while it has a row
here: a resent span gets the same number and conflicts as before.

Ingest numbers a request's traces before it inserts their spans (:func:`number_traces`). On
PostgreSQL it holds each trace's row (``FOR KEY SHARE``) until it commits, so history retention,
the only deleter (:mod:`toolscore.storage.retention.conversations`, which skips rows held), cannot
delete a number that spans are being stored under. SQLite's one write lock does the same.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from functools import cache
from typing import Any, cast

from sqlalchemy import Connection, String, Table, Text, select
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import Mapped, mapped_column

from toolscore.storage.base import Base, Int64
from toolscore.storage.plumbing.chunks import chunks
from toolscore.storage.plumbing.row_lists import each_id, insert_new_ids, key_share_in

_ATTEMPTS = 3  # a number deleted between the insert and the read is made again (rare)


class Trace(Base):
    __tablename__ = "traces"

    seq: Mapped[int] = mapped_column(Int64, primary_key=True, autoincrement=True)
    trace_id: Mapped[str] = mapped_column(String(32), nullable=False, unique=True)
    # Set by the conversation hook (storage/conversations/assignments.py) in the transaction that
    # numbers the
    # trace; NULL until then, and again once history retention deleted the conversation.
    conversation_id: Mapped[str | None] = mapped_column(Text, nullable=True, index=True)


traces_table = cast(Table, Trace.__table__)


@cache
def _held(dialect: Dialect) -> Any:
    t = traces_table.c
    return key_share_in(dialect, each_id(dialect, select(t.trace_id, t.seq), t.trace_id))


@dataclass(frozen=True, slots=True)
class Numbered:
    """What :func:`number_traces` did."""

    numbers: dict[str, int]  # trace id -> its number
    # Numbered by this transaction: no other transaction sees them before it commits, and they
    # have no conversation yet (the conversation hook need not look them up).
    new: frozenset[str]


def number_traces(conn: Connection, trace_ids: Collection[str]) -> Numbered:
    """The number of each of ``trace_ids``, made for those without one; held until the
    caller's transaction ends (see the module docstring). Trace id order throughout, as every
    transaction that locks these rows takes them (no deadlock between concurrent requests)."""
    wanted = sorted(set(trace_ids))
    found: dict[str, int] = {}
    new: set[str] = set()
    for _ in range(_ATTEMPTS):
        missing = [t for t in wanted if t not in found]
        if not missing:
            return Numbered(found, frozenset(new))
        # rows this transaction inserts are its own until it commits: no lock needed
        for trace, seq in insert_new_ids(conn, traces_table, "trace_id", missing, "seq"):
            found[str(trace)] = int(seq)
            new.add(str(trace))
        stored = [t for t in missing if t not in found]
        for chunk in chunks(stored):
            rows = conn.execute(_held(conn.dialect), {"ids": chunk})
            found.update((str(trace), int(seq)) for trace, seq in rows)
    missing = [t for t in wanted if t not in found]
    if missing:
        raise RuntimeError(f"trace {missing[0]} lost its number {_ATTEMPTS} times in a row")
    return Numbered(found, frozenset(new))
