"""PostgreSQL: spans and log_records partitioned by day (SQLite: nothing)

Revision ID: 0008
Revises: 0007

``spans`` becomes ``PARTITION BY RANGE (start_ns)`` and ``log_records`` ``PARTITION BY RANGE
(time_ns)``, one partition per UTC day plus a DEFAULT partition, so that span retention drops
whole days (storage/telemetry/partitions.py says why the keys are the telemetry's own times). Their
unique keys gain the partition key: ``pk_spans (trace_id, span_id, start_ns)``,
``pk_log_records (id, time_ns)``, ``uq_log_records_record_hash (record_hash, time_ns)``.

An existing database is converted in place: the tables are renamed, the partitioned ones
created with the same columns, a partition made for every day of the existing rows within the
last 400 days (and today and the next 3 days; the rest go to DEFAULT), the rows copied, the old
tables dropped. It takes about as long as copying the two tables.
"""

from __future__ import annotations

import time

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

DAY_NS = 86_400 * 1_000_000_000
KEYS = {"spans": "start_ns", "log_records": "time_ns"}
HISTORY_DAYS = 400
AHEAD_DAYS = 3


def _days(table: str, key: str) -> list[int]:
    now = time.time_ns()
    low, high = now - now % DAY_NS - HISTORY_DAYS * DAY_NS, now + (AHEAD_DAYS + 1) * DAY_NS
    rows = op.get_bind().exec_driver_sql(
        f"SELECT DISTINCT {key} - mod({key}, {DAY_NS}) FROM {table}_unpartitioned "
        f"WHERE {key} >= {low} AND {key} < {high}"
    )
    today = now - now % DAY_NS
    return sorted({int(d) for (d,) in rows} | {today + i * DAY_NS for i in range(AHEAD_DAYS + 1)})


def _name(table: str, day_ns: int) -> str:
    return f"{table}_p{time.strftime('%Y%m%d', time.gmtime(day_ns // 1_000_000_000))}"


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE spans RENAME TO spans_unpartitioned")
    op.execute("ALTER TABLE spans_unpartitioned RENAME CONSTRAINT pk_spans TO pk_spans_old")
    op.execute(
        "CREATE TABLE spans (LIKE spans_unpartitioned INCLUDING DEFAULTS) "
        "PARTITION BY RANGE (start_ns)"
    )
    op.execute(
        "ALTER TABLE spans ADD CONSTRAINT pk_spans PRIMARY KEY (trace_id, span_id, start_ns)"
    )
    op.execute("ALTER TABLE log_records RENAME TO log_records_unpartitioned")
    for old in ("pk_log_records", "uq_log_records_record_hash"):
        op.execute(f"ALTER TABLE log_records_unpartitioned RENAME CONSTRAINT {old} TO {old}_old")
    op.execute("ALTER INDEX ix_log_records_trace_id RENAME TO ix_log_records_trace_id_old")
    op.execute(
        "CREATE TABLE log_records (LIKE log_records_unpartitioned INCLUDING DEFAULTS) "
        "PARTITION BY RANGE (time_ns)"
    )
    op.execute("ALTER TABLE log_records ADD CONSTRAINT pk_log_records PRIMARY KEY (id, time_ns)")
    op.execute(
        "ALTER TABLE log_records ADD CONSTRAINT uq_log_records_record_hash "
        "UNIQUE (record_hash, time_ns)"
    )
    op.execute("CREATE INDEX ix_log_records_trace_id ON log_records (trace_id)")
    # the id sequence now belongs to the new table (dropping the old one would drop it)
    op.execute("ALTER SEQUENCE log_records_id_seq OWNED BY log_records.id")
    for table, key in KEYS.items():
        op.execute(f"CREATE TABLE {table}_default PARTITION OF {table} DEFAULT")
        for day in _days(table, key):
            op.execute(
                f"CREATE TABLE {_name(table, day)} PARTITION OF {table} "
                f"FOR VALUES FROM ({day}) TO ({day + DAY_NS})"
            )
        op.execute(f"INSERT INTO {table} SELECT * FROM {table}_unpartitioned")
        op.execute(f"DROP TABLE {table}_unpartitioned")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in KEYS:
        op.execute(f"CREATE TABLE {table}_plain (LIKE {table} INCLUDING DEFAULTS)")
        op.execute(f"INSERT INTO {table}_plain SELECT * FROM {table}")
    op.execute("ALTER SEQUENCE log_records_id_seq OWNED BY log_records_plain.id")
    for table in KEYS:
        op.execute(f"DROP TABLE {table}")  # its partitions go with it
        op.execute(f"ALTER TABLE {table}_plain RENAME TO {table}")
    op.execute("ALTER TABLE spans ADD CONSTRAINT pk_spans PRIMARY KEY (trace_id, span_id)")
    op.execute("ALTER TABLE log_records ADD CONSTRAINT pk_log_records PRIMARY KEY (id)")
    op.execute(
        "ALTER TABLE log_records ADD CONSTRAINT uq_log_records_record_hash UNIQUE (record_hash)"
    )
    op.execute("CREATE INDEX ix_log_records_trace_id ON log_records (trace_id)")
