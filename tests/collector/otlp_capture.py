"""Capture the OTLP/HTTP requests a framework's own exporter sends, and save them as a fixture.

The recorders (tests/fixtures/recorded/<name>/record.py) point the framework's exporter at an
:class:`OtlpCapture` on 127.0.0.1 and save every request it received, in order, as OTLP/JSON
(the protobuf JSON mapping with hex ids and integer enums, which OTLP/HTTP JSON is). A protobuf
request is saved only after checking that the JSON parses back to the same message, so a replay
(tests/collector/otlp_requests.py) sends exactly what the framework exported, request by request.

Standard library, ``protobuf`` and ``opentelemetry-proto`` only: the recorders import this from
their own virtualenvs, where toolscore is not installed.
"""

from __future__ import annotations

import base64
import gzip
import json
import threading
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
SIGNALS = {"/v1/traces": "traces", "/v1/logs": "logs"}
MESSAGES: dict[str, type[Message]] = {
    "traces": ExportTraceServiceRequest,
    "logs": ExportLogsServiceRequest,
}
RESPONSES: dict[str, type[Message]] = {
    "traces": ExportTraceServiceResponse,
    "logs": ExportLogsServiceResponse,
}
_ID_KEYS = ("traceId", "spanId", "parentSpanId")


@dataclass(frozen=True)
class CapturedRequest:
    signal: str  # "traces" or "logs"
    content_type: str  # PROTOBUF or JSON, as the exporter sent it
    body: bytes  # decompressed


def _inflate(body: bytes, encoding: str) -> bytes:
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    return body


class OtlpCapture:
    """``with OtlpCapture() as capture: ... capture.endpoint`` (``http://127.0.0.1:PORT``);
    ``capture.requests`` are the trace and log requests received, in order. Metrics requests are
    acknowledged and dropped."""

    def __init__(self) -> None:
        self.requests: list[CapturedRequest] = []
        self._lock = threading.Lock()
        capture = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self._body()
                body = _inflate(raw, self.headers.get("content-encoding", ""))
                content_type = self.headers.get("content-type", "").split(";")[0].strip()
                signal = SIGNALS.get(self.path)
                if signal is not None:
                    with capture._lock:
                        capture.requests.append(CapturedRequest(signal, content_type, body))
                reply = RESPONSES[signal or "traces"]()
                out = b"{}" if content_type == JSON else reply.SerializeToString()
                self.send_response(200)
                self.send_header("content-type", content_type or PROTOBUF)
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def _body(self) -> bytes:
                if self.headers.get("transfer-encoding", "").lower() != "chunked":
                    return self.rfile.read(int(self.headers.get("content-length", 0)))
                chunks = []
                while size := int(self.rfile.readline().split(b";")[0].strip(), 16):
                    chunks.append(self.rfile.read(size))
                    self.rfile.readline()  # the CRLF after each chunk
                self.rfile.readline()  # the CRLF after the last (empty) chunk
                return b"".join(chunks)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> OtlpCapture:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


# --- OTLP/JSON <-> messages ----------------------------------------------------------------------


def _walk_ids(obj: Any, convert: Any) -> None:
    if isinstance(obj, dict):
        for key, value in obj.items():
            if key in _ID_KEYS and isinstance(value, str):
                obj[key] = convert(value)
            else:
                _walk_ids(value, convert)
    elif isinstance(obj, list):
        for item in obj:
            _walk_ids(item, convert)


def message_to_otlp_json(message: Message) -> dict[str, Any]:
    """A request message -> OTLP/JSON (hex ids, integer enums, camelCase)."""
    document = json_format.MessageToDict(message, use_integers_for_enums=True)
    _walk_ids(document, lambda v: base64.b64decode(v).hex())
    return document


def otlp_json_to_message(signal: str, document: Mapping[str, Any]) -> Message:
    copy = json.loads(json.dumps(document))
    _walk_ids(copy, lambda v: base64.b64encode(bytes.fromhex(v)).decode())
    return json_format.ParseDict(copy, MESSAGES[signal](), ignore_unknown_fields=True)


def _stored(request: CapturedRequest) -> dict[str, Any]:
    message = MESSAGES[request.signal]()
    if request.content_type == JSON:
        document = json.loads(request.body)
        message = otlp_json_to_message(request.signal, document)
    else:
        message.ParseFromString(request.body)
        document = message_to_otlp_json(message)
    # the saved form must give back exactly the message the framework exported
    assert otlp_json_to_message(request.signal, document) == message
    return {"signal": request.signal, "content_type": request.content_type, "otlp": document}


def save_requests(
    path: Path,
    requests: Iterable[CapturedRequest],
    *,
    note: str,
    expected: Iterable[Mapping[str, Any]],
    conversation_id: str | None,
    reference_id: str | None,
    user_input: str,
    recorded_with: Mapping[str, str],
    turns: Sequence[Sequence[Sequence[str]]] | None = None,
) -> None:
    """Write a request recording: what the tests replay and what they expect of it. ``turns``:
    the names of each assistant message's calls, per user turn, when the framework does not
    make them as four_calls.py's TURNS (one call per step, say)."""
    stored = [_stored(r) for r in requests]
    assert stored, "the framework exported nothing"
    document = {
        "_note": note,
        "recorded_with": dict(recorded_with),
        "conversation_id": conversation_id,
        "reference_id": reference_id,
        "user_input": user_input,
        "expected_tool_calls": list(expected),
        "requests": stored,
    }
    if turns is not None:
        document["turns"] = [[list(step) for step in turn] for turn in turns]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
