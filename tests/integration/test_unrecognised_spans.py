"""Nothing silently dropped, end to end: spans of a convention toolscore does not read, sent over
OTLP by the real SDK to ``toolscore serve`` (SQLite and PostgreSQL), give a conversation warning
on its row and in ``toolscore show``; ``show --spans`` says which span each call came from, which
spans were not used, and that pruned spans are gone."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.collector.pipeline.e2e import (
    conversation,
    genai_agent_trace,
    import_refs,
    otlp_provider,
    pipeline_server,
    wait_scored,
)
from toolscore.storage.expectations.repository import ExpectationData

ROOT = Path(__file__).resolve().parents[2]
WEATHER = {"name": "get_weather", "args": {"city": "Paris"}}


def _toolscore(*argv: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "toolscore", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _send(srv: Any) -> None:
    provider = otlp_provider(srv)
    acme = provider.get_tracer("acme.agent")
    tool = {"acme.tool.name": "get_weather", "acme.tool.input": '{"city": "Paris"}'}
    with (
        acme.start_as_current_span("agent run", attributes={"session.id": "conv-acme"}),
        acme.start_as_current_span("acme tool run", attributes=tool),
    ):
        pass
    genai_agent_trace(provider.get_tracer("app"), "conv-known", [WEATHER])
    provider.force_flush()
    provider.shutdown()


def test_tool_like_spans_no_convention_read_are_reported_and_listed(db_url: str) -> None:
    import_refs(
        db_url,
        *(
            ExpectationData(id=c, reference_tool_calls=[WEATHER], match={"conversation_id": c})
            for c in ("conv-acme", "conv-known")
        ),
    )
    with pipeline_server(db_url) as srv:
        _send(srv)
        rows = wait_scored(db_url, ["conv-acme", "conv-known"])
    assert rows["conv-acme"]["status"] == rows["conv-known"]["status"] == "scored"
    acme, known = conversation(db_url, "conv-acme"), conversation(db_url, "conv-known")
    assert acme is not None and known is not None
    assert known["warning"] is None
    warning = acme["warning"]
    assert warning.startswith("no tool call was rebuilt, but 1 span(s) look like tool runs")
    assert "'acme tool run' (scope 'acme.agent'; name 'acme tool run', acme.tool.name" in warning
    assert "no convention reads it" in warning

    shown = _toolscore("show", "conv-acme", "--db", db_url, "--spans")
    assert f"  warning         {warning}" in shown
    assert "spans (2, 2 not used):" in shown
    listed = json.loads(_toolscore("show", "conv-acme", "--db", db_url, "--spans", "--json"))
    assert listed["conversation"]["warning"] == warning
    assert [(s["name"], s["convention"], s["used"]) for s in listed["spans"]] == [
        ("agent run", None, False),
        ("acme tool run", None, False),
    ]
    brief = json.loads(_toolscore("conversations", "--db", db_url, "--json"))
    assert {c["id"]: c["warning"] for c in brief} == {"conv-acme": warning, "conv-known": None}

    spans = json.loads(_toolscore("show", "conv-known", "--db", db_url, "--spans", "--json"))
    uses = [(s["name"], s["calls_asked"], s["calls_ran"], s["used"]) for s in spans["spans"]]
    assert uses == [
        ("invoke_agent weather", [], [], False),
        ("chat model", [1], [], True),
        ("execute_tool get_weather", [], [1], True),
        ("chat model", [], [], True),  # the answer: messages only
    ]
    text = _toolscore("show", "conv-known", "--db", db_url, "--spans")
    assert "asked for call #1" in text and "ran call #1" in text and "not used" in text

    time.sleep(1.1)
    _toolscore("prune", "--db", db_url, "--spans-older-than", "1s")
    pruned = _toolscore("show", "conv-known", "--db", db_url, "--spans")
    assert "spans: pruned (span retention deleted them; calls and scores kept)" in pruned
    assert (
        json.loads(_toolscore("show", "conv-known", "--db", db_url, "--spans", "--json"))["spans"]
        is None
    )
