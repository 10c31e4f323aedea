"""Request recordings (tests/fixtures/recorded/<name>/requests.json): load, decode, send.

A request recording holds the OTLP requests a framework's own exporter sent, in order, as
OTLP/JSON (saved by tests/collector/otlp_capture.py), with what the conversation should rebuild
to: ``expected_tool_calls``, the framework's own session id (``conversation_id``, null when the
framework exports none), the ``reference_id`` its spans carry and the first ``user_input``.
``records`` decodes the requests with the receiver's own decoder, for reconstruction tests;
``send`` posts each request, in its original encoding, to a running server's OTLP/HTTP port.
"""

from __future__ import annotations

import json
import random
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.collector.otlp_capture import JSON, PROTOBUF, otlp_json_to_message
from tests.collector.recording import RECORDED
from toolscore.collector.otlp.decode import decode_logs, decode_traces
from toolscore.collector.otlp.parse import parse_logs_json, parse_traces_json
from toolscore.storage.records import LogRecordData, SpanRecord

PATHS = {"traces": "/v1/traces", "logs": "/v1/logs"}


@dataclass(frozen=True)
class RequestRecording:
    name: str
    note: str
    conversation_id: str | None
    reference_id: str | None  # None: no span or resource carries one
    user_input: str
    expected: list[dict[str, Any]]
    requests: list[dict[str, Any]]  # {"signal", "content_type", "otlp"}
    # per user turn, the call names of each assistant message, when not four_calls.py's TURNS
    turns: list[list[list[str]]] | None = None


def load_requests(name: str) -> RequestRecording:
    """tests/fixtures/recorded/<name>/requests.json."""
    path = RECORDED / name / "requests.json"
    document = json.loads(path.read_text(encoding="utf-8"))
    return RequestRecording(
        name=name,
        note=document["_note"],
        conversation_id=document["conversation_id"],
        reference_id=document["reference_id"],
        user_input=document["user_input"],
        expected=document["expected_tool_calls"],
        requests=document["requests"],
        turns=document.get("turns"),
    )


def request_recordings() -> list[str]:
    return sorted(p.parent.name for p in Path(RECORDED).glob("*/requests.json"))


def records(requests: Sequence[dict[str, Any]]) -> tuple[list[SpanRecord], list[LogRecordData]]:
    """The spans and log records of the requests, as the receiver decodes them."""
    spans: list[SpanRecord] = []
    logs: list[LogRecordData] = []
    for request in requests:
        body = json.dumps(request["otlp"]).encode()
        if request["signal"] == "traces":
            spans += decode_traces(parse_traces_json(body)).spans
        else:
            logs += decode_logs(parse_logs_json(body)).records
    return spans, logs


def body(request: dict[str, Any]) -> bytes:
    """The request's body in the encoding the framework sent it."""
    if request["content_type"] == JSON:
        return json.dumps(request["otlp"]).encode()
    return otlp_json_to_message(request["signal"], request["otlp"]).SerializeToString()


def send(http_url: str, requests: Sequence[dict[str, Any]]) -> None:
    """POST each request to ``http_url``; every one must be acknowledged."""
    for request in requests:
        content_type = request["content_type"] if request["content_type"] == JSON else PROTOBUF
        post = urllib.request.Request(
            http_url + PATHS[request["signal"]],
            data=body(request),
            headers={"content-type": content_type},
            method="POST",
        )
        with urllib.request.urlopen(post, timeout=30) as reply:
            assert reply.status == 200, (reply.status, reply.read())


def _items(request: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any], Any]]:
    """(signal, resource entry, scope entry, item) for every span or log record of a request."""
    signal = request["signal"]
    outer, inner, leaf = (
        ("resourceSpans", "scopeSpans", "spans")
        if signal == "traces"
        else ("resourceLogs", "scopeLogs", "logRecords")
    )
    out = []
    for resource in request["otlp"].get(outer, []):
        for scope in resource.get(inner, []):
            for item in scope.get(leaf, []):
                out.append((signal, resource, scope, item))
    return out


def shuffled_and_split(
    requests: Sequence[dict[str, Any]],
    seed: int,
    size: int,
    *,
    order: str,
    clock: str = "recorded",
) -> list[dict[str, Any]]:
    """The same spans and log records in other requests: each signal's items shuffled and cut
    into requests of ``size`` items (each keeping its resource and scope), the logs' requests
    before the spans' (``logs-first``), after them (``spans-first``) or mixed with them
    (``interleaved``). ``clock``: the log records keep their times (``recorded``), all share one
    time (``equal``: a coarse clock), or have none (``zero``: only the observed time, as the OTel
    SDK sends a record whose emitter set no timestamp)."""
    rng = random.Random(seed)
    by_signal: dict[str, list[dict[str, Any]]] = {"traces": [], "logs": []}
    for request in requests:
        for signal, resource, scope, item in _items(request):
            if signal == "logs":
                item = _clocked(item, clock)
            by_signal[signal].append(_single(signal, resource, scope, item))
    out: dict[str, list[dict[str, Any]]] = {}
    for signal, singles in by_signal.items():
        rng.shuffle(singles)
        out[signal] = [_merge(signal, singles[i : i + size]) for i in range(0, len(singles), size)]
    if order == "interleaved":
        merged, logs, traces = [], out["logs"][::-1], out["traces"][::-1]
        while logs or traces:
            pick = logs if logs and (not traces or rng.random() < 0.5) else traces
            merged.append(pick.pop())
        return merged
    first, second = ("logs", "traces") if order == "logs-first" else ("traces", "logs")
    return out[first] + out[second]


EQUAL_TIME_NS = "1700000000000000000"


def _clocked(record: dict[str, Any], clock: str) -> dict[str, Any]:
    if clock == "recorded":
        return record
    if clock == "equal":
        return {**record, "timeUnixNano": EQUAL_TIME_NS, "observedTimeUnixNano": EQUAL_TIME_NS}
    assert clock == "zero", clock
    return {k: v for k, v in record.items() if k != "timeUnixNano"}


def _single(
    signal: str, resource: dict[str, Any], scope: dict[str, Any], item: Any
) -> dict[str, Any]:
    outer, inner, leaf = (
        ("resourceSpans", "scopeSpans", "spans")
        if signal == "traces"
        else ("resourceLogs", "scopeLogs", "logRecords")
    )
    resource_part = {k: v for k, v in resource.items() if k != inner}
    scope_part = {k: v for k, v in scope.items() if k != leaf}
    return {outer: [{**resource_part, inner: [{**scope_part, leaf: [item]}]}]}


def _merge(signal: str, singles: Sequence[dict[str, Any]]) -> dict[str, Any]:
    outer = "resourceSpans" if signal == "traces" else "resourceLogs"
    merged = [entry for single in singles for entry in single[outer]]
    return {"signal": signal, "content_type": PROTOBUF, "otlp": {outer: merged}}
