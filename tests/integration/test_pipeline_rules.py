"""Rule expectations through a real ``toolscore serve`` (SQLite file and PostgreSQL), with
recordings of real frameworks sent over OTLP: a regex with named groups filling a templated
reference, combined with span and resource attributes; the most specific rule wins; a
conversation without those attributes falls to the plainer rule. Scores equal the scorer's on
the hand-written Ragas sample with the filled reference."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from sqlalchemy import select

from tests.collector.otlp_replay import replay
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
from toolscore.storage.conversations.tables import evaluations
from toolscore.storage.expectations.repository import ExpectationData
from toolscore.storage.plumbing.engine import create_engine

MASTRA, MASTRA_CONV = "mastra-multi-turn.json", "thread-mastra"
HAYSTACK, HAYSTACK_CONV = "haystack-multi-turn.json", "conv-haystack"
REGEX = r"weather in (?P<city>\w+) and the time in (?P<place>\w+)"


def templated(expected: list[dict[str, Any]]) -> list[dict[str, Any]]:
    reference = copy.deepcopy(expected)
    reference[0]["args"]["city"] = "{city}"
    reference[1]["args"]["timezone"] = "Asia/{place}"
    return reference


def template_values(db_url: str, conv: str) -> list[Any]:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                select(evaluations.c.details).where(
                    evaluations.c.conversation_id == conv, evaluations.c.is_current
                )
            ).all()
        return [d.get("template_values") for (d,) in rows]
    finally:
        engine.dispose()


@pytest.mark.parametrize("grpc", [False, True], ids=["http", "grpc"])
def test_rules_match_recorded_conversations_and_fill_templates(db_url: str, grpc: bool) -> None:
    mastra = load_recording(RECORDED / MASTRA)
    haystack = load_recording(RECORDED / HAYSTACK)
    specific = templated(mastra[2])
    plain = copy.deepcopy(haystack[2])
    plain[2]["args"]["party_size"] = 5  # the plainer rule expects another party size
    import_refs(
        db_url,
        ExpectationData(
            "travel-agent-weather",
            specific,
            match={
                "user_input": {"regex": REGEX},
                "attributes": {"gen_ai.agent.name": "travel-agent", "service.name": "mastra-app"},
            },
        ),
        ExpectationData("any-weather", plain, match={"user_input": {"regex": r"weather in"}}),
    )
    with pipeline_server(db_url) as srv:
        replay(srv, mastra[0], mastra[1], grpc=grpc)
        replay(srv, haystack[0], haystack[1], grpc=grpc)
        rows = wait_scored(db_url, [MASTRA_CONV, HAYSTACK_CONV])
        scores = {c: current_scores(db_url, c) for c in (MASTRA_CONV, HAYSTACK_CONV)}

    assert rows[MASTRA_CONV]["expectation_id"] == "travel-agent-weather"
    assert rows[MASTRA_CONV]["warning"] is None  # no tie: one rule is more specific
    filled = copy.deepcopy(specific)
    filled[0]["args"]["city"], filled[1]["args"]["timezone"] = "Paris", "Asia/Tokyo"
    assert filled == mastra[2]
    for conv, (recording, reference) in {
        MASTRA_CONV: (mastra, filled),
        HAYSTACK_CONV: (haystack, plain),
    }.items():
        names = iter(c["name"] for c in recording[2])
        turns = [[{**c, "name": next(names)} for c in step] for turn in fc.TURNS for step in turn]
        assert rows[conv]["status"] == "scored", rows[conv]
        assert scores[conv] == ragas_scores(ragas_sample(fc.QUESTION_1, turns, reference)), conv
    assert scores[MASTRA_CONV] == {"tool_call_accuracy": 1.0, "tool_call_f1": 1.0}
    assert rows[HAYSTACK_CONV]["expectation_id"] == "any-weather"
    assert scores[HAYSTACK_CONV]["tool_call_accuracy"] == 0.875  # one of 8 arguments differs
    assert template_values(db_url, MASTRA_CONV) == [{"{city}": "Paris", "{place}": "Tokyo"}] * 2
    assert template_values(db_url, HAYSTACK_CONV) == [None, None]


def test_optional_calls_alternatives_and_named_comparators_through_serve(db_url: str) -> None:
    spans, logs, expected = load_recording(RECORDED / HAYSTACK)
    reference = copy.deepcopy(expected)
    reference[2]["args"]["party_size"] = {"any_of": [2, 4]}
    reference[3]["args"]["currency"] = {"compare": "normalized", "value": " jpy"}
    reference.insert(2, {"name": "check_availability", "args": {}, "optional": True})
    import_refs(
        db_url,
        ExpectationData("haystack-optional", reference, match={"conversation_id": HAYSTACK_CONV}),
    )
    with pipeline_server(db_url) as srv:
        replay(srv, spans, logs)
        rows = wait_scored(db_url, [HAYSTACK_CONV])
        scores = current_scores(db_url, HAYSTACK_CONV)
    names = iter(c["name"] for c in expected)
    turns = [[{**c, "name": next(names)} for c in step] for turn in fc.TURNS for step in turn]
    assert rows[HAYSTACK_CONV]["status"] == "scored"
    assert scores == ragas_scores(ragas_sample(fc.QUESTION_1, turns, reference))
    # F1 compares the value " jpy" by equality: three of four calls found
    assert scores == {"tool_call_accuracy": 1.0, "tool_call_f1": 0.75}
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            readings = [
                d["reading"]
                for (d,) in conn.execute(
                    select(evaluations.c.details).where(
                        evaluations.c.conversation_id == HAYSTACK_CONV
                    )
                )
            ]
    finally:
        engine.dispose()
    assert readings == [{"optional_skipped": [2], "any_of": {"3.party_size": 1}}] * 2
