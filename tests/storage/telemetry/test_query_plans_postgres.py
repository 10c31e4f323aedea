"""PostgreSQL plans of the scoring round's reads: index lookups, also on tables never analysed.

With autovacuum off (or not yet run: a table just filled or truncated) PostgreSQL has no
statistics, and ``trace_id = ANY(:ids)`` is estimated at the whole table: a sequential scan of
every stored span in every round. The reads go id by id (``storage.plumbing.row_lists.each_id``),
which
must stay index lookups whatever the planner knows; and connections run without JIT, which an
over-estimated plan would otherwise compile at every execution.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, text

from toolscore.storage.conversations import assignments, leases
from toolscore.storage.conversations import reading as conversations
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.telemetry import spans as telemetry
from toolscore.storage.telemetry import traces


@pytest.fixture
def engine(migrated_postgres_url: str) -> Iterator[Engine]:
    eng = create_engine(migrated_postgres_url)
    with eng.begin() as conn:  # 2,000 traces of 10 spans, never analysed
        conn.exec_driver_sql(
            "INSERT INTO traces (trace_id, conversation_id) SELECT 't' || g, 'c' || g "
            "FROM generate_series(0, 1999) g"
        )
        conn.exec_driver_sql(
            "INSERT INTO spans SELECT 't' || (g / 10), 's' || g, NULL, 'n', 0, g, g, 0, '', "
            "'{}', '{}', '', '', '[]', '[]', g, t.seq FROM generate_series(0, 19999) g "
            "JOIN traces t ON t.trace_id = 't' || (g / 10)"
        )
        conn.exec_driver_sql(
            "INSERT INTO conversations (id, status, first_seen_at, last_span_at, "
            "last_span_received_ns, needs_scoring, last_trace_id, revision) "
            "SELECT 'c' || g, 'open', now(), now(), g, false, 't' || g, 0 "
            "FROM generate_series(0, 1999) g"
        )
    try:
        yield eng
    finally:
        eng.dispose()


def _plan(conn: Connection, stmt: Any, ids: list[str]) -> str:
    compiled = stmt.compile(dialect=conn.dialect)
    rows = conn.exec_driver_sql(f"EXPLAIN {compiled}", {"ids": ids}).scalars()
    return "\n".join(rows)


@pytest.mark.parametrize(
    ("build", "ids"),
    [
        (telemetry._spans_of, [f"t{i}" for i in range(0, 2000, 10)]),
        (traces._held, [f"t{i}" for i in range(0, 2000, 10)]),
        (leases._counts, [f"c{i}" for i in range(0, 2000, 10)]),
        (conversations._traces, [f"c{i}" for i in range(0, 2000, 10)]),
        (assignments._assigned, [f"t{i}" for i in range(0, 2000, 27)]),  # 74: a request's
    ],
)
def test_round_reads_look_rows_up_by_index(engine: Engine, build: Any, ids: list[str]) -> None:
    with engine.connect() as conn:
        plan = _plan(conn, build(conn.dialect), ids)
    assert "Seq Scan on spans" not in plan, plan
    assert "Seq Scan on traces" not in plan, plan
    assert "Seq Scan on conversations" not in plan, plan


def test_connections_run_without_jit(engine: Engine) -> None:
    with engine.connect() as conn:
        assert conn.execute(text("SHOW jit")).scalar_one() == "off"
