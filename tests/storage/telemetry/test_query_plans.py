"""SQLite query plans of the statements that run all day: none walks the whole history.

SQLite keeps no statistics unless asked, so its planner picks an index by the shape of a query,
whatever the table holds; a plan that walks an index over every scored conversation or every
current evaluation costs nothing on a test database and seconds at millions of stored spans
(benchmarks/bench_growth.py). The statements are captured from the real repository functions
on a migrated database, then explained.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, event, select

from tests.collector.pipeline.test_score import NOW, expect, fixture_spans, store
from toolscore.collector.pipeline.score import score_conversation
from toolscore.scorer import default_config
from toolscore.storage.conversations import backlog as status
from toolscore.storage.conversations import leases
from toolscore.storage.expectations.repository import ExpectationData
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.retention import spans as retention
from toolscore.storage.telemetry.traces import traces_table

PENDING = "ix_conversations_needs_scoring_last_span_received_ns"


@pytest.fixture
def engine(migrated_sqlite_url: str) -> Iterator[Engine]:
    eng = create_engine(migrated_sqlite_url)
    try:
        yield eng
    finally:
        eng.dispose()


def _plans(engine: Engine, run: Any) -> dict[str, list[str]]:
    """Each statement ``run(engine)`` executes (first line of SQL) -> its query plan."""
    seen: list[tuple[str, Any]] = []

    def capture(conn: Any, cursor: Any, stmt: str, params: Any, ctx: Any, many: bool) -> None:
        if stmt.lstrip().upper().startswith(("SELECT", "UPDATE", "DELETE")):
            seen.append((stmt, params[0] if many else params))

    event.listen(engine, "before_cursor_execute", capture)
    try:
        run(engine)
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    raw = engine.raw_connection()
    try:
        return {
            " ".join(stmt.split()): [
                row[-1] for row in raw.cursor().execute("EXPLAIN QUERY PLAN " + stmt, params or ())
            ]
            for stmt, params in seen
        }
    finally:
        raw.close()


def _find(plans: dict[str, list[str]], start: str, *within: str) -> list[str]:
    found = [p for s, p in plans.items() if s.startswith(start) and all(w in s for w in within)]
    assert found, f"no statement {start!r} {within} among {list(plans)}"
    return found[0]


def test_claims_and_backlog_read_only_pending_rows(engine: Engine) -> None:
    def run(eng: Engine) -> None:
        ready = leases.Readiness(settle_ns=1, idle_ns=1)
        with eng.begin() as conn:
            leases.claim_ready(conn, worker_id="w", now_ns=10**18, ready=ready, lease_ns=1, limit=5)
            leases.next_due_ns(conn, now_ns=10**18, ready=ready)
            status.backlog(conn, dt.datetime.now(dt.UTC))

    plans = _plans(engine, run)
    claim = _find(plans, "UPDATE conversations SET claimed_by")
    due = _find(plans, "SELECT min(CASE")
    backlog = _find(plans, "SELECT count(*)", "needs_scoring")
    for plan in (claim, due, backlog):
        assert any(PENDING in step for step in plan), plan
        assert not any(step.startswith("SCAN conversations") for step in plan), plan


def test_retention_never_walks_the_scored_history(engine: Engine) -> None:
    def run(eng: Engine) -> None:
        with eng.begin() as conn:
            retention.find_prunable(conn, 10**18, 10)
            retention.mark(conn, ["a", "b"], 10**18)

    plans = _plans(engine, run)
    for plan in (
        _find(plans, "SELECT", "FROM conversations", "pruned_at IS NULL", "LIMIT"),
        _find(plans, "SELECT conversations.id, conversations.revision"),
    ):
        assert not any(PENDING in step for step in plan), plan  # pending rows only: not these
        assert not any(step.startswith("SCAN conversations") for step in plan), plan


def test_a_revision_supersedes_only_its_conversations_rows(engine: Engine) -> None:
    expect(engine, ExpectationData(id="weather", reference_tool_calls=fixture_spans()[1]))
    conv_id = store(engine, fixture_spans("weather")[0])
    # the first revision has nothing to supersede (no statement for it): the second has
    score_conversation(engine, conv_id, default_config(), now=NOW)

    plans = _plans(engine, lambda eng: score_conversation(eng, conv_id, default_config(), now=NOW))
    supersede = _find(plans, "UPDATE evaluations SET is_current")
    assert any("is_current=? AND conversation_id=?" in step for step in supersede), supersede


def test_history_retention_reads_and_deletes_by_index(engine: Engine) -> None:
    """Finding the old conversations uses last_span_at's index; the rollups and deletes look
    their rows up by conversation: no statement walks a whole history table."""
    from toolscore.storage.retention.conversation_pruning import prune_history

    expect(engine, ExpectationData(id="weather", reference_tool_calls=fixture_spans()[1]))
    conv_id = store(engine, fixture_spans("weather")[0])
    score_conversation(engine, conv_id, default_config(), now=NOW)
    with engine.begin() as conn:  # done, as the worker leaves it
        conn.exec_driver_sql("UPDATE conversations SET needs_scoring = 0")

    plans = _plans(engine, lambda eng: prune_history(eng, 4 * 10**18))
    find = _find(plans, "SELECT conversations.last_span_at, conversations.id")
    assert any("ix_conversations_last_span_at" in step for step in find), find
    tables = ("conversations", "evaluations", "tool_calls",
              "rescore_run_items", "evaluation_exports", "spans", "log_records",
              "traces")  # fmt: skip
    walks = {
        stmt: step
        for stmt, plan in plans.items()
        for step in plan
        if any(step == f"SCAN {t}" or step.startswith(f"SCAN {t} ") for t in tables)
    }
    assert walks == {}, walks
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM conversations").scalar_one() == 0


def test_spans_are_read_counted_and_deleted_by_trace_number(engine: Engine) -> None:
    """Every statement over spans goes trace id -> number (traces' unique index) -> the span
    key's prefix: none walks the stored spans or the traces."""
    from toolscore.storage.telemetry.spans import load_spans, store_spans

    spans = fixture_spans("weather")[0]
    conv_id = store(engine, spans)
    with engine.begin() as conn:  # a second trace: the lookups must pick theirs out
        store_spans(conn, [dataclasses.replace(s, trace_id="f" * 32) for s in spans], 10**18)
    trace_ids = sorted({s.trace_id for s in spans})

    def run(eng: Engine) -> None:
        with eng.begin() as conn:
            assert len(load_spans(conn, trace_ids)) == len(spans)
            assert leases.span_counts(conn, [conv_id]) == {conv_id: len(spans)}
            retention.plan(conn, 4 * 10**18)
            store_spans(conn, spans[:1], 10**18)  # a resend: numbered again, then skipped
            t = traces_table.c
            seqs = conn.execute(select(t.seq).where(t.trace_id.in_(trace_ids))).scalars().all()
            assert retention.delete_spans(conn, seqs, 2 * 10**18, 100) == len(spans)

    plans = _plans(engine, run)
    walks = {
        stmt: step
        for stmt, plan in plans.items()
        for step in plan
        if any(step == f"SCAN {t}" or step.startswith(f"SCAN {t} ") for t in ("spans", "traces"))
    }
    assert walks == {}, walks
    assert any(s.startswith("DELETE FROM spans") for s in plans), list(plans)


def test_the_count_by_status_sorts_nothing(engine: Engine) -> None:
    """serve's connections keep temporary b-trees in memory
    (tests/storage/plumbing/test_temp_files.py):
    a GROUP BY over every conversation would hold them all (38 MB at 790,000)."""

    def run(eng: Engine) -> None:
        with eng.begin() as conn:
            status.conversations_by_status(conn)

    plan = _find(_plans(engine, run), "SELECT count(*) FILTER")
    assert plan == ["SCAN conversations"], plan
