"""The ``openai`` client against a local fake server, under OpenLLMetry (content on spans, or in
log events) and OpenInference → OTLP traces and logs → ``toolscore serve`` → evaluation rows.

The app runs in a fresh process per instrumentation (instrumentors patch ``openai`` globally)."""

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
from tests.collector.reconstruction.conventions.test_live_openai import (
    QUESTION,
    FakeOpenAI,
    completion,
    server,
)
from toolscore.storage.expectations.repository import ExpectationData

__all__ = ["server"]  # the fake OpenAI endpoint fixture

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.collector.pipeline.openai_otlp_app"
WEATHER = {"name": "get_weather", "args": {"city": "Paris"}}
TIME = {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}}


@pytest.mark.parametrize("mode", ["openllmetry", "openllmetry-events", "openinference"])
def test_openai_parallel_calls(db_url: str, server: FakeOpenAI, mode: str) -> None:
    conv_id = f"conv-openai-{mode}"
    import_refs(
        db_url,
        ExpectationData(id="oa", reference_tool_calls=[TIME], match={"conversation_id": conv_id}),
    )
    with server.lock:
        server.script[:] = [
            completion(
                ("get_weather", '{"city":"Paris"}', "call_w1"),
                ("get_time", '{"timezone":"Asia/Tokyo"}', "call_t2"),
            ),
            completion(text="18C and 09:00"),
        ]
    with pipeline_server(db_url) as srv:
        subprocess.run(
            [sys.executable, "-m", APP, mode, server.url, srv.http_url, conv_id, QUESTION],
            cwd=ROOT,
            check=True,
            timeout=300,
        )
        rows = wait_scored(db_url, [conv_id])
    assert rows[conv_id]["status"] == "scored"
    expected = ragas_scores(ragas_sample(QUESTION, [[WEATHER, TIME]], [TIME]))
    assert current_scores(db_url, conv_id) == expected
    assert expected["tool_call_f1"] == 0.6667
