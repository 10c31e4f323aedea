"""Scoring a stored conversation: reconstruct, match, score, write the evaluation history."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Engine, select

from tests.collector.recording import DOC_FIXTURES, load_recording
from toolscore.collector.pipeline.assign import AssignConfig, assign_spans
from toolscore.collector.pipeline.claim import NS, Timing
from toolscore.collector.pipeline.score import score_conversation
from toolscore.collector.pipeline.worker import PipelineWorker
from toolscore.scorer import default_config, parse_config, parse_sample
from toolscore.storage.conversations.tables import conversations, evaluations, tool_calls
from toolscore.storage.expectations.repository import ExpectationData, import_expectations
from toolscore.storage.records import SpanRecord
from toolscore.storage.telemetry.spans import store_spans

NOW = dt.datetime(2026, 11, 30, 6, 0, tzinfo=dt.UTC)
ASSIGN = AssignConfig()
CONV_ID = "conv_5j66UpCp"  # the fixture's gen_ai.conversation.id


def fixture_spans(reference_id: str | None = None) -> tuple[list[SpanRecord], list[dict[str, Any]]]:
    """The OTel GenAI fixture (get_weather(Paris), get_time(Asia/Tokyo)), optionally tagged."""
    spans, _logs, expected = load_recording(DOC_FIXTURES / "otel-genai.json")
    if reference_id is not None:
        root = next(s for s in spans if s.parent_span_id is None)
        tagged = dataclasses.replace(
            root, attributes={**root.attributes, "toolscore.reference.id": reference_id}
        )
        spans = [tagged if s is root else s for s in spans]
    return spans, expected


def store(engine: Engine, spans: Sequence[SpanRecord], at_ns: int = 10**18) -> str:
    with engine.begin() as conn:
        store_spans(conn, spans, at_ns)
        assign_spans(conn, spans, received_at_ns=at_ns, config=ASSIGN)
    return CONV_ID


def expect(engine: Engine, *items: ExpectationData) -> None:
    with engine.connect() as conn:
        import_expectations(conn, items, now=NOW)


def current_scores(engine: Engine, conv_id: str) -> dict[str, float | None]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(evaluations.c.metric, evaluations.c.score).where(
                evaluations.c.conversation_id == conv_id, evaluations.c.is_current
            )
        ).all()
    return {m: s for m, s in rows}


def offline_scores(predicted: list[dict[str, Any]], reference: list[dict[str, Any]]) -> dict:  # type: ignore[type-arg]
    """What ``toolscore score`` gives the equivalent Ragas sample."""
    sample = parse_sample(
        {
            "user_input": [
                {"type": "human", "content": "question"},
                {"type": "ai", "content": "", "tool_calls": predicted},
            ],
            "reference_tool_calls": reference,
        }
    )
    config = default_config()
    return {
        name: inst.score(sample.predicted_tool_calls, sample.reference_tool_calls).value
        for name, inst in config.instances.items()
    }


REFERENCE = [
    {"name": "get_weather", "args": {"city": "Paris"}},
    {"name": "get_time", "args": {"timezone": "Europe/Paris"}},
]


def test_a_matched_conversation_scores_like_its_ragas_sample(engine: Engine) -> None:
    spans, predicted = fixture_spans("weather")
    conv_id = store(engine, spans)
    expect(engine, ExpectationData(id="weather", reference_tool_calls=REFERENCE))

    outcome = score_conversation(engine, conv_id, default_config(), now=NOW)

    assert outcome is not None and outcome.status == "scored" and outcome.revision == 1
    expected = offline_scores(predicted, REFERENCE)
    assert set(expected) == {"tool_call_accuracy", "tool_call_f1"}
    assert current_scores(engine, conv_id) == expected == dict(outcome.scores)
    assert 0 < expected["tool_call_accuracy"] < 1  # a partial score: the comparison means something
    with engine.connect() as conn:
        row = conn.execute(select(conversations).where(conversations.c.id == conv_id)).one()
        ev = conn.execute(select(evaluations)).mappings().first()
    assert (row.status, row.revision, row.expectation_id, row.expectation_version) == (
        "scored",
        1,
        "weather",
        1,
    )
    assert ev is not None
    assert (
        ev["trace_id"] == spans[0].trace_id
        and ev["predicted_count"] == 2
        and ev["expected_count"] == 2
    )
    assert ev["created_at"] == NOW and ev["details"], "the scorer's explanation is stored"


def test_reconstructed_calls_are_stored_in_order(engine: Engine) -> None:
    spans, predicted = fixture_spans("weather")
    conv_id = store(engine, spans)
    expect(engine, ExpectationData(id="weather", reference_tool_calls=REFERENCE))
    score_conversation(engine, conv_id, default_config(), now=NOW)
    with engine.connect() as conn:
        rows = conn.execute(
            select(tool_calls.c.position, tool_calls.c.name, tool_calls.c.arguments)
            .where(tool_calls.c.conversation_id == conv_id)
            .order_by(tool_calls.c.position)
        ).all()
    assert [(p, n, a) for p, n, a in rows] == [
        (i, c["name"], c["args"]) for i, c in enumerate(predicted)
    ]


def test_no_matching_expectation_is_stored_as_unmatched(engine: Engine) -> None:
    spans, _ = fixture_spans()
    conv_id = store(engine, spans)
    outcome = score_conversation(engine, conv_id, default_config(), now=NOW)
    assert outcome is not None and outcome.status == "unmatched"
    assert current_scores(engine, conv_id) == {}
    with engine.connect() as conn:
        calls = conn.execute(select(tool_calls.c.name)).scalars().all()
        status = conn.execute(select(conversations.c.status)).scalar_one()
    assert status == "unmatched" and len(calls) == 2


def test_matching_by_first_user_message(engine: Engine) -> None:
    spans, predicted = fixture_spans()
    conv_id = store(engine, spans)
    from toolscore.collector.reconstruction.rebuild import reconstruct

    first = reconstruct(spans).first_user_message
    assert first
    expect(
        engine,
        ExpectationData(
            id="by-text",
            reference_tool_calls=predicted,
            match={"user_input": "  " + first.upper() + " "},
        ),
    )
    outcome = score_conversation(engine, conv_id, default_config(), now=NOW)
    assert outcome is not None and outcome.expectation_id == "by-text"
    assert current_scores(engine, conv_id) == offline_scores(predicted, predicted)


def test_rescoring_adds_a_revision_and_keeps_the_history(engine: Engine) -> None:
    spans, predicted = fixture_spans("weather")
    conv_id = store(engine, spans)
    expect(engine, ExpectationData(id="weather", reference_tool_calls=REFERENCE))
    score_conversation(engine, conv_id, default_config(), now=NOW)
    expect(engine, ExpectationData(id="weather", reference_tool_calls=predicted))  # version 2
    later = NOW + dt.timedelta(minutes=1)
    outcome = score_conversation(engine, conv_id, default_config(), now=later)
    assert outcome is not None and outcome.revision == 2 and outcome.expectation_version == 2
    with engine.connect() as conn:
        rows = conn.execute(
            select(evaluations.c.revision, evaluations.c.is_current, evaluations.c.score)
            .where(evaluations.c.metric == "tool_call_accuracy")
            .order_by(evaluations.c.revision)
        ).all()
        revisions = conn.execute(select(tool_calls.c.revision).distinct()).scalars().all()
    first = offline_scores(predicted, REFERENCE)["tool_call_accuracy"]
    assert [tuple(r) for r in rows] == [(1, False, first), (2, True, 1.0)]
    assert sorted(revisions) == [1, 2]


def test_the_expectation_chooses_metric_instances(engine: Engine) -> None:
    spans, _ = fixture_spans("weather")
    conv_id = store(engine, spans)
    config = parse_config(
        {
            "metrics": {
                "strict": {"type": "tool_call_accuracy"},
                "loose": {"type": "tool_call_accuracy", "order": "unordered"},
                "f1": {"type": "tool_call_f1"},
            }
        }
    )
    expect(
        engine,
        ExpectationData(id="weather", reference_tool_calls=REFERENCE, metrics=("loose", "missing")),
    )
    outcome = score_conversation(engine, conv_id, config, now=NOW)
    assert outcome is not None and set(outcome.scores) == {"loose", "missing"}
    with engine.connect() as conn:
        missing = conn.execute(
            select(evaluations.c.score, evaluations.c.error).where(
                evaluations.c.metric == "missing"
            )
        ).one()
    assert missing.score is None and "'missing'" in missing.error


def test_worker_round_scores_ready_conversations_once(engine: Engine) -> None:
    spans, _ = fixture_spans("weather")
    t0 = 1_700_000_000 * NS
    conv_id = store(engine, spans, at_ns=t0)
    expect(engine, ExpectationData(id="weather", reference_tool_calls=REFERENCE))
    now = [t0 + 2 * NS]
    worker = PipelineWorker(
        engine, default_config(), timing=Timing(settle_s=5, idle_s=1), clock_ns=lambda: now[0]
    )
    assert worker.run_once().due_ns == t0 + 5 * NS, "a named conversation waits for settle"
    now[0] = t0 + 5 * NS
    assert worker.run_once().claimed == 1
    assert worker.run_once().claimed == 0
    with engine.connect() as conn:
        row = conn.execute(select(conversations).where(conversations.c.id == conv_id)).one()
    assert (row.status, row.needs_scoring, row.claimed_by) == ("scored", False, None)
    assert worker.stats.scored == 1


def test_a_span_arriving_while_scoring_keeps_the_conversation_pending(engine: Engine) -> None:
    from toolscore.collector.pipeline.score import compute, write

    spans, _ = fixture_spans("weather")
    conv_id = store(engine, spans, at_ns=100)
    expect(engine, ExpectationData(id="weather", reference_tool_calls=REFERENCE))
    with engine.begin() as conn:
        conn.execute(conversations.update().values(claimed_by="me"))
    with engine.connect() as conn:
        computed = compute(conn, [conv_id], default_config())
    with engine.begin() as conn:  # a late span lands between claim and write
        conn.execute(conversations.update().values(last_span_received_ns=200))
    with engine.begin() as conn:
        write(conn, computed, now=NOW, claimed_by="me", seen_ns={conv_id: 100})
    with engine.connect() as conn:
        row = conn.execute(select(conversations)).one()
    assert (row.revision, row.needs_scoring, row.claimed_by) == (1, True, None)


def test_a_lost_claim_writes_nothing(engine: Engine) -> None:
    from toolscore.collector.pipeline.score import compute, write

    spans, _ = fixture_spans("weather")
    conv_id = store(engine, spans)
    with engine.begin() as conn:
        conn.execute(conversations.update().values(claimed_by="someone-else"))
    with engine.connect() as conn:
        computed = compute(conn, [conv_id], default_config())
    with engine.begin() as conn:
        assert write(conn, computed, now=NOW, claimed_by="me", seen_ns={conv_id: 1}) == []
    with engine.connect() as conn:
        assert conn.execute(select(tool_calls)).first() is None


def test_scoring_an_unknown_conversation_returns_none(engine: Engine) -> None:
    assert score_conversation(engine, "nope", default_config(), now=NOW) is None
