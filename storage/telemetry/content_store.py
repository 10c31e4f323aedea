"""Table ``span_contents``: the pieces of long span attribute strings, once per day
(storage/telemetry/contents.py says what a piece is), and their deletion by retention.

Inserted in the spans' own transaction, before them, skipping pieces already stored. Read back
by ``load_spans`` for the references in the rows it reads. Deleted a whole day at a time
(:func:`sweep`): the pieces of day D go once no span starting on day D is left, and only when
D is SWEEP_MARGIN_DAYS or more before today, so that a piece a writer remembers as stored
(``contents.KnownContents``, today and the day before) is never one being swept. Each deletion
checks for the day's spans under a lock that an ingest storing pieces of that day also takes
(SQLite: the write lock; PostgreSQL: the lock on the day's partition), so a span stored at the
same time either sees its pieces deleted (and stores them again) or keeps them.

On PostgreSQL the table is partitioned by ``day_ns`` like ``spans`` (storage/telemetry/partitions.py
creates the partitions ahead): a swept day is one ``DROP TABLE``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import cache
from typing import Any, cast

from sqlalchemy import Connection, Engine, LargeBinary, String, Table, bindparam, select, text
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import Mapped, mapped_column

from toolscore.storage.base import Base, Int64
from toolscore.storage.plumbing.chunks import chunks
from toolscore.storage.plumbing.dialect import in_ids, one_writer, write_transaction
from toolscore.storage.plumbing.row_lists import insert_tuples_skip_existing
from toolscore.storage.telemetry.contents import (
    DAY_NS,
    HASH_CHARS,
    Key,
    Reference,
    children,
    day_of,
    decompress,
)
from toolscore.storage.telemetry.partitions import (
    DDL_LOCK_TIMEOUT,
    partition_name,
    partitioned,
    partitions,
)

SWEEP_MARGIN_DAYS = 3
SWEEP_ROWS = 5000  # pieces deleted per transaction (rows outside a PostgreSQL day partition)


class SpanContent(Base):
    __tablename__ = "span_contents"

    day_ns: Mapped[int] = mapped_column(Int64, primary_key=True)
    hash: Mapped[str] = mapped_column(String(HASH_CHARS), primary_key=True)
    data: Mapped[bytes] = mapped_column(LargeBinary, nullable=False)  # zstd frame of the UTF-8

    __table_args__ = ({"sqlite_with_rowid": False},)  # SQLite: the key is the row


span_contents = cast(Table, SpanContent.__table__)

COLUMNS = ("day_ns", "hash", "data")


def insert_contents(conn: Connection, rows: Sequence[tuple[int, str, bytes]]) -> None:
    """Insert pieces (``contents.ContentBatch.rows``), skipping those already stored."""
    insert_tuples_skip_existing(conn, span_contents, COLUMNS, rows, ("day_ns", "hash"))


@cache
def _pieces_of(dialect: Dialect) -> Any:
    c = span_contents.c
    return select(c.hash, c.data).where(c.day_ns == bindparam("day"), in_ids(dialect, c.hash))


def fetch_contents(conn: Connection, references: set[Reference], into: dict[Key, str]) -> None:
    """The texts of the pieces ``references`` name, and of those their groups name, added to
    ``into`` (those not in it already)."""
    pending = references
    while pending:
        _fetch(conn, {(day, h) for day, h, _ in pending}, into)
        pending = {child for ref in pending if ref[2] > 1 for child in children(ref, into)}


def _fetch(conn: Connection, keys: set[Key], into: dict[Key, str]) -> None:
    by_day: dict[int, list[str]] = {}
    for day, h in keys:
        if (day, h) not in into:
            by_day.setdefault(day, []).append(h)
    statement = _pieces_of(conn.dialect)
    for day, hashes in by_day.items():
        for chunk in chunks(sorted(hashes)):
            rows = conn.execute(statement, {"day": day, "ids": chunk}).fetchall()
            into.update([((day, h), decompress(data)) for h, data in rows])


# --- retention -------------------------------------------------------------------------------


def sweep(engine: Engine, now_ns: int, batch: int = SWEEP_ROWS) -> int:
    """Delete the pieces of every day old enough that no span of it is left (see the module
    docstring); returns the pieces deleted."""
    last = day_of(now_ns) - SWEEP_MARGIN_DAYS * DAY_NS
    deleted = 0
    for day in _days(engine, last):
        deleted += _sweep_day(engine, day, batch)
    return deleted


def _days(engine: Engine, last: int) -> Iterator[int]:
    """The days of stored pieces up to ``last``, oldest first."""
    after = -1
    while True:
        with engine.connect() as conn:
            found = conn.execute(
                text(
                    "SELECT min(day_ns) FROM span_contents WHERE day_ns > :after "
                    "AND day_ns <= :last"
                ),
                {"after": after, "last": last},
            ).scalar()
        if found is None:
            return
        after = int(found)
        yield after


def _has_spans(conn: Connection, day: int) -> bool:
    found = conn.execute(
        text("SELECT 1 FROM spans WHERE start_ns >= :low AND start_ns < :high LIMIT 1"),
        {"low": day, "high": day + DAY_NS},
    ).first()
    return found is not None


def _sweep_day(engine: Engine, day: int, batch: int) -> int:
    dropped = _drop_partition(engine, day)
    if dropped is not None:
        return dropped
    deleted = 0
    while True:
        with write_transaction(engine) as conn:
            if not _lock(conn, "span_contents_default") or _has_spans(conn, day):
                return deleted
            n = conn.execute(
                text(
                    "DELETE FROM span_contents WHERE day_ns = :day AND hash IN "
                    "(SELECT hash FROM span_contents WHERE day_ns = :day LIMIT :n)"
                ),
                {"day": day, "n": batch},
            ).rowcount
        deleted += n
        if n < batch:
            return deleted


def _drop_partition(engine: Engine, day: int) -> int | None:
    """PostgreSQL: drop the day's partition of pieces if it has one and no span of the day is
    left; the pieces it held (0: left for the next pass), or None without a partition."""
    name = partition_name("span_contents", day)
    with engine.begin() as conn:
        if not partitioned(conn, "span_contents"):
            return None
        if name not in {p.name for p in partitions(conn, "span_contents")}:
            return None
        if not _lock(conn, name, "ACCESS EXCLUSIVE") or _has_spans(conn, day):
            return 0
        count = int(conn.execute(text(f"SELECT count(*) FROM {name}")).scalar_one())
        conn.execute(text(f"DROP TABLE {name}"))
    return count


def _lock(conn: Connection, table: str, mode: str = "SHARE ROW EXCLUSIVE") -> bool:
    """PostgreSQL: lock ``table`` against ingest's inserts, if granted within DDL_LOCK_TIMEOUT
    (else False: the next pass tries again). SQLite: the write transaction holds the lock."""
    if one_writer(conn):
        return True
    savepoint = conn.begin_nested()
    try:
        conn.execute(text(f"SET LOCAL lock_timeout = '{DDL_LOCK_TIMEOUT}'"))
        conn.execute(text(f"LOCK TABLE {table} IN {mode} MODE"))
    except Exception:  # not granted at once: next pass
        savepoint.rollback()
        return False
    savepoint.commit()
    return True
