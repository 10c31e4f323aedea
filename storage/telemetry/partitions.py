"""PostgreSQL: ``spans`` and ``log_records`` partitioned by day, so retention drops whole days.

Migration 0008 makes both tables ``PARTITION BY RANGE``: ``spans`` on ``start_ns``,
``log_records`` on ``time_ns`` (Unix ns, one partition per UTC day, ``spans_pYYYYMMDD``), each
with a DEFAULT partition for times outside the partitions created. The key is the span's own
time, not its arrival: a primary key or unique index of a partitioned table must contain the
partition key, and only a value that a resent span carries again keeps resends out
(``pk_spans (trace_seq, span_id, start_ns)``, ``uq_log_records_record_hash (record_hash,
time_ns)``; the hash covers the time). Spans with absurd times land in the DEFAULT partition,
whose rows retention deletes one by one like SQLite's.

The server creates the partitions of the coming days ahead (:func:`create_ahead`). Retention
drops a partition (:func:`drop_done`) only when it ended before the cutoff, nothing in it
arrived after the cutoff, and every row in it belongs to a conversation already marked for
pruning through that row's arrival (storage/retention/spans.py); otherwise its rows are deleted in
batches with the rest. DDL runs with a short ``lock_timeout``: a partition that cannot be
created or dropped at once is left for the next pass rather than make ingest wait.

SQLite has no partitions: every function here does nothing there.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from sqlalchemy import Connection, text

from toolscore.storage.plumbing.dialect import can_partition

DAY_NS = 86_400 * 1_000_000_000
TABLES = {"spans": "start_ns", "log_records": "time_ns"}  # table -> partition key
# also by day (migration 0021), dropped by its own rule (storage/telemetry/content_store.py)
CREATED_AHEAD = {**TABLES, "span_contents": "day_ns"}
DDL_LOCK_TIMEOUT = "200ms"  # the longest ingest may wait for a partition created or dropped


@dataclass(frozen=True, slots=True)
class Partition:
    table: str  # the partitioned table
    name: str
    start_ns: int  # [start_ns, end_ns)
    end_ns: int


def partition_name(table: str, day_start_ns: int) -> str:
    day = dt.datetime.fromtimestamp(day_start_ns / 1e9, dt.UTC)
    return f"{table}_p{day:%Y%m%d}"


def day_start(ns: int) -> int:
    return ns - ns % DAY_NS


def partitioned(conn: Connection, table: str = "spans") -> bool:
    """Whether ``table`` is a partitioned table (PostgreSQL after migration 0008)."""
    if not can_partition(conn):
        return False
    found = conn.execute(
        text(
            "SELECT 1 FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid "
            "WHERE c.relname = :t AND c.relnamespace = current_schema()::regnamespace"
        ),
        {"t": table},
    ).first()
    return found is not None


def partitions(conn: Connection, table: str) -> list[Partition]:
    """The day partitions of ``table`` (not the default one), oldest first."""
    rows = conn.execute(
        text(
            "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i "
            "JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = CAST(:t AS regclass)"
        ),
        {"t": table},
    ).all()
    out = []
    for name, bound in rows:
        # No bound: the partition was dropped since the catalog scan began (another pass or server).
        if bound is None or "DEFAULT" in bound:
            continue
        # FOR VALUES FROM ('1700000000000000000') TO ('1700086400000000000')
        low, high = (int(part.split("'")[1]) for part in bound.split(" TO "))
        out.append(Partition(table, str(name), low, high))
    return sorted(out, key=lambda p: p.start_ns)


def create_ahead(conn: Connection, now_ns: int, days: int = 3) -> list[str]:
    """Create the partitions of today and the next ``days`` days that do not exist yet, each in
    its own savepoint; returns the names created. One fails when the DEFAULT partition already
    holds rows of that day (spans from a clock running ahead): that day stays in the default."""
    created: list[str] = []
    if not partitioned(conn):
        return created
    for table in CREATED_AHEAD:
        if table not in TABLES and not partitioned(conn, table):
            continue  # a database not upgraded yet (serve --no-upgrade)
        existing = {p.name for p in partitions(conn, table)}
        for offset in range(days + 1):
            low = day_start(now_ns) + offset * DAY_NS
            name = partition_name(table, low)
            if name in existing:
                continue
            if _create(conn, table, name, low):
                created.append(name)
    return created


def _create(conn: Connection, table: str, name: str, low: int) -> bool:
    savepoint = conn.begin_nested()
    try:
        conn.execute(text(f"SET LOCAL lock_timeout = '{DDL_LOCK_TIMEOUT}'"))
        conn.execute(
            text(
                f"CREATE TABLE IF NOT EXISTS {name} PARTITION OF {table} "
                f"FOR VALUES FROM ({low}) TO ({low + DAY_NS})"
            )
        )
    except Exception:  # rows of that day in the default partition, or a lock not granted
        savepoint.rollback()
        return False
    savepoint.commit()
    return True


def _done(conn: Connection, part: Partition, cutoff_ns: int) -> bool:
    """Nothing in ``part`` arrived after the cutoff, and every row belongs to a conversation
    marked for pruning through its arrival (log records without a trace: arrival only)."""
    trace_ok = (
        "EXISTS (SELECT 1 FROM traces t JOIN conversations c "
        "ON c.id = t.conversation_id WHERE t.trace_id = r.trace_id "
        "AND c.pruned_through_ns >= r.received_at_ns)"
    )
    if part.table == "log_records":
        trace_ok = f"(r.trace_id IS NULL OR {trace_ok})"
    blocker = conn.execute(
        text(
            f"SELECT 1 FROM {part.name} r WHERE r.received_at_ns >= :cutoff OR NOT {trace_ok} "
            "LIMIT 1"
        ),
        {"cutoff": cutoff_ns},
    ).first()
    return blocker is None


def drop_done(conn: Connection, cutoff_ns: int) -> tuple[int, int]:
    """Drop the partitions that ended before ``cutoff_ns`` and hold only prunable rows;
    returns (spans, log records) they held. Call after marking, in a transaction of its own."""
    counts = {"spans": 0, "log_records": 0}
    if not partitioned(conn):
        return 0, 0
    for table in TABLES:
        for part in partitions(conn, table):
            if part.end_ns > cutoff_ns:
                break
            if not _done(conn, part, cutoff_ns):
                continue
            savepoint = conn.begin_nested()
            try:
                conn.execute(text(f"SET LOCAL lock_timeout = '{DDL_LOCK_TIMEOUT}'"))
                rows = conn.execute(text(f"SELECT count(*) FROM {part.name}")).scalar_one()
                conn.execute(text(f"DROP TABLE {part.name}"))
            except Exception:  # a lock not granted at once: next pass
                savepoint.rollback()
                continue
            savepoint.commit()
            counts[table] += int(rows)
    return counts["spans"], counts["log_records"]
