"""span_contents: long span attribute strings stored as pieces, once per day

Revision ID: 0021
Revises: 0020

A model span repeats the conversation so far; its long strings are now cut into pieces stored
once per UTC day of the span's start (storage/telemetry/contents.py), the attribute holding a
reference. Rows stored before keep their strings as they are (plain, or ``$zstd`` on SQLite)
and read the same: nothing is rewritten.

SQLite: the table (WITHOUT ROWID: the key is the row) and ``ix_spans_start_ns``, with which
retention finds whether a day still has spans. PostgreSQL: the table partitioned by ``day_ns``
like ``spans`` (a DEFAULT partition, and one for each day ``spans`` has a partition for), so
retention drops a day's pieces with one ``DROP TABLE``.

Downgrading refuses while pieces are stored: the spans referring to them would lose their long
strings.
"""

from __future__ import annotations

import datetime as dt
import re

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

DAY_NS = 86_400 * 1_000_000_000


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        op.create_table(
            "span_contents",
            sa.Column("day_ns", sa.Integer(), nullable=False),
            sa.Column("hash", sa.String(22), nullable=False),
            sa.Column("data", sa.LargeBinary(), nullable=False),
            sa.PrimaryKeyConstraint("day_ns", "hash", name="pk_span_contents"),
            sqlite_with_rowid=False,
        )
        op.create_index("ix_spans_start_ns", "spans", ["start_ns"])
        return
    op.execute(
        "CREATE TABLE span_contents (day_ns bigint NOT NULL, hash varchar(22) NOT NULL, "
        "data bytea NOT NULL, CONSTRAINT pk_span_contents PRIMARY KEY (day_ns, hash)) "
        "PARTITION BY RANGE (day_ns)"
    )
    op.execute("CREATE TABLE span_contents_default PARTITION OF span_contents DEFAULT")
    days = bind.exec_driver_sql(
        "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
        "WHERE i.inhparent = CAST('spans' AS regclass)"
    ).scalars()
    for name in days:
        found = re.fullmatch(r"spans_p(\d{8})", str(name))
        if found is None:
            continue
        day = _day_ns(found.group(1))
        op.execute(
            f"CREATE TABLE span_contents_p{found.group(1)} PARTITION OF span_contents "
            f"FOR VALUES FROM ({day}) TO ({day + DAY_NS})"
        )


def _day_ns(yyyymmdd: str) -> int:
    day = dt.datetime.strptime(yyyymmdd, "%Y%m%d").replace(tzinfo=dt.UTC)
    return int(day.timestamp()) * 1_000_000_000


def downgrade() -> None:
    bind = op.get_bind()
    if bind.exec_driver_sql("SELECT 1 FROM span_contents LIMIT 1").first() is not None:
        raise RuntimeError(
            "span_contents holds pieces of stored spans' long strings: downgrading below "
            "0021 would lose them (delete the spans first, or keep this version)"
        )
    if bind.dialect.name != "postgresql":
        op.drop_index("ix_spans_start_ns", table_name="spans")
    op.drop_table("span_contents")  # PostgreSQL: its partitions go with it
