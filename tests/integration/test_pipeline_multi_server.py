"""Two ``toolscore serve`` processes' worth of apps on one PostgreSQL: each conversation is
scored exactly once, whichever server received it and whichever claimed it."""

from __future__ import annotations

from sqlalchemy import func, select

from tests.collector.pipeline.e2e import (
    genai_agent_trace,
    import_refs,
    otlp_provider,
    pipeline_server,
    ragas_sample,
    ragas_scores,
    wait_scored,
)
from toolscore.storage.conversations.tables import evaluations
from toolscore.storage.expectations.repository import ExpectationData
from toolscore.storage.plumbing.engine import create_engine

WEATHER = {"name": "get_weather", "args": {"city": "Paris"}}
TIME = {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}}
QUESTION = "What's the weather in Paris?"


def scored_by(srv: object) -> float:
    registry = srv.app.metrics.registry  # type: ignore[attr-defined]
    value = registry.get_sample_value(
        "toolscore_pipeline_conversations_total", {"status": "scored"}
    )
    return float(value or 0.0)


def test_two_servers_on_one_postgres_score_each_conversation_once(postgres_url: str) -> None:
    n = 40
    import_refs(postgres_url, ExpectationData(id="w", reference_tool_calls=[WEATHER]))
    ids = [f"multi-{i}" for i in range(n)]
    with (
        pipeline_server(postgres_url, settle_s=2.0) as a,
        pipeline_server(postgres_url, settle_s=2.0) as b,
    ):
        providers = [otlp_provider(a), otlp_provider(b, grpc=True)]
        for conv_id in ids:
            # the conversation's turns go to both servers: whichever claims it scores it
            for provider in providers:
                genai_agent_trace(
                    provider.get_tracer("app"),
                    conv_id,
                    [WEATHER] if provider is providers[0] else [TIME],
                    QUESTION,
                    {"toolscore.reference.id": "w"},
                )
        for p in providers:
            p.force_flush()
        rows = wait_scored(postgres_url, ids, timeout_s=60)
        total = scored_by(a) + scored_by(b)
        for p in providers:
            p.shutdown()

    engine = create_engine(postgres_url)
    with engine.connect() as conn:
        per_conv = conn.execute(
            select(
                evaluations.c.conversation_id, func.count(), func.max(evaluations.c.revision)
            ).group_by(evaluations.c.conversation_id)
        ).all()
        scores = conn.execute(
            select(evaluations.c.conversation_id, evaluations.c.metric, evaluations.c.score)
        ).all()
    engine.dispose()
    assert {r.conversation_id: (r[1], r[2]) for r in per_conv} == {c: (2, 1) for c in ids}
    assert all(rows[c]["revision"] == 1 for c in ids)
    assert total == n, "every scoring is counted by exactly one server"
    assert {rows[c]["status"] for c in ids} == {"scored"}
    # each conversation: two turns (one per server) scored as one sample
    expected = ragas_scores(ragas_sample(QUESTION, [[WEATHER], [TIME]], [WEATHER]))
    for conv_id in ids:
        assert {m: v for c, m, v in scores if c == conv_id} == expected
