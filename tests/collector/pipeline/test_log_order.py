"""A transcript's order owes nothing to how log records and spans interleave in time or requests.

Semantic Kernel (native model diagnostics, sensitive data on) sends each message of a model call
as its own Python-logging log record. The recordings are stored in several ingest batches, the
log records shuffled across them, with their timestamps as they came, all equal, or zero (a
coarse clock, or an exporter that sets only the observed time): the stored conversation must
score exactly, with its four calls in order, every time.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
from collections.abc import Sequence

import pytest
from sqlalchemy import Engine, select

from tests.collector.recording import RECORDED, load_recording
from toolscore.collector.pipeline.assign import AssignConfig, assign_spans
from toolscore.collector.pipeline.score import score_conversation
from toolscore.collector.reconstruction.rebuild import reconstruct
from toolscore.scorer import default_config, parse_sample
from toolscore.storage.conversations.tables import conversations, tool_calls
from toolscore.storage.expectations.repository import ExpectationData, import_expectations
from toolscore.storage.records import LogRecordData, SpanRecord
from toolscore.storage.telemetry.row_encode import prepare_telemetry
from toolscore.storage.telemetry.spans import store_telemetry

NOW = dt.datetime(2026, 12, 7, 6, 0, tzinfo=dt.UTC)
RECORDINGS = ["semantic-kernel-multi-turn.json", "semantic-kernel-streaming-multi-turn.json"]
CLOCKS = ["recorded", "equal", "zero"]


def _clocked(logs: Sequence[LogRecordData], clock: str) -> list[LogRecordData]:
    if clock == "recorded":
        return list(logs)
    at = 0 if clock == "zero" else logs[0].time_ns
    return [dataclasses.replace(log, time_ns=at) for log in logs]


def _batches(
    spans: Sequence[SpanRecord], logs: Sequence[LogRecordData], rnd: random.Random
) -> list[tuple[list[SpanRecord], list[LogRecordData]]]:
    """Spans and log records shuffled into four requests (each record in one of them)."""
    batches: list[tuple[list[SpanRecord], list[LogRecordData]]] = [([], []) for _ in range(4)]
    for span in spans:
        batches[rnd.randrange(4)][0].append(span)
    shuffled = list(logs)
    rnd.shuffle(shuffled)
    for log in shuffled:
        batches[rnd.randrange(4)][1].append(log)
    return batches


def _ingest(engine: Engine, batches: list[tuple[list[SpanRecord], list[LogRecordData]]]) -> None:
    for i, (spans, logs) in enumerate(batches):
        at = 10**18 + i
        with engine.begin() as conn:
            numbered = store_telemetry(conn, prepare_telemetry(spans, logs, at))
            assign_spans(
                conn,
                spans,
                received_at_ns=at,
                config=AssignConfig(),
                log_trace_ids={g.trace_id for g in logs if g.trace_id},
                numbered=numbered,
            )


@pytest.mark.parametrize("clock", CLOCKS)
@pytest.mark.parametrize("recording", RECORDINGS)
def test_reconstruction_is_the_same_whatever_the_log_records_order(
    recording: str, clock: str
) -> None:
    spans, logs, expected = load_recording(RECORDED / recording)
    want = [(c["name"], c["args"]) for c in expected]
    for seed in range(30):
        shuffled = _clocked(logs, clock)
        random.Random(seed).shuffle(shuffled)
        result = reconstruct(spans, shuffled)
        assert [(c.name, c.arguments) for c in result.tool_calls] == want, seed
        parse_sample({"user_input": list(result.messages), "reference_tool_calls": expected})
        assert result.warnings == (), seed


@pytest.mark.parametrize("clock", CLOCKS)
@pytest.mark.parametrize("recording", RECORDINGS)
def test_stored_in_shuffled_batches_it_scores_exactly(
    engine: Engine, recording: str, clock: str
) -> None:
    spans, logs, expected = load_recording(RECORDED / recording)
    conv_id = next(str(v) for s in spans if (v := s.attributes.get("gen_ai.conversation.id")))
    with engine.connect() as conn:
        import_expectations(
            conn,
            [
                ExpectationData(
                    id="sk", reference_tool_calls=expected, match={"conversation_id": conv_id}
                )
            ],
            now=NOW,
        )
        conn.commit()
    _ingest(engine, _batches(spans, _clocked(logs, clock), random.Random(recording + clock)))
    outcome = score_conversation(engine, conv_id, default_config(), now=NOW)
    assert outcome is not None and outcome.status == "scored", outcome
    assert dict(outcome.scores) == {"tool_call_accuracy": 1.0, "tool_call_f1": 1.0}
    with engine.connect() as conn:
        stored = (
            conn.execute(
                select(tool_calls.c.name)
                .where(tool_calls.c.conversation_id == conv_id)
                .order_by(tool_calls.c.position)
            )
            .scalars()
            .all()
        )
        warning = conn.execute(
            select(conversations.c.warning).where(conversations.c.id == conv_id)
        ).scalar_one()
    assert stored == [c["name"] for c in expected]
    assert warning is None
