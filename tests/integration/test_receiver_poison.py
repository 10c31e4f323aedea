"""Poison spans on a real server: six clients' requests all succeed while a seventh sends poison.

The server runs the real conversation hook; a slow ingest hook (20 ms per batch) makes concurrent
requests share group commits. The six clients (three over OTLP/HTTP, three over gRPC) keep
sending good requests until the poison client is done; it sends, for each poison kind, a request
of 99 good spans + 1 poison span over both transports. Decode-level poisons get partial success
(1 rejected, 99 stored), also under a conversation key configured on the pipeline (the
extension names its keys to the decoder). What decode cannot know is isolated by the writer
(tests/collector/ingest/test_ingest_isolation.py). No poison request is ever told to retry.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable
from typing import Any

import grpc
import requests
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from sqlalchemy import func, select

from tests.integration.serve_harness import RunningServer, server_settings
from toolscore.collector.components import AppContext, Extension
from toolscore.collector.pipeline.extension import pipeline_extension
from toolscore.collector.pipeline.options import PipelineOptions
from toolscore.collector.reconstruction.conversation_keys import DEFAULT_CONVERSATION_KEYS
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.telemetry.spans import log_records_table, spans_table

TRACES = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
PB = {"Content-Type": "application/x-protobuf"}
CUSTOM_KEY = "app.session"  # configured on the pipeline, unknown to decode's checks
GOOD_SPANS = 20


class SlowBatches:
    """Ingest hook: each transaction takes 20 ms longer, so concurrent requests share it."""

    def on_batch(self, conn: Any, batch: Any) -> None:
        time.sleep(0.02)

    def extension(self, ctx: AppContext) -> Extension:
        return Extension(hooks=[self])


def _span(trace: int, n: int, attrs: dict[str, str] | None = None, start: int = 1) -> Span:
    span = Span(
        trace_id=trace.to_bytes(16, "big"),
        span_id=n.to_bytes(8, "big"),
        name=f"span {n}",
        start_time_unix_nano=start,
        end_time_unix_nano=2,
    )
    for key, value in (attrs or {}).items():
        span.attributes.append(KeyValue(key=key, value=AnyValue(string_value=value)))
    return span


def _traces(*spans: Span) -> bytes:
    req = ExportTraceServiceRequest()
    req.resource_spans.add().scope_spans.add().spans.extend(spans)
    return bytes(req.SerializeToString())


def _poisoned(trace: int, poison: Span) -> bytes:
    # 99 good spans in `trace`; the poison alone in trace + 1, so that its id names a conversation
    good = [_span(trace, n, {"gen_ai.conversation.id": f"conv-{trace}"}) for n in range(1, 100)]
    return _traces(*good[:50], poison, *good[50:])


POISONS: dict[str, Callable[[int], Span]] = {
    "start_time_unix_nano 2^63": lambda t: _span(t, 100, start=2**63),
    "NUL in gen_ai.conversation.id": lambda t: _span(t, 100, {"gen_ai.conversation.id": "c\x00"}),
    "NUL in toolscore.reference.id": lambda t: _span(t, 100, {"toolscore.reference.id": "\x00"}),
    "3,200-byte gen_ai.conversation.id": lambda t: _span(
        t, 100, {"gen_ai.conversation.id": os.urandom(1600).hex()}
    ),
}


REASONS = {
    "start_time_unix_nano 2^63": "start_time_unix_nano is beyond the signed 64-bit range",
    "NUL in gen_ai.conversation.id": "gen_ai.conversation.id contains a NUL character",
    "NUL in toolscore.reference.id": "toolscore.reference.id contains a NUL character",
    "3,200-byte gen_ai.conversation.id": "gen_ai.conversation.id is longer than the 1024-byte",
}


class Client(threading.Thread):
    """Sends good requests (a trace of GOOD_SPANS spans each) until told to stop."""

    def __init__(self, srv: RunningServer, number: int, transport: str, stop: threading.Event):
        super().__init__(daemon=True)
        self.srv, self.number, self.transport, self.stop = srv, number, transport, stop
        self.sent: list[int] = []  # trace ids
        self.failures: list[str] = []

    def run(self) -> None:
        channel = grpc.insecure_channel(self.srv.grpc_target)
        call = channel.unary_unary(TRACES)
        session = requests.Session()
        while not self.stop.is_set() or len(self.sent) < 5:
            trace = self.number * 1_000_000 + len(self.sent) + 1
            body = _traces(*(_span(trace, n) for n in range(1, GOOD_SPANS + 1)))
            try:
                if self.transport == "grpc":
                    call(body, timeout=30)
                else:
                    resp = session.post(f"{self.srv.http_url}/v1/traces", data=body, headers=PB)
                    if resp.status_code != 200:
                        self.failures.append(f"HTTP {resp.status_code}")
            except grpc.RpcError as exc:
                self.failures.append(f"gRPC {exc.code()}")  # type: ignore[attr-defined]
            self.sent.append(trace)
        channel.close()


def _send_grpc(srv: RunningServer, body: bytes) -> tuple[str, bytes, str, dict[str, Any]]:
    with grpc.insecure_channel(srv.grpc_target) as channel:
        try:
            return "OK", channel.unary_unary(TRACES)(body, timeout=30), "", {}
        except grpc.RpcError as exc:
            err: Any = exc
            return err.code().name, b"", err.details(), dict(err.trailing_metadata() or ())


def _stored(db_url: str) -> dict[int, int]:
    engine = create_engine(db_url)
    with engine.connect() as conn:
        rows = conn.execute(
            select(spans_table.c.trace_id, func.count()).group_by(spans_table.c.trace_id)
        )
        counts = {int(t, 16): int(n) for t, n in rows}
    engine.dispose()
    return counts


def _metric(srv: RunningServer, name: str) -> float:
    text = requests.get(f"{srv.http_url}/metrics", timeout=5).text
    match = re.search(rf"^{name} (\S+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


def test_six_clients_all_succeed_while_a_seventh_sends_poison(db_url: str) -> None:
    options = PipelineOptions(conversation_keys=(*DEFAULT_CONVERSATION_KEYS, CUSTOM_KEY))
    slow = SlowBatches()
    with RunningServer(
        server_settings(db_url), [pipeline_extension(options), slow.extension]
    ) as srv:
        stop = threading.Event()
        clients = [Client(srv, n, "http" if n <= 3 else "grpc", stop) for n in range(1, 7)]
        for client in clients:
            client.start()
        time.sleep(0.3)  # the six are sending

        partial: dict[str, list[tuple[int, str]]] = {}
        trace = 500
        for kind, make in POISONS.items():
            trace += 2
            http = requests.post(
                f"{srv.http_url}/v1/traces", data=_poisoned(trace, make(trace + 1)), headers=PB
            )
            assert http.status_code == 200, (kind, http.status_code)
            http_ps = ExportTraceServiceResponse.FromString(http.content).partial_success
            trace += 2
            code, raw, _, _ = _send_grpc(srv, _poisoned(trace, make(trace + 1)))
            assert code == "OK", (kind, code)
            grpc_ps = ExportTraceServiceResponse.FromString(raw).partial_success
            partial[kind] = [(p.rejected_spans, p.error_message) for p in (http_ps, grpc_ps)]

        # The poison decode cannot see: isolated by the writer (PostgreSQL refuses the key).
        custom = lambda t: _span(t, 100, {CUSTOM_KEY: os.urandom(1600).hex()})  # noqa: E731
        trace = 900
        isolated_http = requests.post(
            f"{srv.http_url}/v1/traces", data=_poisoned(trace, custom(trace + 1)), headers=PB
        )
        isolated_grpc = _send_grpc(srv, _poisoned(trace + 2, custom(trace + 3)))

        stop.set()
        for client in clients:
            client.join(60)
        unstorable = _metric(srv, "toolscore_ingest_unstorable_requests_total")
        data_faults = _metric(srv, "toolscore_ingest_data_faults_total")

    stored = _stored(db_url)
    # the six clients: every request answered OK and stored whole
    sent = [t for c in clients for t in c.sent]
    assert [c.failures for c in clients] == [[]] * 6
    assert len(sent) >= 30 and all(stored.get(t) == GOOD_SPANS for t in sent)
    # decode-level poisons: partial success, the 99 good spans stored, the poison not
    for kind, answers in partial.items():
        for rejected, message in answers:
            assert rejected == 1, kind
            assert message.startswith("rejected 1 spans: 1 × ") and REASONS[kind] in message
    for t in range(502, 502 + 4 * len(POISONS), 2):
        assert stored.get(t) == 99 and t + 1 not in stored
    # a custom conversation key is an id too: the pipeline tells the decoder, which rejects the
    # span (before, PostgreSQL refused the whole request and SQLite stored the 3,200-byte key)
    assert isolated_http.status_code == 200 and isolated_grpc[0] == "OK"
    http_ps = ExportTraceServiceResponse.FromString(isolated_http.content).partial_success
    grpc_ps = ExportTraceServiceResponse.FromString(isolated_grpc[1]).partial_success
    for answer in (http_ps, grpc_ps):
        assert answer.rejected_spans == 1
        assert f"{CUSTOM_KEY} is longer than the 1024-byte" in answer.error_message
    assert stored.get(900) == 99 and stored.get(902) == 99
    assert 901 not in stored and 903 not in stored
    assert unstorable == 0 and data_faults == 0


def test_a_log_record_beyond_int64_is_rejected_and_its_neighbours_stored(db_url: str) -> None:
    req = ExportLogsServiceRequest()
    records = req.resource_logs.add().scope_logs.add().log_records
    for n in range(99):
        records.append(LogRecord(time_unix_nano=n + 1, severity_text=f"r{n}"))
    records.append(LogRecord(time_unix_nano=2**64 - 1))
    with RunningServer(server_settings(db_url)) as srv:
        resp = requests.post(
            f"{srv.http_url}/v1/logs", data=req.SerializeToString(), headers=PB, timeout=10
        )
    assert resp.status_code == 200
    ps = ExportLogsServiceResponse.FromString(resp.content).partial_success
    assert ps.rejected_log_records == 1 and "time_unix_nano is beyond" in ps.error_message
    engine = create_engine(db_url)
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(log_records_table)).scalar() == 99
    engine.dispose()
