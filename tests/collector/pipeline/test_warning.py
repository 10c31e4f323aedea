"""Never silently wrong: a conversation whose calls were rebuilt with a rule short of evidence is
scored, and marked in every view: ``conversations.warning`` (``conversations``, ``show``), each
evaluation's details, the report, the ``/metrics`` count and the write-back's attributes.

The BeeAI recording (OpenInference) merges two parallel calls into one output entry
(``{"city": "Paris"}{"timezone": "Asia/Tokyo"}``): they are split by the tool spans' arguments,
and that is said.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, select

from tests.collector.otlp_requests import load_requests, records
from toolscore.collector.export.attributes import ATTR_WARNING, evaluation_attributes
from toolscore.collector.pipeline.assign import AssignConfig, assign_spans
from toolscore.collector.pipeline.score import score_conversation
from toolscore.collector.views.report.data import load_report
from toolscore.collector.views.report.text import render_text
from toolscore.scorer import default_config
from toolscore.storage.conversations.backlog import WITH_WARNING, conversations_by_status
from toolscore.storage.conversations.tables import conversations, evaluations
from toolscore.storage.expectations.repository import ExpectationData, import_expectations
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.telemetry.row_encode import prepare_telemetry
from toolscore.storage.telemetry.spans import store_telemetry

NOW = dt.datetime.now(dt.UTC)


@pytest.fixture
def engine(migrated_sqlite_url: str) -> Iterator[Engine]:
    """A SQLite file at the newest schema (the report reads its views)."""
    eng = create_engine(migrated_sqlite_url)
    try:
        yield eng
    finally:
        eng.dispose()


def _store(engine: Engine, name: str) -> None:
    recording = load_requests(name)
    spans, logs = records(recording.requests)
    assert recording.reference_id is not None
    with engine.begin() as conn:
        import_expectations(
            conn,
            [
                # the recording's spans name it by toolscore.reference.id
                ExpectationData(id=recording.reference_id, reference_tool_calls=recording.expected)
            ],
            now=NOW,
        )
        numbered = store_telemetry(conn, prepare_telemetry(spans, logs, 1))
        assign_spans(
            conn,
            spans,
            received_at_ns=1,
            config=AssignConfig(),
            log_trace_ids={g.trace_id for g in logs if g.trace_id},
            numbered=numbered,
        )


def test_a_conversation_rebuilt_without_full_evidence_is_scored_and_marked(engine: Engine) -> None:
    _store(engine, "beeai-openinference")
    with engine.connect() as conn:
        conv_id = conn.execute(select(conversations.c.id)).scalar_one()
    outcome = score_conversation(engine, conv_id, default_config(), now=NOW)
    assert outcome is not None and outcome.status == "scored"
    assert dict(outcome.scores) == {"tool_call_accuracy": 1.0, "tool_call_f1": 1.0}
    assert outcome.warning is not None and "merged into one entry" in outcome.warning
    with engine.connect() as conn:
        stored = conn.execute(select(conversations.c.warning)).scalar_one()
        details = conn.execute(select(evaluations.c.details)).scalars().all()
        counts = conversations_by_status(conn)
        report = load_report(conn, dt.date(1970, 1, 1), NOW.date())  # stored at 1 ns
    assert stored == outcome.warning
    assert details and all(d["warning"] == outcome.warning for d in details)
    assert counts[WITH_WARNING] == 1
    attrs = evaluation_attributes(
        evaluation_id=1,
        metric="tool_call_accuracy",
        metric_type="tool_call_accuracy",
        score=1.0,
        error=None,
        details=details[0],
        threshold=1.0,
        conversation_id=conv_id,
        revision=1,
        expectation_id="ref-beeai-openinference",
        expectation_version=1,
        predicted_count=4,
        expected_count=4,
    )
    assert "merged into one entry" in attrs[ATTR_WARNING]
    assert report.warned_total == 1 and report.warned[0].conversation_id == conv_id
    assert "Conversations with warnings (1" in render_text(report, width=200)


def test_an_exact_rebuild_carries_no_warning(engine: Engine) -> None:
    _store(engine, "langsmith-langgraph")
    with engine.connect() as conn:
        conv_id = conn.execute(select(conversations.c.id)).scalar_one()
    outcome = score_conversation(engine, conv_id, default_config(), now=NOW)
    assert outcome is not None and outcome.status == "scored" and outcome.warning is None
    with engine.connect() as conn:
        assert WITH_WARNING not in conversations_by_status(conn)
        assert load_report(conn, dt.date(1970, 1, 1), NOW.date()).warned_total == 0
