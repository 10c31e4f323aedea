"""LangChain (fake chat model, real tools) under OpenInference and OpenLLMetry → OTLP →
``toolscore serve`` → evaluation rows equal to the scorer on the equivalent Ragas sample."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("langchain_core")

from langchain_core.messages import AIMessage
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.instrumentation.langchain import LangchainInstrumentor as TraceloopInstrumentor

from storage.expectations import ExpectationData
from tests.collector.conventions.test_live_langchain import QUESTION, run_agent
from tests.collector.pipeline.e2e import (
    current_scores,
    import_refs,
    otlp_provider,
    pipeline_server,
    ragas_sample,
    ragas_scores,
    wait_scored,
)
from tests.integration.serve_harness import RunningServer

WEATHER = {"name": "get_weather", "args": {"city": "Paris"}}
TIME = {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}}
REFERENCE = [WEATHER, {"name": "get_time", "args": {"timezone": "Europe/Paris"}}]


@pytest.fixture(params=["openinference", "openllmetry"])
def instrumentation(request: pytest.FixtureRequest) -> Iterator[Any]:
    """Returns ``instrument(server) -> provider``; uninstruments afterwards."""
    instrumentor: Any = (
        LangChainInstrumentor() if request.param == "openinference" else TraceloopInstrumentor()
    )
    providers = []

    def instrument(srv: RunningServer) -> Any:
        provider = otlp_provider(srv, service=f"langchain-{request.param}")
        providers.append(provider)
        instrumentor.instrument(tracer_provider=provider)
        return provider

    yield instrument
    instrumentor.uninstrument()
    for p in providers:
        p.shutdown()


def test_langchain_parallel_calls_over_two_turns(db_url: str, instrumentation: Any) -> None:
    import_refs(
        db_url,
        ExpectationData(
            id="lc", reference_tool_calls=REFERENCE, match={"conversation_id": "lc-session"}
        ),
    )
    responses = [
        AIMessage(
            "",
            tool_calls=[
                {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_w1"},
                {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}, "id": "call_t1"},
            ],
        ),
        AIMessage("18C and 09:00"),
        AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "w2"}]),
        AIMessage("still 18C"),
    ]
    with pipeline_server(db_url) as srv:
        provider = instrumentation(srv)
        run_agent(responses, [QUESTION, "And now?"], session="lc-session")
        provider.force_flush()
        rows = wait_scored(db_url, ["lc-session"])
    assert rows["lc-session"]["status"] == "scored"
    expected = ragas_scores(ragas_sample(QUESTION, [[WEATHER, TIME], [WEATHER]], REFERENCE))
    assert current_scores(db_url, "lc-session") == expected
