"""A scripted OpenAI-compatible ``/chat/completions`` server on 127.0.0.1 (stdlib only).

The framework recorders (record_<framework>.py) point a framework's real OpenAI client at it, so
the framework's own model class (the one its instrumentation wraps) makes real HTTP calls. Each
request gets the next step: a list of ``{"name", "args"}`` calls (one assistant message with
parallel tool calls, arguments as JSON strings as the API sends them) or a text answer. Streaming
requests (``"stream": true``) get the same message as server-sent chunks. The request bodies are
kept in ``requests`` so a recorder can check what the framework sent.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Step = list[dict[str, Any]] | str


def _message(step: Step, number: int) -> dict[str, Any]:
    if isinstance(step, str):
        return {"role": "assistant", "content": step}
    calls = [
        {
            "id": f"call_{number}_{i}",
            "type": "function",
            "function": {"name": c["name"], "arguments": json.dumps(c["args"])},
        }
        for i, c in enumerate(step)
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}


def completion(step: Step, number: int) -> dict[str, Any]:
    message = _message(step, number)
    return {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls" if "tool_calls" in message else "stop",
                "message": message,
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
    }


def chunks(step: Step, number: int) -> list[dict[str, Any]]:
    message = _message(step, number)
    base = {"id": f"chatcmpl-{number}", "object": "chat.completion.chunk", "created": 1}
    base["model"] = "gpt-4o"
    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if "tool_calls" in message:
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]
    finish = "tool_calls" if "tool_calls" in message else "stop"
    usage = {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10}
    return [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
        {**base, "choices": [], "usage": usage},
    ]


class ScriptedChatServer:
    """``with ScriptedChatServer(steps) as server: ... server.url`` (ends with ``/v1``)."""

    def __init__(self, steps: list[Step]) -> None:
        self.steps = list(steps)
        self.requests: list[dict[str, Any]] = []
        self.served = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                server.requests.append(body)
                server.served += 1
                step = server.steps.pop(0)
                if body.get("stream"):
                    payload = "".join(
                        f"data: {json.dumps(c)}\n\n" for c in chunks(step, server.served)
                    )
                    data = (payload + "data: [DONE]\n\n").encode()
                    kind = "text/event-stream"
                else:
                    data = json.dumps(completion(step, server.served)).encode()
                    kind = "application/json"
                self.send_response(200)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> ScriptedChatServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
