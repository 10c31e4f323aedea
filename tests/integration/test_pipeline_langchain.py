"""LangChain (fake chat model, real tools) under OpenInference and OpenLLMetry → OTLP →
``toolscore serve`` → evaluation rows equal to the scorer on the equivalent Ragas sample.

The agent runs in a fresh process per instrumentation (instrumentors patch LangChain globally)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.collector.pipeline.e2e import (
    current_scores,
    import_refs,
    pipeline_server,
    ragas_sample,
    ragas_scores,
    wait_scored,
)
from toolscore.storage.expectations.repository import ExpectationData

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.collector.pipeline.langchain_otlp_app"
QUESTION = "What's the weather in Paris and the time in Tokyo?"
WEATHER = {"name": "get_weather", "args": {"city": "Paris"}}
TIME = {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}}
REFERENCE = [WEATHER, {"name": "get_time", "args": {"timezone": "Europe/Paris"}}]


@pytest.mark.parametrize("mode", ["openinference", "openllmetry"])
def test_langchain_parallel_calls_over_two_turns(db_url: str, mode: str) -> None:
    session = f"lc-{mode}"
    import_refs(
        db_url,
        ExpectationData(
            id="lc", reference_tool_calls=REFERENCE, match={"conversation_id": session}
        ),
    )
    with pipeline_server(db_url, settle_s=2.0) as srv:
        subprocess.run(
            [sys.executable, "-m", APP, mode, srv.http_url, session],
            cwd=ROOT,
            check=True,
            timeout=300,
        )
        rows = wait_scored(db_url, [session])
    assert rows[session]["status"] == "scored"
    expected = ragas_scores(ragas_sample(QUESTION, [[WEATHER, TIME], [WEATHER]], REFERENCE))
    assert current_scores(db_url, session) == expected
