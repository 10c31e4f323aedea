"""The outbox (storage.history.outbox): claiming, leases, backoff bookkeeping, concurrent
claimers."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import select

from tests.collector.export.helpers import add_conversation, add_evaluation
from toolscore.storage.history import outbox as exports
from toolscore.storage.plumbing.engine import create_engine

NOW = dt.datetime(2026, 11, 3, 12, tzinfo=dt.UTC)
LEASE = dt.timedelta(seconds=60)


def test_claimed_rows_are_leased_and_come_back_when_the_lease_ends(migrated_db_url: str) -> None:
    engine = create_engine(migrated_db_url)
    try:
        add_conversation(engine, "c")
        ids = [add_evaluation(engine, "c", m) for m in ("a", "b")]
        with engine.begin() as conn:
            assert exports.enqueue_new(conn, NOW) == 2
            assert exports.enqueue_new(conn, NOW) == 0  # once per evaluation
            claimed = exports.claim_batch(conn, NOW, 10, LEASE)
        assert [i.evaluation_id for i in claimed] == ids
        assert all(i.needs_span and i.needs_log for i in claimed)
        with engine.begin() as conn:
            # the claimer died: nothing is due until the lease ends
            assert exports.claim_batch(conn, NOW + LEASE / 2, 10, LEASE) == []
            again = exports.claim_batch(conn, NOW + LEASE, 10, LEASE)
        assert [i.evaluation_id for i in again] == ids
    finally:
        engine.dispose()


def test_partial_delivery_resends_only_what_was_not_acknowledged(migrated_db_url: str) -> None:
    engine = create_engine(migrated_db_url)
    try:
        add_conversation(engine, "c")
        eid = add_evaluation(engine, "c")
        retry_at = NOW + dt.timedelta(seconds=5)
        with engine.begin() as conn:
            exports.enqueue_new(conn, NOW)
            exports.claim_batch(conn, NOW, 10, LEASE)
            exports.record_results(conn, NOW, [eid], [], {eid: ("log export failed", retry_at)})
        with engine.begin() as conn:
            assert exports.claim_batch(conn, NOW, 10, LEASE) == []  # backing off
            [item] = exports.claim_batch(conn, retry_at, 10, LEASE)
            assert (item.needs_span, item.needs_log, item.attempts) == (False, True, 1)
            exports.record_results(conn, retry_at, [], [eid], {})
            row = conn.execute(select(exports.evaluation_exports)).mappings().one()
            assert row["exported_at"] is not None and row["last_error"] is None
            assert exports.counts(conn) == exports.OutboxCounts(pending=0, exported=1, failing=0)
    finally:
        engine.dispose()


def test_two_concurrent_claimers_on_postgres_take_disjoint_rows(migrated_postgres_url: str) -> None:
    engine = create_engine(migrated_postgres_url)
    try:
        add_conversation(engine, "c")
        for m in "abcdef":
            add_evaluation(engine, "c", m)
        with engine.begin() as conn:
            exports.enqueue_new(conn, NOW)
        with engine.connect() as first, engine.connect() as second, first.begin():
            mine = exports.claim_batch(first, NOW, 4, LEASE)
            # the first transaction still holds its rows: the second skips them
            with second.begin():
                theirs = exports.claim_batch(second, NOW, 4, LEASE)
        a = {i.evaluation_id for i in mine}
        b = {i.evaluation_id for i in theirs}
        assert len(a) == 4 and len(b) == 2 and not a & b
    finally:
        engine.dispose()
