"""The real ``openai`` client against a local fake server, under OpenLLMetry and OpenInference.

Also LangChain's ``ChatOpenAI`` against the same server with two instrumentations at once
(OpenInference LangChain + OpenLLMetry openai): each model call is recorded twice, in two
conventions, by sibling spans; every call and answer must still count once.

The server (127.0.0.1, ephemeral port) answers chat.completions with scripted ``tool_calls``. The
app runs the tools itself (no tool spans: only the model calls are traced), as in most apps using
the bare client. Three instrumentations: OpenLLMetry with content on span attributes, OpenLLMetry
in events mode (content only in log records), OpenInference. The app (openai_app.py) runs in a
fresh process per run, because instrumentors patch ``openai`` globally and do not fully undo it.
Set ``TOOLSCORE_RECORD=1`` to refresh the saved copies in tests/fixtures/recorded/.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.collector.recording import RECORDED, Recording, load_recording, save_recording
from toolscore.collector.reconstruction.conversation_keys import (
    DEFAULT_CONVERSATION_KEYS,
    conversation_id_for_trace,
)
from toolscore.collector.reconstruction.rebuild import reconstruct

QUESTION = "What's the weather in Paris and the time in Tokyo?"


def completion(*calls: tuple[str, str, str], text: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for n, a, i in calls
        ]
    return {
        "id": f"chatcmpl-{abs(hash((calls, text))) % 10**8}",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o",
        "choices": [
            {"index": 0, "finish_reason": "tool_calls" if calls else "stop", "message": message}
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
    }


@dataclass
class FakeOpenAI:
    """A scripted chat.completions endpoint: answers requests with ``script`` in order."""

    script: list[dict[str, Any]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    url: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)


@pytest.fixture(scope="module")
def server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", 0))
            with fake.lock:
                fake.requests.append(json.loads(self.rfile.read(length) or b"{}"))
                answer = fake.script.pop(0) if fake.script else completion(text="(exhausted)")
            body = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    yield fake
    httpd.shutdown()
    httpd.server_close()


PARALLEL = [
    {"name": "get_weather", "args": {"city": "Paris"}},
    {"name": "get_time", "args": {"timezone": "Asia/Tokyo"}},
]
# name → (questions, the server's answers in order, expected calls)
SCENARIOS: dict[str, tuple[list[str], list[dict[str, Any]], list[dict[str, Any]]]] = {
    "parallel": (
        [QUESTION],
        [
            completion(
                ("get_weather", '{"city":"Paris"}', "call_w1"),
                ("get_time", '{"timezone":"Asia/Tokyo"}', "call_t2"),
            ),
            completion(text="18C and 09:00"),
        ],
        PARALLEL,
    ),
    "multi-turn": (
        ["Weather in Paris?", "And the time in Tokyo?"],
        [
            completion(("get_weather", '{"city":"Paris"}', "c1")),
            completion(text="18C"),
            completion(("get_time", '{"timezone":"Asia/Tokyo"}', "c2")),
            completion(text="09:00"),
        ],
        PARALLEL,
    ),
    "malformed": (
        ["Weather in Paris?"],
        [
            completion(("get_weather", '{"city": "Paris", "units": "met', "c1")),  # cut short
            completion(text="?"),
        ],
        [{"name": "get_weather", "args": {"city": "Paris"}}],
    ),
}
MODES = ["openllmetry", "openllmetry-events", "openinference", "langchain-mixed"]
CONVENTION = {
    "openllmetry": "openllmetry",
    "openllmetry-events": "otel_genai_events",
    "openinference": "openinference",
    "langchain-mixed": "openinference",  # the LangChain span starts before the nested openai one
}
APP = "tests.collector.reconstruction.conventions.openai_app"
ROOT = Path(__file__).resolve().parents[4]


@dataclass
class Run:
    mode: str
    recordings: dict[str, Recording]
    requests: int


@pytest.fixture(scope="module", params=MODES)
def run(
    request: pytest.FixtureRequest, server: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory
) -> Run:
    """All scenarios for one instrumentation, in one fresh process (instrumentors are global)."""
    outdir = tmp_path_factory.mktemp(request.param)
    with server.lock:
        server.script[:] = [answer for _, answers, _ in SCENARIOS.values() for answer in answers]
        server.requests.clear()
    args = [f"{name}={'|'.join(questions)}" for name, (questions, _, _) in SCENARIOS.items()]
    subprocess.run(
        [sys.executable, "-m", APP, request.param, server.url, str(outdir), *args],
        cwd=ROOT,
        check=True,
        timeout=300,
    )
    recordings = {name: load_recording(outdir / f"{name}.json") for name in SCENARIOS}
    if os.environ.get("TOOLSCORE_RECORD") == "1":
        for name, (spans, logs, _) in recordings.items():
            note = f"Recorded from the openai client under {request.param}; {name}."
            path = RECORDED / f"openai-{request.param}-{name}.json"
            save_recording(path, spans, logs, note=note, expected=SCENARIOS[name][2])
    return Run(request.param, recordings, len(server.requests))


def test_every_request_reached_the_fake_server(run: Run) -> None:
    expected = sum(len(answers) for _, answers, _ in SCENARIOS.values())
    if run.mode == "langchain-mixed":
        expected -= 1  # LangChain files unparseable arguments under invalid_tool_calls: loop ends
    assert run.requests == expected


def test_parallel_calls(run: Run) -> None:
    spans, logs, _ = run.recordings["parallel"]
    result = reconstruct(spans, logs)
    assert [{"name": c.name, "args": c.arguments} for c in result.tool_calls] == PARALLEL
    assert [c.call_id for c in result.tool_calls] == ["call_w1", "call_t2"]
    assert {c.convention for c in result.tool_calls} == {CONVENTION[run.mode]}
    assert result.first_user_message == QUESTION
    assert [m["type"] for m in result.messages] == ["human", "ai", "tool", "tool", "ai"]
    assert result.warnings == ()


def test_multi_turn_over_two_traces(run: Run) -> None:
    spans, logs, _ = run.recordings["multi-turn"]
    traces = {s.trace_id for s in spans}
    assert len(traces) == 2
    for trace in traces:
        mine = [s for s in spans if s.trace_id == trace]
        assert conversation_id_for_trace(mine, DEFAULT_CONVERSATION_KEYS) == "conv-multi-turn"
    result = reconstruct(spans[::-1], logs[::-1])
    assert [{"name": c.name, "args": c.arguments} for c in result.tool_calls] == PARALLEL
    humans = [m["content"] for m in result.messages if m["type"] == "human"]
    assert humans == ["Weather in Paris?", "And the time in Tokyo?"]


def test_malformed_arguments_are_kept_raw(run: Run) -> None:
    spans, logs, _ = run.recordings["malformed"]
    result = reconstruct(spans, logs)
    [call] = result.tool_calls  # with LangChain: only the openai span still shows the call
    assert call.name == "get_weather"
    assert call.arguments_ok is False
    assert call.arguments == {"city": "Paris"}  # the complete part; the cut value is dropped
    assert call.arguments_raw == '{"city": "Paris", "units": "met'
    assert any("call #0 get_weather" in w for w in result.warnings)
