"""The load of bench_pipeline.py (runs in its own process): agent traces posted over OTLP/HTTP.

Each trace is 7 spans (an ``invoke_agent`` root carrying a conversation id and a reference id,
two ``chat`` spans and four ``execute_tool`` spans, OTel GenAI conventions), 73 traces a request.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

SPANS_PER_TRACE = 7
TRACES_PER_REQUEST = 73  # 511 spans: about the OTel SDK's default export batch (512)
# Every trace's tool calls, which the expectation "bench" (each trace's reference) expects.
CALLS = [("get_weather", {"city": "Paris"}), ("get_time", {"timezone": "Asia/Tokyo"})] * 2


def import_bench_expectation(engine: Any) -> None:
    """Store the expectation "bench" that every load trace names, in ``engine``'s database."""
    from toolscore.storage.expectations.repository import ExpectationData, import_expectations

    reference = [{"name": name, "args": args} for name, args in CALLS]
    with engine.connect() as conn:
        import_expectations(conn, [ExpectationData(id="bench", reference_tool_calls=reference)])


def trace(req: Any, conv_id: str, now_ns: int) -> None:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    def kv(key: str, value: str) -> KeyValue:
        return KeyValue(key=key, value=AnyValue(string_value=value))

    trace_id = uuid.uuid4().bytes
    root = uuid.uuid4().bytes[:8]
    calls = CALLS
    ids = [f"call_{uuid.uuid4().hex[:10]}" for _ in calls]
    user = {"role": "user", "parts": [{"type": "text", "content": "Weather and time?"}]}
    out = {
        "role": "assistant",
        "parts": [
            {"type": "tool_call", "id": i, "name": n, "arguments": a}
            for i, (n, a) in zip(ids, calls, strict=True)
        ],
    }
    spans = [
        (
            root,
            None,
            "invoke_agent weather",
            [
                kv("gen_ai.operation.name", "invoke_agent"),
                kv("gen_ai.conversation.id", conv_id),
                kv("toolscore.reference.id", "bench"),
            ],
        ),
        (
            uuid.uuid4().bytes[:8],
            root,
            "chat model",
            [
                kv("gen_ai.operation.name", "chat"),
                kv("gen_ai.conversation.id", conv_id),
                kv("gen_ai.input.messages", json.dumps([user])),
                kv("gen_ai.output.messages", json.dumps([out])),
            ],
        ),
    ]
    for call_id, (name, args) in zip(ids, calls, strict=True):
        spans.append(
            (
                uuid.uuid4().bytes[:8],
                root,
                f"execute_tool {name}",
                [
                    kv("gen_ai.operation.name", "execute_tool"),
                    kv("gen_ai.tool.name", name),
                    kv("gen_ai.tool.call.id", call_id),
                    kv("gen_ai.tool.call.arguments", json.dumps(args)),
                ],
            )
        )
    spans.append(
        (
            uuid.uuid4().bytes[:8],
            root,
            "chat model",
            [kv("gen_ai.operation.name", "chat"), kv("gen_ai.conversation.id", conv_id)],
        )
    )
    scope = req.resource_spans[0].scope_spans[0]
    for i, (span_id, parent, name, attrs) in enumerate(spans):
        s = scope.spans.add()
        s.trace_id, s.span_id, s.name, s.kind = trace_id, span_id, name, 1
        if parent:
            s.parent_span_id = parent
        s.start_time_unix_nano = now_ns + i * 1000
        s.end_time_unix_nano = now_ns + i * 1000 + 500
        s.attributes.extend(attrs)


def payloads(prefix: str, requests: int) -> list[bytes]:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    out = []
    now = time.time_ns()
    n = 0
    for _ in range(requests):
        req = ExportTraceServiceRequest()
        rs = req.resource_spans.add()
        rs.resource.attributes.add(key="service.name").value.string_value = "bench-agent"
        rs.scope_spans.add().scope.name = "bench"
        for _ in range(TRACES_PER_REQUEST):
            trace(req, f"{prefix}-{n}", now)
            n += 1
        out.append(req.SerializeToString())
    return out


def load(port: int, rate: float, duration: float, prefix: str, result: Any) -> None:
    """Post requests at ``rate`` spans/s for ``duration`` s from 4 connections."""
    requests = max(1, int(rate * duration / (SPANS_PER_TRACE * TRACES_PER_REQUEST)))
    bodies = payloads(prefix, requests)  # built before the clock starts, as the rate excludes it
    start = time.monotonic()
    posted = paced(port, bodies, SPANS_PER_TRACE * TRACES_PER_REQUEST / rate)
    ok = len(posted.latencies)
    result.update(
        spans=ok * SPANS_PER_TRACE * TRACES_PER_REQUEST,
        conversations=ok * TRACES_PER_REQUEST,
        failed=posted.failed,
        seconds=time.monotonic() - start,
    )


@dataclass(frozen=True, slots=True)
class Posted:
    latencies: dict[int, float]  # request index -> seconds, of those answered 200
    failed: int


def paced(
    port: int,
    bodies: Sequence[bytes],
    interval: float,
    on_due: Callable[[int], None] | None = None,
    persistent: bool = True,
) -> Posted:
    """Post ``bodies`` over OTLP/HTTP from 4 threads, body ``i`` due ``i * interval`` s after
    the start (``on_due(i)`` then called); each thread keeps its connection (``persistent``) or
    opens one a request. A request answered other than 200, or whose connection broke, failed."""
    lock = threading.Lock()
    state: dict[str, Any] = {"next": 0, "latencies": {}, "failed": 0}
    start = time.monotonic()

    def sender() -> None:
        conn = None
        while True:
            with lock:
                i = state["next"]
                state["next"] += 1
            if i >= len(bodies):
                return
            if (delay := start + i * interval - time.monotonic()) > 0:
                time.sleep(delay)
            if on_due is not None:
                on_due(i)
            conn = conn if persistent and conn is not None else connect(port)
            try:
                status, latency = post_on(conn, bodies[i])
            except (OSError, http.client.HTTPException):  # broken: a new one next time
                status, latency, conn = 0, 0.0, None
            finally:
                if not persistent and conn is not None:
                    conn.close()
            with lock:
                if status == 200:
                    state["latencies"][i] = latency
                else:
                    state["failed"] += 1

    threads = [threading.Thread(target=sender) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return Posted(state["latencies"], state["failed"])


def connect(port: int) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", port, timeout=120)


def post_on(conn: http.client.HTTPConnection, body: bytes) -> tuple[int, float]:
    """The answer's status and the seconds from sending ``body`` to reading it all."""
    start = time.monotonic()
    conn.request(
        "POST", "/v1/traces", body=body, headers={"Content-Type": "application/x-protobuf"}
    )
    response = conn.getresponse()
    response.read()
    return response.status, time.monotonic() - start
