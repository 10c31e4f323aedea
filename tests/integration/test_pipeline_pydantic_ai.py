"""Pydantic AI agents (scripted ``FunctionModel``) → OTLP → ``toolscore serve`` → evaluation rows.

Each score must equal the scorer's result on the equivalent Ragas sample written from the script.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from opentelemetry.sdk.trace import TracerProvider
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.instrumented import InstrumentationSettings
from sqlalchemy import func, select

from tests.collector.pipeline.e2e import (
    conversation,
    current_scores,
    import_refs,
    otlp_provider,
    pipeline_server,
    ragas_sample,
    ragas_scores,
    wait_scored,
)
from tests.collector.reconstruction.conventions.test_live_pydantic_ai import (
    QUESTION,
    call,
    turn_based,
    weather_agent,
)
from toolscore.storage.conversations.tables import evaluations, tool_calls
from toolscore.storage.expectations.repository import ExpectationData
from toolscore.storage.plumbing.engine import create_engine

WEATHER = {"name": "get_weather", "args": {"city": "Paris"}}
TIME = {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}}
REFERENCE = [WEATHER, {"name": "get_time", "args": {"timezone": "Europe/Paris"}}]


@pytest.fixture
def instrument() -> Iterator[list[TracerProvider]]:
    """Instrument every Agent with the provider the test appends (restored afterwards)."""
    providers: list[TracerProvider] = []
    yield providers
    Agent.instrument_all(False)
    for p in providers:
        p.shutdown()


def use(providers: list[TracerProvider], provider: TracerProvider) -> TracerProvider:
    providers.append(provider)
    Agent.instrument_all(InstrumentationSettings(tracer_provider=provider))
    return provider


def parallel_script() -> Any:
    return turn_based(
        [
            ModelResponse(
                parts=[
                    call("get_weather", '{"city": "Paris"}', "w1"),
                    call("get_time", {"timezone": "Asia/Tokyo"}, "t1"),
                ]
            ),
            ModelResponse(parts=[TextPart("18C and 09:00")]),
        ]
    )


def test_parallel_calls_named_by_the_apps_root_span(
    db_url: str, instrument: list[TracerProvider]
) -> None:
    """The app's own root span carries the reference id; the agent's spans the conversation id."""
    import_refs(db_url, ExpectationData(id="weather-paris", reference_tool_calls=REFERENCE))
    with pipeline_server(db_url) as srv:
        provider = use(instrument, otlp_provider(srv))
        tracer = provider.get_tracer("my.app")
        with tracer.start_as_current_span(
            "handle request", attributes={"toolscore.reference.id": "weather-paris"}
        ):
            weather_agent(parallel_script()).run_sync(QUESTION, conversation_id="conv-par")
        provider.force_flush()
        rows = wait_scored(db_url, ["conv-par"])
        scores = current_scores(db_url, "conv-par")

    assert rows["conv-par"]["status"] == "scored"
    assert rows["conv-par"]["expectation_id"] == "weather-paris"
    expected = ragas_scores(ragas_sample(QUESTION, [[WEATHER, TIME]], REFERENCE))
    assert scores == expected
    assert 0 < expected["tool_call_accuracy"] < 1


def test_multi_turn_then_a_late_turn_rescores_as_a_new_revision(
    db_url: str, instrument: list[TracerProvider]
) -> None:
    reference = [WEATHER, TIME]
    import_refs(
        db_url,
        ExpectationData(
            id="two-turns", reference_tool_calls=reference, match={"conversation_id": "chat-7"}
        ),
    )
    script = turn_based(
        [
            ModelResponse(parts=[call("get_weather", {"city": "Paris"}, "c1")]),
            ModelResponse(parts=[TextPart("18C")]),
        ],
        [
            ModelResponse(parts=[call("get_time", {"timezone": "Asia/Tokyo"}, "c2")]),
            ModelResponse(parts=[TextPart("09:00")]),
        ],
        [
            ModelResponse(parts=[call("get_weather", {"city": "Rome"}, "c3")]),
            ModelResponse(parts=[TextPart("20C")]),
        ],
    )
    agent = weather_agent(script)
    with pipeline_server(db_url, settle_s=2.5) as srv:  # the two turns form one scoring
        provider = use(instrument, otlp_provider(srv))
        first = agent.run_sync(QUESTION, conversation_id="chat-7")
        second = agent.run_sync(
            "And the time in Tokyo?", message_history=first.all_messages(), conversation_id="chat-7"
        )
        provider.force_flush()
        wait_scored(db_url, ["chat-7"])
        before = current_scores(db_url, "chat-7")

        agent.run_sync("And Rome?", message_history=second.all_messages(), conversation_id="chat-7")
        provider.force_flush()
        row = wait_scored(db_url, ["chat-7"], revision=2)["chat-7"]
        after = current_scores(db_url, "chat-7")

    assert before == ragas_scores(ragas_sample(QUESTION, [[WEATHER], [TIME]], reference))
    rome = {"name": "get_weather", "args": {"city": "Rome"}}
    assert after == ragas_scores(ragas_sample(QUESTION, [[WEATHER], [TIME], [rome]], reference))
    assert before != after
    assert row["revision"] == 2 and row["status"] == "scored"
    engine = create_engine(db_url)
    with engine.connect() as conn:
        history = conn.execute(
            select(evaluations.c.revision, evaluations.c.is_current, func.count())
            .where(evaluations.c.conversation_id == "chat-7")
            .group_by(evaluations.c.revision, evaluations.c.is_current)
            .order_by(evaluations.c.revision)
        ).all()
        calls = conn.execute(
            select(tool_calls.c.name)
            .where(tool_calls.c.conversation_id == "chat-7", tool_calls.c.revision == 2)
            .order_by(tool_calls.c.position)
        ).scalars()
        names = list(calls)
    engine.dispose()
    assert [tuple(h) for h in history] == [(1, False, 2), (2, True, 2)]
    assert names == ["get_weather", "get_time", "get_weather"]


def test_a_conversation_without_expectation_is_unmatched(
    db_url: str, instrument: list[TracerProvider]
) -> None:
    with pipeline_server(db_url) as srv:
        provider = use(instrument, otlp_provider(srv, grpc=True))
        weather_agent(parallel_script()).run_sync(QUESTION, conversation_id="nobody")
        provider.force_flush()
        wait_scored(db_url, ["nobody"])
    row = conversation(db_url, "nobody")
    assert row is not None and row["status"] == "unmatched"
    assert current_scores(db_url, "nobody") == {}


def test_restart_between_ingest_and_scoring(db_url: str, instrument: list[TracerProvider]) -> None:
    import_refs(db_url, ExpectationData(id="r", reference_tool_calls=[WEATHER, TIME]))
    with pipeline_server(db_url, settle_s=30, root_idle_s=30) as srv:
        provider = use(instrument, otlp_provider(srv))
        tracer = provider.get_tracer("my.app")
        with tracer.start_as_current_span("req", attributes={"toolscore.reference.id": "r"}):
            weather_agent(parallel_script()).run_sync(QUESTION, conversation_id="crash")
        provider.force_flush()  # acknowledged = committed; then the server goes away unscored
    row = conversation(db_url, "crash")
    assert row is not None and row["revision"] == 0 and row["needs_scoring"]

    with pipeline_server(db_url, settle_s=0.5):
        rows = wait_scored(db_url, ["crash"])
    assert rows["crash"]["status"] == "scored"
    assert current_scores(db_url, "crash") == ragas_scores(
        ragas_sample(QUESTION, [[WEATHER, TIME]], [WEATHER, TIME])
    )
