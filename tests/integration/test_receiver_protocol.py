"""OTLP protocol behaviour of ``toolscore serve``: statuses, partial success, limits, errors."""

from __future__ import annotations

import gzip
import json
import time
import zlib
from collections.abc import Sequence

import grpc
import pytest
import requests
from google.rpc import error_details_pb2, status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span
from sqlalchemy import Connection

from tests.integration.serve_harness import RunningServer, count_rows, server_settings
from toolscore.collector.components import AppContext, Extension
from toolscore.collector.ingest.writer import StoredBatch

TRACES = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
LOGS = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
PB = {"Content-Type": "application/x-protobuf"}


def _request(n: int, bad: Sequence[int] = (), trace: int = 1) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    spans = req.resource_spans.add().scope_spans.add().spans
    for i in range(n):
        trace_id = trace.to_bytes(16, "big")
        if i in bad:
            trace_id = b"\x01\x02\x03" if i % 2 else bytes(16)
        spans.append(
            Span(
                trace_id=trace_id,
                span_id=(i + 1).to_bytes(8, "big"),
                name=f"s{i}",
                start_time_unix_nano=1,
                end_time_unix_nano=2,
            )
        )
    return req


def _grpc_call(target: str, data: bytes, method: str = TRACES, **kw: object) -> bytes:
    with grpc.insecure_channel(target) as channel:
        call = channel.unary_unary(method)
        return call(data, timeout=10, **kw)  # type: ignore[no-any-return]


@pytest.fixture
def srv(sqlite_url: str):  # type: ignore[no-untyped-def]
    with RunningServer(server_settings(sqlite_url, max_request_bytes=200_000)) as server:
        yield server


def test_full_success_leaves_partial_success_unset(srv: RunningServer, sqlite_url: str) -> None:
    reply = ExportTraceServiceResponse.FromString(
        _grpc_call(srv.grpc_target, _request(3).SerializeToString())
    )
    assert not reply.HasField("partial_success")
    resp = requests.post(
        f"{srv.http_url}/v1/traces", data=_request(3, trace=2).SerializeToString(), headers=PB
    )
    assert resp.status_code == 200
    assert resp.headers["Content-Type"] == "application/x-protobuf"
    assert not ExportTraceServiceResponse.FromString(resp.content).HasField("partial_success")
    assert count_rows(sqlite_url) == 6


def test_empty_requests_succeed_and_store_nothing(srv: RunningServer, sqlite_url: str) -> None:
    empty = ExportTraceServiceRequest()
    envelope = ExportTraceServiceRequest()
    envelope.resource_spans.add().scope_spans.add()
    for req in (empty, envelope):
        reply = ExportTraceServiceResponse.FromString(
            _grpc_call(srv.grpc_target, req.SerializeToString())
        )
        assert not reply.HasField("partial_success")
    resp = requests.post(f"{srv.http_url}/v1/logs", data=b"", headers=PB)
    assert resp.status_code == 200
    assert count_rows(sqlite_url) == 0


def test_invalid_ids_are_partial_success_and_the_rest_is_stored(
    srv: RunningServer, sqlite_url: str
) -> None:
    reply = ExportTraceServiceResponse.FromString(
        _grpc_call(srv.grpc_target, _request(10, bad=(2, 5, 8)).SerializeToString())
    )
    assert reply.partial_success.rejected_spans == 3
    assert "trace_id" in reply.partial_success.error_message
    assert count_rows(sqlite_url) == 7

    resp = requests.post(
        f"{srv.http_url}/v1/traces",
        data=json.dumps(
            {
                "resourceSpans": [
                    {
                        "scopeSpans": [
                            {
                                "spans": [
                                    {"traceId": "00" * 16, "spanId": "01" * 8, "name": "zero"},
                                    {"traceId": "ab" * 16, "spanId": "01" * 8, "name": "good"},
                                ]
                            }
                        ]
                    }
                ]
            }
        ),
        headers={"Content-Type": "application/json; charset=utf-8"},
    )
    assert resp.status_code == 200
    assert resp.headers["Content-Type"].startswith("application/json")
    body = resp.json()
    assert body["partialSuccess"]["rejectedSpans"] == "1"
    assert "all zeros" in body["partialSuccess"]["errorMessage"]
    assert count_rows(sqlite_url) == 8


def test_corrupt_body_is_invalid_argument_and_stores_nothing(
    srv: RunningServer, sqlite_url: str
) -> None:
    garbage = b"\xff\xff\xff\xff\x0f garbage"
    with pytest.raises(grpc.RpcError) as info:
        _grpc_call(srv.grpc_target, garbage)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as info:
        _grpc_call(srv.grpc_target, garbage, method=LOGS)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT

    resp = requests.post(f"{srv.http_url}/v1/traces", data=garbage, headers=PB)
    assert resp.status_code == 400
    status = status_pb2.Status.FromString(resp.content)
    assert "not a valid ExportTraceServiceRequest" in status.message
    resp = requests.post(
        f"{srv.http_url}/v1/traces", data=b"{not json", headers={"Content-Type": "APPLICATION/JSON"}
    )
    assert resp.status_code == 400 and "not valid JSON" in resp.json()["message"]
    assert count_rows(sqlite_url) == 0


def test_oversize_requests_are_refused_after_decompression(
    srv: RunningServer, sqlite_url: str
) -> None:
    big = _request(1)
    big.resource_spans[0].scope_spans[0].spans[0].name = "x" * 250_000
    data = big.SerializeToString()
    with pytest.raises(grpc.RpcError) as info:
        _grpc_call(srv.grpc_target, data)
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    trailers = dict(info.value.trailing_metadata() or ())
    assert "google.rpc.retryinfo-bin" not in trailers  # not retryable

    with pytest.raises(grpc.RpcError) as info:  # small on the wire, large once inflated
        _grpc_call(srv.grpc_target, data, compression=grpc.Compression.Gzip)
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED

    assert requests.post(f"{srv.http_url}/v1/traces", data=data, headers=PB).status_code == 413
    bomb = gzip.compress(b"\x00" * 50_000_000)  # ~50 KB that inflates to 50 MB
    for encoding, body in (("gzip", bomb), ("deflate", zlib.compress(b"\x00" * 50_000_000))):
        resp = requests.post(
            f"{srv.http_url}/v1/traces",
            data=body,
            headers={**PB, "Content-Encoding": encoding},
        )
        assert resp.status_code == 413, encoding
    assert count_rows(sqlite_url) == 0


def test_protocol_errors_get_the_right_http_codes(srv: RunningServer) -> None:
    url = srv.http_url
    assert requests.get(f"{url}/v1/traces").status_code == 405
    assert requests.put(f"{url}/v1/logs", data=b"", headers=PB).status_code == 405
    assert requests.post(f"{url}/v1/metrics", data=b"", headers=PB).status_code == 404
    resp = requests.post(f"{url}/v1/traces", data=b"", headers={"Content-Type": "text/plain"})
    assert resp.status_code == 415
    assert requests.post(f"{url}/v1/traces", data=b"").status_code == 415
    resp = requests.post(f"{url}/v1/traces", data=b"", headers={**PB, "Content-Encoding": "br"})
    assert resp.status_code == 400
    resp = requests.post(
        f"{url}/v1/traces", data=b"not gzip", headers={**PB, "Content-Encoding": "gzip"}
    )
    assert resp.status_code == 400
    # the error body uses the request's encoding
    resp = requests.post(
        f"{url}/v1/traces",
        data=b"not gzip",
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
    )
    assert resp.status_code == 400 and "gzip" in resp.json()["message"]


def test_grpc_health_service_reports_serving(srv: RunningServer) -> None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(srv.grpc_target) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        for service in ("", "opentelemetry.proto.collector.trace.v1.TraceService"):
            reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_logs_endpoints_answer_with_logs_responses(srv: RunningServer) -> None:
    reply = ExportLogsServiceResponse.FromString(_grpc_call(srv.grpc_target, b"", method=LOGS))
    assert not reply.HasField("partial_success")


def test_metrics_count_accepted_rejected_and_failed(srv: RunningServer) -> None:
    _grpc_call(srv.grpc_target, _request(10, bad=(1, 2, 3)).SerializeToString())
    requests.post(f"{srv.http_url}/v1/traces", data=b"\xff\xff", headers=PB)
    text = requests.get(f"{srv.http_url}/metrics").text
    assert 'toolscore_receiver_accepted_items_total{signal="traces",transport="grpc"} 7.0' in text
    assert 'toolscore_receiver_rejected_items_total{signal="traces",transport="grpc"} 3.0' in text
    assert 'toolscore_receiver_failed_requests_total{status="400",transport="http"} 1.0' in text
    assert "toolscore_ingest_commit_seconds_count 1.0" in text
    health = requests.get(f"{srv.http_url}/health")
    assert health.status_code == 200 and health.json() == {"status": "ok"}


class _SlowHook:
    """Holds each ingest transaction open, so that the queue fills up."""

    def on_batch(self, conn: Connection, batch: StoredBatch) -> None:
        time.sleep(1.0)


def test_full_queue_is_unavailable_with_retry_info(sqlite_url: str) -> None:
    def slow(_ctx: AppContext) -> Extension:
        return Extension(hooks=[_SlowHook()])

    settings = server_settings(
        sqlite_url, max_queued_spans=10, max_batch_spans=10, retry_after_s=0.25
    )
    with RunningServer(settings, [slow]) as srv, grpc.insecure_channel(srv.grpc_target) as ch:
        call = ch.unary_unary(TRACES)
        first = call.future(_request(8, trace=1).SerializeToString(), timeout=10)
        time.sleep(0.3)  # the first batch is being committed (held by the hook)
        with pytest.raises(grpc.RpcError) as info:
            call(_request(8, trace=2).SerializeToString(), timeout=10)
        assert info.value.code() == grpc.StatusCode.UNAVAILABLE
        trailers = dict(info.value.trailing_metadata() or ())
        retry = error_details_pb2.RetryInfo.FromString(trailers["google.rpc.retryinfo-bin"])
        assert retry.retry_delay.ToMilliseconds() == 250
        details = status_pb2.Status.FromString(trailers["grpc-status-details-bin"])
        assert details.details[0].Is(error_details_pb2.RetryInfo.DESCRIPTOR)

        resp = requests.post(
            f"{srv.http_url}/v1/traces", data=_request(8, trace=3).SerializeToString(), headers=PB
        )
        assert resp.status_code == 503
        assert resp.headers["Retry-After"] == "1"
        assert "queue full" in status_pb2.Status.FromString(resp.content).message
        first.result()
    assert count_rows(sqlite_url) == 8  # only the acknowledged request
