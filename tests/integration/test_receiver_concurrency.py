"""The cap on export requests in flight (``--max-concurrent-requests``), gRPC and HTTP together.

Ingest is held by a gate (an ingest hook that waits in the writer thread), so the first request
stays in flight while others arrive: they must be refused at once with the retryable answer
(UNAVAILABLE + RetryInfo / 503 + Retry-After), nothing of theirs stored, and everything that
was acknowledged stored. With the real OTel SDK exporters, the refused ones retry and all
their spans end up stored.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest
import requests
from google.protobuf import duration_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
    OTLPSpanExporter as GrpcSpanExporter,
)
from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
    OTLPSpanExporter as HttpSpanExporter,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from opentelemetry.sdk.trace.export import SpanExportResult
from sqlalchemy import select

from tests.integration.serve_harness import RunningServer, agent_spans, server_settings
from toolscore.collector.components import AppContext, Extension
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.telemetry.spans import spans_table

TRACES = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
PB = {"Content-Type": "application/x-protobuf"}


class Gate:
    """Ingest hook: every batch waits (in the writer thread) until ``release`` is set."""

    def __init__(self, hold_s: float | None = None) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self._hold_s = hold_s  # None: until released; else each batch takes this long

    def on_batch(self, conn: Any, batch: Any) -> None:
        self.entered.set()
        if self._hold_s is None:
            assert self.release.wait(30), "gate never released"
        else:
            time.sleep(self._hold_s)

    def extension(self, ctx: AppContext) -> Extension:
        return Extension(hooks=[self])


def _request(trace: int, spans: int = 5) -> bytes:
    req = ExportTraceServiceRequest()
    scope = req.resource_spans.add().scope_spans.add()
    for i in range(spans):
        scope.spans.append(
            Span(
                trace_id=trace.to_bytes(16, "big"),
                span_id=(i + 1).to_bytes(8, "big"),
                name="capped",
                start_time_unix_nano=1,
                end_time_unix_nano=2,
            )
        )
    return bytes(req.SerializeToString())


def _stored_traces(db_url: str) -> dict[int, int]:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            counts: dict[int, int] = {}
            for trace_id in conn.execute(select(spans_table.c.trace_id)).scalars():
                counts[int(trace_id, 16)] = counts.get(int(trace_id, 16), 0) + 1
            return counts
    finally:
        engine.dispose()


def _metric(srv: RunningServer, name: str, **labels: str) -> float:
    text = requests.get(f"{srv.http_url}/metrics", timeout=5).text
    wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        match = re.fullmatch(rf"{name}\{{(.*)\}} (\S+)", line)
        if match and ",".join(sorted(match.group(1).split(","))) == wanted:
            return float(match.group(2))
    return 0.0


@pytest.fixture
def gated(db_url: str) -> Iterator[tuple[RunningServer, Gate]]:
    gate = Gate()
    settings = server_settings(db_url, max_concurrent_requests=1, retry_after_s=2.0)
    with RunningServer(settings, [gate.extension]) as srv:
        try:
            yield srv, gate
        finally:
            gate.release.set()  # never leave the writer waiting at shutdown


def test_over_the_cap_grpc_and_http_are_told_to_retry_and_acknowledged_data_is_stored(
    gated: tuple[RunningServer, Gate], db_url: str
) -> None:
    srv, gate = gated
    with grpc.insecure_channel(srv.grpc_target) as channel, ThreadPoolExecutor(1) as pool:
        call = channel.unary_unary(TRACES)
        first = pool.submit(call, _request(1), timeout=20)  # admitted, then held by the gate
        assert gate.entered.wait(10)
        assert _metric(srv, "toolscore_receiver_in_flight_requests", transport="grpc") == 1

        # gRPC, over the cap: UNAVAILABLE with RetryInfo where both kinds of client look
        with pytest.raises(grpc.RpcError) as info:
            call(_request(2), timeout=5)
        err: Any = info.value
        assert err.code() == grpc.StatusCode.UNAVAILABLE
        assert "export requests in flight" in err.details()
        trailers = dict(err.trailing_metadata() or ())
        delay = error_details_pb2.RetryInfo.FromString(trailers["google.rpc.retryinfo-bin"])
        assert delay.retry_delay == duration_pb2.Duration(seconds=2)
        status = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
        assert status.details[0].Is(error_details_pb2.RetryInfo.DESCRIPTOR)

        # HTTP shares the cap: 503 + Retry-After + google.rpc.Status
        resp = requests.post(f"{srv.http_url}/v1/traces", data=_request(3), headers=PB, timeout=5)
        assert resp.status_code == 503
        assert resp.headers["Retry-After"] == "2"
        assert "export requests in flight" in status_pb2.Status.FromString(resp.content).message

        # probes are not export requests: they answer while the cap is reached
        assert requests.get(f"{srv.http_url}/health", timeout=5).status_code == 200
        health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        assert health.status == health_pb2.HealthCheckResponse.SERVING

        assert _metric(srv, "toolscore_receiver_throttled_requests_total", transport="grpc") == 1
        assert _metric(srv, "toolscore_receiver_throttled_requests_total", transport="http") == 1
        assert (
            _metric(
                srv,
                "toolscore_receiver_failed_requests_total",
                transport="grpc",
                status="UNAVAILABLE",
            )
            == 1
        )
        assert _stored_traces(db_url) == {}  # the first is not committed yet

        gate.release.set()
        assert first.result(timeout=20) == b""  # OK, full success

    assert _metric(srv, "toolscore_receiver_in_flight_requests", transport="grpc") == 0
    assert _stored_traces(db_url) == {1: 5}  # acknowledged: stored; refused: nothing
    # once the slot is free, the refused requests go through
    with grpc.insecure_channel(srv.grpc_target) as channel:
        assert channel.unary_unary(TRACES)(_request(2), timeout=10) == b""
    resp = requests.post(f"{srv.http_url}/v1/traces", data=_request(3), headers=PB, timeout=10)
    assert resp.status_code == 200
    assert _stored_traces(db_url) == {1: 5, 2: 5, 3: 5}


def test_unauthenticated_requests_get_401_not_the_retryable_answer(sqlite_url: str) -> None:
    gate = Gate()
    settings = server_settings(
        sqlite_url, max_concurrent_requests=1, auth_token="secret", retry_after_s=1.0
    )
    auth = {"authorization": "Bearer secret"}
    with RunningServer(settings, [gate.extension]) as srv, ThreadPoolExecutor(1) as pool:
        try:
            first = pool.submit(
                requests.post,
                f"{srv.http_url}/v1/traces",
                data=_request(1),
                headers={**PB, **auth},
                timeout=20,
            )
            assert gate.entered.wait(10)
            resp = requests.post(
                f"{srv.http_url}/v1/traces", data=_request(2), headers=PB, timeout=5
            )
            assert resp.status_code == 401
            with (
                grpc.insecure_channel(srv.grpc_target) as channel,
                pytest.raises(grpc.RpcError) as info,
            ):
                channel.unary_unary(TRACES)(_request(3), timeout=5)
            err: Any = info.value
            assert err.code() == grpc.StatusCode.UNAUTHENTICATED
        finally:
            gate.release.set()
        assert first.result(timeout=20).status_code == 200


def test_sdk_exporters_over_the_cap_retry_until_everything_is_stored(db_url: str) -> None:
    """Six real OTel SDK exporters (3 gRPC, 3 HTTP) at once against a cap of 1 and a slow
    ingest: the refused ones back off as told and retry; every export ends in SUCCESS and
    every span is stored once."""
    gate = Gate(hold_s=0.3)
    settings = server_settings(db_url, max_concurrent_requests=1, retry_after_s=0.5)
    with RunningServer(settings, [gate.extension]) as srv:
        exporters: list[Any] = [
            GrpcSpanExporter(endpoint=srv.grpc_target, insecure=True, timeout=20) for _ in range(3)
        ] + [HttpSpanExporter(endpoint=f"{srv.http_url}/v1/traces", timeout=20) for _ in range(3)]
        batches = [agent_spans(tools=6, content=f"question {i}") for i in range(len(exporters))]
        start = threading.Barrier(len(exporters))

        def export(i: int) -> SpanExportResult:
            start.wait()
            return exporters[i].export(batches[i])

        with ThreadPoolExecutor(len(exporters)) as pool:
            results = list(pool.map(export, range(len(exporters))))
        throttled = sum(
            _metric(srv, "toolscore_receiver_throttled_requests_total", transport=t)
            for t in ("grpc", "http")
        )
        for exporter in exporters:
            exporter.shutdown()

    assert results == [SpanExportResult.SUCCESS] * len(exporters)
    assert throttled >= 1  # the cap was hit: the exporters did retry
    sent = {(f"{s.context.trace_id:032x}", f"{s.context.span_id:016x}") for b in batches for s in b}
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            stored = conn.execute(select(spans_table.c.trace_id, spans_table.c.span_id)).all()
    finally:
        engine.dispose()
    assert len(stored) == len(sent) and {tuple(r) for r in stored} == sent


@pytest.mark.slow
def test_refused_requests_are_not_read_so_memory_stays_bounded(tmp_path: Path) -> None:
    """A real ``toolscore serve`` with a cap of 1 and its database locked: 16 concurrent
    16 MiB requests per transport. One is admitted; the others are refused: over gRPC before
    their messages are read, so the server's peak memory grows by far less than the bodies'
    size; over HTTP once read, within the in-flight memory budget (without the cap it grows by
    ~2.5x their size over gRPC, ~1x over HTTP: benchmarks/bench_inflight_memory.py).
    """
    from benchmarks.bench_inflight_memory import MIB, measure
    from toolscore.collector.receiver.limits import DEFAULT_MEMORY_BUDGET

    clients, mib = 16, 16
    bodies_mb = clients * mib * MIB / 1e6  # 268 MB
    for burst in measure(tmp_path, 1, clients, mib, ("grpc", "http")):
        ok, refused = ("OK", "UNAVAILABLE") if burst.transport == "grpc" else ("200", "503")
        assert burst.answers == {ok: 1, refused: clients - 1}, burst
        # HTTP bodies arriving together are read before a slot is taken (a slow upload must
        # not hold one), within the in-flight memory budget
        bound = bodies_mb / 2 if burst.transport == "grpc" else 1.1 * DEFAULT_MEMORY_BUDGET / 1e6
        assert burst.peak_growth_mb < bound, burst
