"""spans keyed by a per-trace sequence number: table traces, spans.trace_seq

Revision ID: 0014
Revises: 0013

``traces`` gives every stored trace a number (storage/telemetry/traces.py); ``spans`` gains
``trace_seq`` and its key becomes ``(trace_seq, span_id)`` (PostgreSQL: plus ``start_ns``, the
partition key) instead of ``(trace_id, span_id)``: new spans land at the right end of the key
however much is stored (docs/scaling.md#as-the-data-grows).

An existing database is converted in place: its traces are numbered in the order of their
first span, every span gets its trace's number, the key is rebuilt (SQLite copies the table,
PostgreSQL rewrites every row: run ``VACUUM`` afterwards if autovacuum is off). It takes about
as long as copying ``spans``; each step is logged with its row count.
"""

from __future__ import annotations

import time

import sqlalchemy as sa
from alembic import op

from toolscore.storage.migrations.steps import log_step, run_step

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

INT64 = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _postgresql() -> bool:
    return op.get_bind().dialect.name == "postgresql"


def upgrade() -> None:
    op.create_table(
        "traces",
        sa.Column("seq", INT64, nullable=False, autoincrement=True),
        sa.Column("trace_id", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_traces"),
        sa.UniqueConstraint("trace_id", name="uq_traces_trace_id"),
    )
    run_step(
        "0014",
        "numbering the stored traces",
        "INSERT INTO traces (trace_id) SELECT trace_id FROM spans GROUP BY trace_id "
        "ORDER BY min(start_ns), trace_id",
    )
    op.add_column("spans", sa.Column("trace_seq", INT64, nullable=True))
    run_step(
        "0014",
        "giving every span its trace's number",
        "UPDATE spans SET trace_seq = t.seq FROM traces t WHERE t.trace_id = spans.trace_id",
    )
    if _postgresql():
        op.execute("ALTER TABLE spans ALTER COLUMN trace_seq SET NOT NULL")
        op.execute("ALTER TABLE spans DROP CONSTRAINT pk_spans")
        run_step(
            "0014",
            "rebuilding the span key",
            "ALTER TABLE spans ADD CONSTRAINT pk_spans PRIMARY KEY (trace_seq, span_id, start_ns)",
        )
        return
    started = time.monotonic()
    with op.batch_alter_table("spans", recreate="always") as batch:
        batch.alter_column("trace_seq", existing_type=INT64, nullable=False)
        batch.drop_constraint("pk_spans", type_="primary")
        batch.create_primary_key("pk_spans", ["trace_seq", "span_id"])
    log_step("0014", "rebuilding the span key", started)


def downgrade() -> None:
    if _postgresql():
        op.execute("ALTER TABLE spans DROP CONSTRAINT pk_spans")
        op.execute(
            "ALTER TABLE spans ADD CONSTRAINT pk_spans PRIMARY KEY (trace_id, span_id, start_ns)"
        )
        op.drop_column("spans", "trace_seq")
    else:
        with op.batch_alter_table("spans", recreate="always") as batch:
            batch.drop_constraint("pk_spans", type_="primary")
            batch.create_primary_key("pk_spans", ["trace_id", "span_id"])
            batch.drop_column("trace_seq")
    op.drop_table("traces")
