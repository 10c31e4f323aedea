"""Scoring stored conversations against rule expectations: regex, attributes, priority, ties,
templates (docs/expectations.md, "Rules" and "Templated references")."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, select

from tests.collector.pipeline.test_score import (
    NOW,
    current_scores,
    expect,
    fixture_spans,
    offline_scores,
    store,
)
from toolscore.collector.pipeline.score import score_conversation
from toolscore.scorer import default_config
from toolscore.storage.conversations.tables import conversations, evaluations
from toolscore.storage.expectations.repository import ExpectationData

# the fixture's first user message: "What's the weather in Paris and the time in Tokyo?"
REGEX = r"weather in (?P<city>\w+) and the time in (?P<place>\w+)"
TEMPLATED = [
    {"name": "get_weather", "args": {"city": "{city}"}},
    {"name": "get_time", "args": {"timezone": "Asia/{place}"}},
]


def row(engine: Engine, conv_id: str) -> dict[str, Any]:
    with engine.connect() as conn:
        found = conn.execute(select(conversations).where(conversations.c.id == conv_id))
        return dict(found.mappings().one())


def details(engine: Engine, conv_id: str) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(evaluations.c.details, evaluations.c.expectation_version).where(
                evaluations.c.conversation_id == conv_id, evaluations.c.is_current
            )
        ).all()
    return [{**d, "version": v} for d, v in rows]


def test_a_regex_rule_fills_the_templates_and_records_their_values(engine: Engine) -> None:
    spans, predicted = fixture_spans()
    conv = store(engine, spans)
    expect(
        engine,
        ExpectationData(
            "weather-rule", TEMPLATED, match={"user_input": {"regex": REGEX}, "priority": 2}
        ),
    )
    outcome = score_conversation(engine, conv, default_config(), now=NOW)
    assert outcome is not None and outcome.status == "scored"
    assert (outcome.expectation_id, outcome.expectation_version) == ("weather-rule", 1)
    assert current_scores(engine, conv) == offline_scores(predicted, predicted)
    for d in details(engine, conv):
        assert d["template_values"] == {"{city}": "Paris", "{place}": "Tokyo"}
        assert d["version"] == 1


def test_attributes_of_spans_and_resources_must_all_hold(engine: Engine) -> None:
    spans, predicted = fixture_spans()
    conv = store(engine, spans)
    expect(
        engine,
        ExpectationData(
            "wrong-service",
            predicted,
            match={"attributes": {"service.name": "billing", "gen_ai.agent.name": "WeatherAgent"}},
        ),
    )
    outcome = score_conversation(engine, conv, default_config(), now=NOW)
    assert outcome is not None and outcome.status == "unmatched"
    assert "none of the 1 rule expectations holds for it" in (outcome.unmatched_reason or "")
    expect(
        engine,
        ExpectationData(
            "weather-agent",
            predicted,
            match={
                "attributes": {
                    "service.name": ["weather-agent", "other"],  # a resource attribute
                    "gen_ai.agent.name": {"regex": "^Weather"},  # a span attribute
                }
            },
        ),
    )
    outcome = score_conversation(engine, conv, default_config(), now=NOW)
    assert outcome is not None and outcome.expectation_id == "weather-agent"
    assert outcome.scores == offline_scores(predicted, predicted)


def test_todays_forms_keep_their_precedence_over_rules(engine: Engine) -> None:
    spans, predicted = fixture_spans()
    conv = store(engine, spans)
    expect(
        engine,
        ExpectationData(
            "rule", predicted, match={"user_input": {"regex": "weather"}, "priority": 100}
        ),
        ExpectationData(
            "exact",
            predicted,
            match={"user_input": "what's the weather in paris and the time in tokyo?"},
        ),
    )
    outcome = score_conversation(engine, conv, default_config(), now=NOW)
    assert outcome is not None and outcome.expectation_id == "exact"
    expect(engine, ExpectationData("named", predicted, match={"conversation_id": conv}))
    outcome = score_conversation(engine, conv, default_config(), now=NOW)
    assert outcome is not None and outcome.expectation_id == "named"


def test_a_tie_is_reported_on_the_conversation(engine: Engine) -> None:
    spans, predicted = fixture_spans()
    conv = store(engine, spans)
    expect(
        engine,
        ExpectationData("twin-b", predicted, match={"user_input": {"regex": "Paris"}}),
        ExpectationData("twin-a", predicted, match={"user_input": {"regex": "Tokyo"}}),
        ExpectationData(
            "narrow-but-low",
            predicted,
            match={
                "user_input": {"regex": "Tokyo"},
                "attributes": {"gen_ai.agent.name": "WeatherAgent"},
                "priority": -1,
            },
        ),
    )
    outcome = score_conversation(engine, conv, default_config(), now=NOW)
    assert outcome is not None and outcome.expectation_id == "twin-a"
    warning = row(engine, conv)["warning"]
    assert "'twin-a', 'twin-b' tie on priority 0 and specificity 1" in warning
    # a new version (more specific) is seen by the next scoring: the index follows imports
    expect(
        engine,
        ExpectationData(
            "twin-b",
            predicted,
            match={
                "user_input": {"regex": "Paris"},
                "attributes": {"service.name": "weather-agent"},
            },
        ),
    )
    outcome = score_conversation(engine, conv, default_config(), now=NOW)
    assert outcome is not None and (outcome.expectation_id, outcome.expectation_version) == (
        "twin-b",
        2,
    )
    assert row(engine, conv)["warning"] is None


def test_a_template_without_a_value_is_an_error_not_a_literal(engine: Engine) -> None:
    spans, _ = fixture_spans()
    conv = store(engine, spans)
    expect(
        engine,
        ExpectationData(
            "named",
            TEMPLATED,
            match={"conversation_id": conv, "user_input": {"regex": r"train to (?P<city>\w+)"}},
        ),
    )
    # matched by its conversation id, but its regex does not match the first user message
    outcome = score_conversation(engine, conv, default_config(), now=NOW)
    assert outcome is not None and outcome.status == "error"
    assert "{city}: the group 'city' has no value" in (outcome.error or "")
