"""Not evaluable is not zero, end to end: real instrumentations with content capture off → OTLP →
``toolscore serve`` (SQLite and PostgreSQL) → evaluation rows, ``toolscore show``,
``toolscore report`` and the write-back.

Calls whose arguments were not recorded keep their names; metrics that compare arguments give no
score, labelled ``not_evaluated`` with how to turn the capture on for the library that produced
the span; a metric that ignores arguments still scores. Sources: a live Pydantic AI agent with
``include_content=False``, the real openai client under OpenLLMetry (events mode) with
``TRACELOOP_TRACE_CONTENT=false`` (recorded in a subprocess, then sent over OTLP), and the OpenAI
Agents SDK without sensitive data under Logfire and OpenInference (committed recordings).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.instrumented import InstrumentationSettings
from sqlalchemy import select

from tests.collector.export.sink import GrpcSink, attrs
from tests.collector.otlp_replay import relabel, replay
from tests.collector.pipeline.e2e import import_refs, otlp_provider, wait_scored
from tests.collector.reconstruction.conventions.openai_agents_app import seen
from tests.collector.reconstruction.conventions.test_live_openai import (
    SCENARIOS as OPENAI_SCENARIOS,
)
from tests.collector.reconstruction.conventions.test_live_openai import FakeOpenAI, server  # noqa: F401
from tests.collector.reconstruction.conventions.test_live_pydantic_ai import (
    QUESTION,
    call,
    turn_based,
    weather_agent,
)
from tests.collector.reconstruction.conventions.test_logfire_openai_agents import (
    GROUP,
    recording_path,
)
from tests.collector.recording import load_recording
from tests.integration.serve_harness import RunningServer, server_settings
from toolscore.collector.export.extension import export_extension
from toolscore.collector.export.settings import resolve_export_settings
from toolscore.collector.pipeline.extension import pipeline_extension
from toolscore.collector.pipeline.options import PipelineOptions
from toolscore.storage.conversations.tables import evaluations, tool_calls
from toolscore.storage.expectations.repository import ExpectationData
from toolscore.storage.plumbing.engine import create_engine

ROOT = Path(__file__).resolve().parents[2]
CONFIG = """
metrics:
  tool_call_accuracy: {type: tool_call_accuracy}
  tool_call_f1: {type: tool_call_f1}
  names_only: {type: tool_call_accuracy, args: ignore}
"""
WEATHER = {"name": "get_weather", "args": {"city": "Paris"}}
TIME = {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}}
PYDANTIC = "conv-pydantic-nocontent"
OPENLLMETRY = "conv-parallel"  # openai_app names its conversations conv-<scenario>
AGENTS_OPENINFERENCE = "agents-openinference"  # its recording relabelled


@pytest.fixture
def instrument() -> Iterator[list[TracerProvider]]:
    providers: list[TracerProvider] = []
    yield providers
    Agent.instrument_all(False)
    for p in providers:
        p.shutdown()


def _server(db_url: str, config: Path, sink: GrpcSink) -> RunningServer:
    settings = resolve_export_settings(
        endpoint=sink.endpoint, protocol="grpc", timeout_s=2.0, environ={}, poll_interval_s=0.2
    )
    assert settings is not None
    pipeline = pipeline_extension(PipelineOptions(settle_s=1.0, root_idle_s=0.3))
    return RunningServer(
        server_settings(db_url, config_path=config), [pipeline, export_extension(settings, {})]
    )


def _openllmetry_nocontent(fake: FakeOpenAI, outdir: Path) -> Path:
    """The parallel scenario through the real openai client under OpenLLMetry (events mode)
    with TRACELOOP_TRACE_CONTENT=false: the recording's path."""
    questions, answers, _ = OPENAI_SCENARIOS["parallel"]
    with fake.lock:
        fake.script[:] = list(answers)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.collector.reconstruction.conventions.openai_app",
            "openllmetry-events",
            fake.url,
            str(outdir),
            f"parallel={questions[0]}",
        ],
        cwd=ROOT,
        check=True,
        timeout=300,
        env={**os.environ, "TRACELOOP_TRACE_CONTENT": "false"},
    )
    return outdir / "parallel.json"


def _agents(mode: str) -> tuple[Any, Any, list[dict[str, Any]]]:
    spans, logs, _ = load_recording(recording_path(mode, "parallel"))
    return spans, logs, seen(mode, "parallel")


def _rows(db_url: str, table: Any, conv: str) -> list[dict[str, Any]]:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            query = select(table).where(table.c.conversation_id == conv)
            return [dict(r) for r in conn.execute(query).mappings()]
    finally:
        engine.dispose()


def _details(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value


def _command(*argv: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "toolscore", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_unrecorded_arguments_are_not_evaluated_everywhere(
    db_url: str,
    tmp_path: Path,
    instrument: list[TracerProvider],
    server: FakeOpenAI,  # noqa: F811
) -> None:
    config = tmp_path / "scoring.yaml"
    config.write_text(CONFIG)
    llmetry = load_recording(_openllmetry_nocontent(server, tmp_path))
    logfire = _agents("responses-nocontent")
    oi_spans, oi_logs, oi_expected = _agents("openinference-responses-nocontent")
    openinference = relabel(oi_spans, oi_logs, GROUP["parallel"], AGENTS_OPENINFERENCE)
    # conversation -> (a phrase of the capture hint its reason must give, reference calls)
    cases = {
        PYDANTIC: ("include_content=True", [WEATHER, TIME]),
        OPENLLMETRY: ("TRACELOOP_TRACE_CONTENT=true", OPENAI_SCENARIOS["parallel"][2]),
        GROUP["parallel"]: ("trace_include_sensitive_data=True", logfire[2]),
        AGENTS_OPENINFERENCE: ("trace_include_sensitive_data=True", oi_expected),
    }
    import_refs(
        db_url,
        *(
            ExpectationData(id=conv, reference_tool_calls=ref, match={"conversation_id": conv})
            for conv, (_, ref) in cases.items()
        ),
    )
    sink = GrpcSink().start()
    try:
        with _server(db_url, config, sink) as srv:
            provider = otlp_provider(srv)
            instrument.append(provider)
            settings = InstrumentationSettings(tracer_provider=provider, include_content=False)
            Agent.instrument_all(settings)
            script = turn_based(
                [
                    ModelResponse(
                        parts=[
                            call("get_weather", {"city": "Paris"}, "w1"),
                            call("get_time", {"timezone": "Asia/Tokyo"}, "t1"),
                        ]
                    ),
                    ModelResponse(parts=[TextPart("18C and 09:00")]),
                ]
            )
            weather_agent(script).run_sync(QUESTION, conversation_id=PYDANTIC)
            provider.force_flush()
            replay(srv, llmetry[0], llmetry[1])
            replay(srv, logfire[0], logfire[1], grpc=True)
            replay(srv, *openinference)
            rows = wait_scored(db_url, list(cases))
            evaluated = {conv: _rows(db_url, evaluations, conv) for conv in cases}
            total = sum(len(v) for v in evaluated.values())
            deadline = time.monotonic() + 30
            while len(sink.received.spans()) < total:
                assert time.monotonic() < deadline, "write-back timed out"
                time.sleep(0.1)
    finally:
        sink.stop()

    exported = {
        attrs(s.attributes)["toolscore.evaluation.id"]: attrs(s.attributes)
        for _res, _scope, s in sink.received.spans()
    }
    for conv, stored in evaluated.items():
        hint = cases[conv][0]
        assert rows[conv]["status"] == "scored", rows[conv]
        by_metric = {r["metric"]: r for r in stored}
        assert set(by_metric) == {"tool_call_accuracy", "tool_call_f1", "names_only"}
        for metric in ("tool_call_accuracy", "tool_call_f1"):
            row = by_metric[metric]
            details = _details(row["details"])
            assert (row["score"], row["error"], details["label"]) == (None, None, "not_evaluated")
            assert hint in details["reason"], details["reason"]
            sent = exported[row["id"]]
            assert sent["gen_ai.evaluation.score.label"] == "not_evaluated"
            assert "gen_ai.evaluation.score.value" not in sent
            assert hint in sent["gen_ai.evaluation.explanation"]
        # names only: the calls' names are all it compares, and they are right
        assert by_metric["names_only"]["score"] == 1.0
        assert exported[by_metric["names_only"]["id"]]["gen_ai.evaluation.score.label"] == "pass"
        calls = _rows(db_url, tool_calls, conv)
        assert calls and all(c["arguments"] is None and c["arguments_raw"] is None for c in calls)

    shown = _command("show", PYDANTIC, "--db", db_url)
    assert "get_weather(<arguments not recorded>)" in shown
    assert "tool_call_accuracy  not_evaluated" in shown
    assert "include_content=True" in shown
    data = json.loads(_command("show", PYDANTIC, "--db", db_url, "--json"))
    labels = {e["metric"]: _details(e["details"]).get("label") for e in data["evaluations"]}
    assert labels == {
        "tool_call_f1": "not_evaluated",
        "tool_call_accuracy": "not_evaluated",
        "names_only": None,
    }
    today = dt.datetime.now(dt.UTC).date().isoformat()
    report = _command("report", "--db", db_url, "--since", today)
    assert "not evaluated: the arguments of 2 of 2 call(s) were not recorded" in report
    assert f"not_evaluated  {PYDANTIC}" in report  # the worst list's score column
