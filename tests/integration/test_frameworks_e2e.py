"""Recordings of real frameworks (record_<framework>.py) → standard OTLP exporters →
``toolscore serve`` → scores equal to the Ragas sample a user would write from the script.

Each recording plays the two-turn conversation of
tests/collector/reconstruction/conventions/four_calls.py
(parallel calls, a nested-object argument, an integer and a float). It is sent twice, as two
conversations: one against the exact reference (scores 1.0), one against a reference with the
booking's party size changed and the order of turn 1 swapped (partial scores); both must be the
scorer's result on the hand-written equivalent Ragas sample, and the calls stored must be the
four calls in order.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from tests.collector.otlp_replay import relabel, replay
from tests.collector.pipeline.e2e import (
    current_scores,
    import_refs,
    pipeline_server,
    ragas_sample,
    ragas_scores,
    wait_scored,
)
from tests.collector.reconstruction.conventions import four_calls as fc
from tests.collector.recording import RECORDED, load_recording
from toolscore.storage.conversations.tables import tool_calls
from toolscore.storage.expectations.repository import ExpectationData
from toolscore.storage.plumbing.engine import create_engine

# recording → the conversation id its framework recorded, and the convention that reads it
RECORDINGS = {
    "smolagents-openinference-multi-turn.json": "sess-smolagents",
    "haystack-multi-turn.json": "conv-haystack",
    "mastra-multi-turn.json": "thread-mastra",
    "semantic-kernel-multi-turn.json": "conv-semantic-kernel",
    "semantic-kernel-streaming-multi-turn.json": "conv-semantic-kernel-streaming",
}
CONVENTIONS = {
    "smolagents-openinference-multi-turn.json": "smolagents",
    "haystack-multi-turn.json": "haystack",
    "mastra-multi-turn.json": "mastra",
    # Semantic Kernel's log records are the OTel GenAI <= 1.36 events the generic module reads
    "semantic-kernel-multi-turn.json": "otel_genai_events",
    "semantic-kernel-streaming-multi-turn.json": "otel_genai_events",
}


def _partial_reference(expected: list[dict[str, Any]]) -> list[dict[str, Any]]:
    changed = copy.deepcopy(expected)
    changed[2]["args"]["party_size"] = 5
    return [changed[1], changed[0], changed[2], changed[3]]


def _stored_calls(db_url: str, conv_id: str, revision: int) -> list[tuple[str, Any, str]]:
    """The tool calls the server stored for the conversation's scored revision, in order."""
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                select(tool_calls.c.name, tool_calls.c.arguments, tool_calls.c.convention)
                .where(tool_calls.c.conversation_id == conv_id, tool_calls.c.revision == revision)
                .order_by(tool_calls.c.position)
            ).all()
        return [(name, _args(args), convention) for name, args, convention in rows]
    finally:
        engine.dispose()


def _args(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


@pytest.mark.parametrize("grpc", [False, True], ids=["http", "grpc"])
@pytest.mark.parametrize("recording", sorted(RECORDINGS))
def test_recorded_framework_scores_like_its_ragas_sample(
    db_url: str, recording: str, grpc: bool
) -> None:
    spans, logs, expected = load_recording(RECORDED / recording)
    # the four calls, under the names the framework gives them (Semantic Kernel: plugin-function)
    assert [c["args"] for c in expected] == [c["args"] for c in fc.EXPECTED]
    conv = RECORDINGS[recording]
    references = {conv: expected, f"{conv}-partial": _partial_reference(expected)}
    import_refs(
        db_url,
        *(
            ExpectationData(id=c, reference_tool_calls=ref, match={"conversation_id": c})
            for c, ref in references.items()
        ),
    )
    with pipeline_server(db_url) as srv:
        replay(srv, spans, logs, grpc=grpc)
        replay(srv, *relabel(spans, logs, conv, f"{conv}-partial"), grpc=grpc)
        rows = wait_scored(db_url, list(references))
        scores = {c: current_scores(db_url, c) for c in references}
    names = iter(c["name"] for c in expected)
    turns = [[{**c, "name": next(names)} for c in step] for turn in fc.TURNS for step in turn]
    for c, reference in references.items():
        assert rows[c]["status"] == "scored", (c, rows[c])
        assert rows[c]["expectation_id"] == c
        assert scores[c] == ragas_scores(ragas_sample(fc.QUESTION_1, turns, reference)), c
        stored = _stored_calls(db_url, c, rows[c]["revision"])
        assert [(n, a) for n, a, _ in stored] == [(e["name"], e["args"]) for e in expected]
        assert {convention for _, _, convention in stored} == {CONVENTIONS[recording]}
    assert scores[conv] == {"tool_call_accuracy": 1.0, "tool_call_f1": 1.0}
    partial = scores[f"{conv}-partial"]
    assert partial["tool_call_accuracy"] == 0.0  # the order of turn 1 is swapped
    f1 = partial["tool_call_f1"]
    assert f1 is not None and 0 < f1 < 1  # three of four calls equal


def test_every_framework_recording_is_replayed() -> None:
    names = {p.name for p in Path(RECORDED).glob("*.json")}
    assert set(RECORDINGS) <= names
