"""``toolscore refs promote``: a stored conversation's actual calls become an expectation, printed
in the ``refs import`` format or imported; a rebuild with warnings is refused unless forced.
A real process on a real database (SQLite file and PostgreSQL)."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import Engine, select

from tests.collector.commands.test_refs_command import toolscore
from tests.collector.pipeline.test_score import NOW, fixture_spans, store
from tests.collector.recording import RECORDED, load_recording
from toolscore.collector.expectations.files import parse_refs_text
from toolscore.collector.expectations.promote import PromoteError, promote, promote_conversation
from toolscore.collector.pipeline.assign import AssignConfig, assign_spans
from toolscore.collector.pipeline.score import score_conversation
from toolscore.scorer import default_config
from toolscore.storage.conversations.tables import conversations
from toolscore.storage.telemetry.spans import store_spans

QUESTION = "What's the weather in Paris and the time in Tokyo?"


def test_promote_prints_an_importable_expectation(engine: Engine, db_url: str) -> None:
    spans, predicted = fixture_spans()
    conv = store(engine, spans)
    result = toolscore("refs", "promote", conv, "--match", "regex", "--id", "weather", db=db_url)
    assert result.returncode == 0, result.stderr
    (item,) = parse_refs_text(result.stdout, "yaml")
    assert item.id == "weather"
    assert item.reference_tool_calls == predicted
    assert item.user_input == QUESTION
    assert item.match is not None
    assert re.search(item.match["user_input"]["regex"], f"  {QUESTION.replace(' ', '  ')} ")
    assert not re.search(item.match["user_input"]["regex"], QUESTION + " And Lyon?")
    with engine.connect() as conn:  # printing imports nothing
        assert score_conversation(conn, conv, default_config(), now=NOW).status == "unmatched"  # type: ignore[union-attr]
        conn.rollback()


def test_promote_and_import_then_the_conversation_scores_1(engine: Engine, db_url: str) -> None:
    spans, _ = fixture_spans()
    conv = store(engine, spans)
    result = toolscore("refs", "promote", conv, "--match", "user_input", "--import", db=db_url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["created", f"promoted-{conv}", "v1"]
    outcome = score_conversation(engine, conv, default_config(), now=NOW)
    assert outcome is not None and outcome.expectation_id == f"promoted-{conv}"
    assert outcome.scores == {"tool_call_accuracy": 1.0, "tool_call_f1": 1.0}


def test_a_rebuild_with_warnings_is_refused_unless_forced(engine: Engine, db_url: str) -> None:
    spans, _logs, _ = load_recording(RECORDED / "openai-openinference-malformed.json")
    with engine.begin() as conn:
        store_spans(conn, spans, 10**18)
        assign_spans(conn, spans, received_at_ns=10**18, config=AssignConfig())
        conv = conn.execute(select(conversations.c.id)).scalar_one()
    refused = toolscore("refs", "promote", conv, db=db_url)
    assert refused.returncode != 0
    assert "rebuilt with warnings (--force to promote it anyway)" in refused.stderr
    assert "call #0 get_weather: arguments could not be fully decoded" in refused.stderr
    forced = toolscore("refs", "promote", conv, "--force", db=db_url)
    assert forced.returncode == 0, forced.stderr
    assert "warning (forced): call #0 get_weather" in forced.stderr
    (item,) = parse_refs_text(forced.stdout, "yaml")
    assert item.match == {"conversation_id": conv}


def test_the_use_case_names_what_it_cannot_do(engine: Engine) -> None:
    with engine.connect() as conn, pytest.raises(PromoteError, match="no conversation 'nope'"):
        promote(conn, "nope")


def test_the_front_end_helper_returns_the_yaml_or_the_warnings(engine: Engine) -> None:
    spans, predicted = fixture_spans()
    conv = store(engine, spans)
    (item,) = parse_refs_text(promote_conversation(engine, conv, match="user_input"), "yaml")
    assert item.reference_tool_calls == predicted and item.match == {"user_input": QUESTION}
    with pytest.raises(PromoteError, match="unknown match 'fuzzy'"):
        promote_conversation(engine, conv, match="fuzzy")
