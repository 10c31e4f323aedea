"""OpenAI Agents SDK agents under Logfire (or OpenInference) → standard OTLP exporter →
``toolscore serve`` → scores.

The agents run in a fresh process (tests/collector/reconstruction/conventions/openai_agents_app.py:
the
instrumentations are global), with the SDK's Responses model against a scripted local server, or
a scripted ``agents.Model``; spans go through the standard OTLP/HTTP span exporter. The
conversation is the SDK's ``group_id`` (Logfire) or ``session.id`` (OpenInference, set by the app
with ``using_session``). Each score must equal the scorer's result on the equivalent Ragas sample
written from the script (``toolscore score``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("agents")
pytest.importorskip("logfire")
pytest.importorskip("openinference.instrumentation.openai_agents")

from tests.collector.pipeline.e2e import (
    ROOT_IDLE_S,
    SETTLE_S,
    current_scores,
    import_refs,
    ragas_sample,
    ragas_scores,
    wait_scored,
)
from tests.collector.reconstruction.conventions.openai_agents_app import (
    LOOKUP,
    QUESTION,
    SCENARIOS,
    TIME,
    TRANSFER,
    WEATHER,
    seen,
)
from tests.integration.serve_harness import RunningServer, server_settings
from toolscore.collector.pipeline.extension import pipeline_extension
from toolscore.collector.pipeline.options import PipelineOptions
from toolscore.collector.reconstruction.control_calls import ControlCalls
from toolscore.storage.expectations.repository import ExpectationData

APP = "tests.collector.reconstruction.conventions.openai_agents_app"
ROOT = Path(__file__).resolve().parents[2]
PARIS_TIME = {"name": "get_time", "args": {"timezone": "Europe/Paris"}}
REFERENCES = {  # conversation (group id) → reference calls
    "thread-parallel": [WEATHER, PARIS_TIME],
    "thread-multi-turn": [WEATHER, TIME],
    "thread-handoff": [LOOKUP],
}
# the calls the agent makes, per assistant turn, as a user would write the Ragas sample
TURNS = {
    "thread-parallel": [[WEATHER, TIME]],
    "thread-multi-turn": [[WEATHER], [TIME]],
    "thread-handoff": [[LOOKUP, TRANSFER]],
}

INCLUDE_HANDOFFS = ControlCalls.parse(["include=handoff"])  # to score the handoff


def _run(model: str, srv: RunningServer) -> None:
    subprocess.run(
        [sys.executable, "-m", APP, model, f"{srv.http_url}/v1/traces", *SCENARIOS],
        cwd=ROOT,
        check=True,
        timeout=300,
    )


def _server(db_url: str, *, control_calls: ControlCalls = INCLUDE_HANDOFFS) -> RunningServer:
    options = PipelineOptions(
        settle_s=SETTLE_S, root_idle_s=ROOT_IDLE_S, control_calls=control_calls
    )
    return RunningServer(server_settings(db_url), [pipeline_extension(options)])


def _expect_all(db_url: str) -> None:
    import_refs(
        db_url,
        *(
            ExpectationData(id=conv, reference_tool_calls=ref, match={"conversation_id": conv})
            for conv, ref in REFERENCES.items()
        ),
    )


@pytest.mark.parametrize("mode", ["responses", "scripted", "openinference-responses"])
def test_scores_equal_those_of_the_equivalent_ragas_samples(db_url: str, mode: str) -> None:
    _expect_all(db_url)
    with _server(db_url) as srv:
        _run(mode, srv)
        rows = wait_scored(db_url, list(REFERENCES))
        scores = {conv: current_scores(db_url, conv) for conv in REFERENCES}
    turns = dict(TURNS)
    if seen(mode, "handoff") != [LOOKUP, TRANSFER]:  # tool spans only: the handoff is not seen
        turns["thread-handoff"] = [[LOOKUP]]
    for conv, reference in REFERENCES.items():
        assert rows[conv]["status"] == "scored", conv
        assert rows[conv]["expectation_id"] == conv
        assert scores[conv] == ragas_scores(ragas_sample(QUESTION, turns[conv], reference)), conv
    assert scores["thread-multi-turn"] == {"tool_call_accuracy": 1.0, "tool_call_f1": 1.0}
    assert 0 < scores["thread-parallel"]["tool_call_accuracy"] < 1  # a partial score
    handoff_counted = mode != "scripted"  # 2 calls against a reference of 1
    assert (scores["thread-handoff"]["tool_call_accuracy"] == 0) is handoff_counted


@pytest.mark.parametrize("mode", ["responses", "openinference-responses"])
def test_handoffs_left_out_by_the_server_option(db_url: str, mode: str) -> None:
    _expect_all(db_url)
    with _server(db_url, control_calls=ControlCalls()) as srv:  # the default: exclude
        _run(mode, srv)
        wait_scored(db_url, list(REFERENCES))
        scores = current_scores(db_url, "thread-handoff")
    assert scores == ragas_scores(ragas_sample(QUESTION, [[LOOKUP]], [LOOKUP]))
    assert scores == {"tool_call_accuracy": 1.0, "tool_call_f1": 1.0}


def _shown_calls(db_url: str, conversation: str, *options: str) -> list[str]:
    """The tool calls of ``toolscore show --json``'s rebuilt messages, in order."""
    shown = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolscore",
            "show",
            conversation,
            "--db",
            db_url,
            "--json",
            *options,
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    messages = json.loads(shown.stdout)["messages"]
    return [c["name"] for m in messages for c in m.get("tool_calls", [])]


def test_show_rebuilds_messages_with_the_servers_handoff_setting(db_url: str) -> None:
    _expect_all(db_url)
    with _server(db_url, control_calls=ControlCalls()) as srv:
        _run("responses", srv)
        wait_scored(db_url, list(REFERENCES))
    assert _shown_calls(db_url, "thread-handoff") == [LOOKUP["name"]]  # default: exclude
    both = [LOOKUP["name"], TRANSFER["name"]]
    assert _shown_calls(db_url, "thread-handoff", "--control-calls", "include=handoff") == both
