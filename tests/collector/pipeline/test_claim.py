"""Completion and claiming: when a conversation is ready and that only one worker gets it."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, select

from tests.collector.pipeline.spans import span, tid
from toolscore.collector.pipeline.assign import AssignConfig, assign_spans
from toolscore.collector.pipeline.claim import NS, Timing, claim_ready, next_due_ns
from toolscore.storage.conversations.tables import conversations
from toolscore.storage.plumbing.engine import create_engine

CONFIG = AssignConfig(conversation_keys=("session.id",))
TIMING = Timing(settle_s=5.0, idle_s=1.0, lease_s=60.0)
T0 = 1_700_000_000 * NS


def ingest(engine: Engine, spans: list, at_ns: int) -> None:  # type: ignore[type-arg]
    with engine.begin() as conn:
        assign_spans(conn, spans, received_at_ns=at_ns, config=CONFIG)


def claim(engine: Engine, now_ns: int, worker: str = "w1", limit: int = 100) -> list[str]:
    with engine.begin() as conn:
        got = claim_ready(conn, worker_id=worker, now_ns=now_ns, timing=TIMING, limit=limit)
    return sorted(c.conversation_id for c in got)


def test_a_multi_trace_conversation_waits_for_the_settle_time(engine: Engine) -> None:
    ingest(engine, [span("c1", "1", attrs={"session.id": "chat"})], T0)
    assert claim(engine, T0 + 4 * NS) == [], "root ended, but another turn may follow"
    assert claim(engine, T0 + 5 * NS) == ["chat"]


def test_a_single_trace_conversation_whose_root_ended_completes_after_idle(engine: Engine) -> None:
    ingest(engine, [span("s1", "2", "1")], T0)
    assert claim(engine, T0 + 2 * NS) == [], "no root span yet: wait for the settle time"
    ingest(engine, [span("s1", "1")], T0 + 2 * NS)
    assert claim(engine, T0 + 2 * NS + NS // 2) == []
    assert claim(engine, T0 + 3 * NS) == [tid("s1")]


def test_new_spans_postpone_completion(engine: Engine) -> None:
    ingest(engine, [span("p1", "2", "1", attrs={"session.id": "p"})], T0)
    ingest(engine, [span("p1", "3", "1")], T0 + 4 * NS)
    assert claim(engine, T0 + 6 * NS) == []
    assert claim(engine, T0 + 9 * NS) == ["p"]


def test_a_claim_is_exclusive_until_its_lease_expires(engine: Engine) -> None:
    ingest(engine, [span("x1", "1")], T0)
    assert claim(engine, T0 + 2 * NS, "w1") == [tid("x1")]
    assert claim(engine, T0 + 3 * NS, "w2") == []
    with engine.connect() as conn:
        row = conn.execute(select(conversations.c.claimed_by, conversations.c.needs_scoring)).one()
    assert tuple(row) == ("w1", True), "still pending until its scores are written"
    # w1 died: after the lease another worker takes it over
    assert claim(engine, T0 + 63 * NS, "w2") == [tid("x1")]


def test_claim_takes_the_oldest_first_up_to_the_limit(engine: Engine) -> None:
    for i in range(5):
        ingest(engine, [span(f"o{i}", "1")], T0 + i * NS)
    assert claim(engine, T0 + 20 * NS, limit=2) == [tid("o0"), tid("o1")]
    assert claim(engine, T0 + 20 * NS, limit=10) == [tid(f"o{i}") for i in range(2, 5)]


def test_next_due_is_the_earliest_completion_time(engine: Engine) -> None:
    with engine.connect() as conn:
        assert next_due_ns(conn, now_ns=T0, timing=TIMING) is None
    ingest(engine, [span("d1", "2", "1", attrs={"session.id": "named"})], T0)
    with engine.connect() as conn:
        assert next_due_ns(conn, now_ns=T0, timing=TIMING) == T0 + 5 * NS
    ingest(engine, [span("d2", "1")], T0 + 2 * NS)
    with engine.connect() as conn:
        assert next_due_ns(conn, now_ns=T0, timing=TIMING) == T0 + 3 * NS
    claim(engine, T0 + 6 * NS)  # both claimed: next due is the lease expiry
    with engine.connect() as conn:
        assert next_due_ns(conn, now_ns=T0, timing=TIMING) == T0 + 66 * NS


def test_skip_locked_gives_concurrent_workers_disjoint_conversations(postgres_url: str) -> None:
    from toolscore.storage.schema import metadata

    engine = create_engine(postgres_url)
    try:
        metadata.create_all(engine)
        for i in range(6):
            ingest(engine, [span(f"k{i}", "1")], T0)
        with engine.connect() as a, engine.connect() as b:
            got_a = claim_ready(a, worker_id="a", now_ns=T0 + 9 * NS, timing=TIMING, limit=3)
            # a has not committed: b must skip a's rows, not wait for them
            got_b = claim_ready(b, worker_id="b", now_ns=T0 + 9 * NS, timing=TIMING, limit=10)
            a.commit()
            b.commit()
        ids_a = {c.conversation_id for c in got_a}
        ids_b = {c.conversation_id for c in got_b}
        assert len(ids_a) == 3 and len(ids_b) == 3 and not ids_a & ids_b
    finally:
        engine.dispose()


def test_invalid_timing_is_refused() -> None:
    with pytest.raises(ValueError, match="invalid pipeline timing"):
        Timing(settle_s=-1)
