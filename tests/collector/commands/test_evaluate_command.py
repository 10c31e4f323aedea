"""``toolscore evaluate``: OTLP files in, the server's scores out, gated like ``toolscore score``.

The files are written as the OpenTelemetry Collector's ``file`` exporter writes them: one OTLP/JSON
export request per line (hex ids, camelCase keys), from spans made by the real OTel SDK.
"""

from __future__ import annotations

import base64
import gzip
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import requests
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.collector.pipeline.e2e import (
    current_scores,
    genai_agent_trace,
    import_refs,
    pipeline_server,
    wait_scored,
)
from toolscore.storage.expectations.repository import ExpectationData

WEATHER = {"name": "get_weather", "args": {"city": "Paris"}}
TIME = {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}}
REFS = """\
expectations:
  - id: weather
    reference_tool_calls: [{name: get_weather, args: {city: Paris}}]
"""
CONVERSATIONS = {"ev-right": [WEATHER], "ev-extra": [WEATHER, TIME], "ev-none": [TIME]}


def _spans() -> list[ReadableSpan]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("app")
    for conv, calls in CONVERSATIONS.items():
        ref = {"toolscore.reference.id": "weather"} if conv != "ev-none" else {}
        genai_agent_trace(tracer, conv, calls, "weather?", ref)
    return list(exporter.get_finished_spans())


def _otlp_json_line(spans: list[ReadableSpan]) -> str:
    """One request as the Collector's file exporter writes it (OTLP/JSON: hex ids)."""
    obj: Any = json_format.MessageToDict(encode_spans(spans))
    for rs in obj["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(obj)


@pytest.fixture(scope="module")
def recorded() -> list[ReadableSpan]:
    return _spans()


def _files(tmp_path: Path, spans: list[ReadableSpan]) -> tuple[Path, Path]:
    half = len(spans) // 2
    traces = tmp_path / "traces.jsonl"
    traces.write_text(_otlp_json_line(spans[:half]) + "\n\n" + _otlp_json_line(spans[half:]) + "\n")
    refs = tmp_path / "refs.yaml"
    refs.write_text(REFS)
    return traces, refs


def toolscore(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolscore", "evaluate", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _server_scores(db_url: str, spans: list[ReadableSpan]) -> dict[str, dict[str, Any]]:
    import_refs(db_url, ExpectationData(id="weather", reference_tool_calls=[WEATHER]))
    with pipeline_server(db_url) as srv:
        body = encode_spans(spans).SerializeToString()
        headers = {"Content-Type": "application/x-protobuf"}
        assert requests.post(f"{srv.http_url}/v1/traces", data=body, headers=headers).ok
        rows = wait_scored(db_url, list(CONVERSATIONS))
    return {c: {"status": rows[c]["status"], **current_scores(db_url, c)} for c in CONVERSATIONS}


def test_scores_equal_the_servers_on_the_same_spans(
    tmp_path: Path, sqlite_url: str, recorded: list[ReadableSpan]
) -> None:
    traces, refs = _files(tmp_path, recorded)
    result = toolscore(str(traces), "--refs", str(refs))
    assert result.returncode == 0, result.stderr
    rows = {r["id"]: r for r in map(json.loads, result.stdout.splitlines())}
    server = _server_scores(sqlite_url, recorded)
    metrics = ("tool_call_accuracy", "tool_call_f1")
    assert {
        c: {"status": r["status"], **{m: r[m] for m in metrics if r[m] is not None}}
        for c, r in rows.items()
    } == server
    assert rows["ev-right"]["tool_call_accuracy"] == 1.0
    assert rows["ev-extra"]["expectation"] == "weather@1"
    assert rows["ev-none"]["status"] == "unmatched"
    assert "3 conversations (scored, unmatched)" in result.stderr


def test_gzip_files_gates_and_junit(tmp_path: Path, recorded: list[ReadableSpan]) -> None:
    traces, refs = _files(tmp_path, recorded)
    packed = tmp_path / "traces.jsonl.gz"
    packed.write_bytes(gzip.compress(traces.read_bytes()))
    report = tmp_path / "junit.xml"
    failing = toolscore(
        str(packed),
        "--refs",
        str(refs),
        "--fail-under",
        "tool_call_accuracy=0.9",
        "--junit",
        str(report),
    )
    assert failing.returncode == 1
    assert "tool_call_accuracy: mean 0.5000" in failing.stderr and "FAIL" in failing.stderr
    suite = ET.parse(report).getroot()[0]
    assert suite.get("name") == "toolscore evaluate"
    cases = {(c.get("classname"), c.get("name")): c for c in suite.iter("testcase")}
    assert cases[("tool_call_accuracy", "ev-right")].find("failure") is None
    assert cases[("tool_call_accuracy", "ev-extra")].find("failure") is not None
    assert cases[("tool_call_accuracy", "ev-none")].find("error") is not None
    passing = toolscore(str(packed), "--refs", str(refs), "--fail-under", "tool_call_f1=0.5")
    assert passing.returncode == 0, passing.stderr


def test_a_bad_line_is_named(tmp_path: Path, recorded: list[ReadableSpan]) -> None:
    traces, refs = _files(tmp_path, recorded)
    traces.write_text(traces.read_text() + '{"resourceSpans": [{"scopeSpans": 7}]}\n')
    result = toolscore(str(traces), "--refs", str(refs))
    assert result.returncode == 2 and result.stdout == ""
    assert f"{traces}:4:" in result.stderr
    missing = toolscore(str(tmp_path / "nope.jsonl"), "--refs", str(refs))
    assert missing.returncode == 2 and "cannot read" in missing.stderr


def test_control_calls_are_left_out_unless_included_as_for_serve(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    transfer = {"name": "transfer_to_billing", "args": {}}
    ref = {"toolscore.reference.id": "weather"}
    genai_agent_trace(provider.get_tracer("app"), "ev-hand", [WEATHER, transfer], "w?", ref)
    traces, refs = _files(tmp_path, list(exporter.get_finished_spans()))

    def accuracy(*options: str) -> Any:
        result = toolscore(str(traces), "--refs", str(refs), *options)
        assert result.returncode in (0, 1), result.stderr
        return json.loads(result.stdout)["tool_call_accuracy"]

    assert accuracy() == 1.0  # default exclude: the handoff is not the user's call
    assert accuracy("--control-calls", "include=handoff") == 0.0  # two calls against one
    bad = toolscore(str(traces), "--refs", str(refs), "--control-calls", "include=nope")
    assert bad.returncode == 2 and "unknown control-call kind 'nope'" in bad.stderr
