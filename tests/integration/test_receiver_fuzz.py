"""A real server answers fuzzed OTLP bodies with 200 or 400 only: never 500, never "retry".

Bodies come from tests/otlp_fuzz.py (protobuf and OTLP/JSON, traces and logs: edge values,
lone surrogates, deep nesting, corrupted bytes) and are posted to a running ``serve`` on SQLite
and PostgreSQL, with the conversation hook. Every answer must be a parseable OTLP response
(200) or google.rpc.Status (400); a 503 would mean the database refused something decode let
through, a 500 a crash. The same bodies then go over gRPC for the protobuf ones.
"""

from __future__ import annotations

from typing import Any

import grpc
import pytest
import requests
from google.rpc import status_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from tests.integration.serve_harness import RunningServer, server_settings
from tests.otlp_fuzz import json_bodies, protobuf_bodies
from toolscore.collector.pipeline.extension import pipeline_extension
from toolscore.collector.pipeline.options import PipelineOptions

RESPONSES = {"traces": ExportTraceServiceResponse, "logs": ExportLogsServiceResponse}
GRPC_METHODS = {
    "traces": "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
    "logs": "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
}
CASES = st.one_of(
    *(
        st.tuples(st.just(signal), st.just(media), bodies(signal))
        for signal in ("traces", "logs")
        for media, bodies in (
            ("application/x-protobuf", protobuf_bodies),
            ("application/json", json_bodies),
        )
    )
)


def _check_http(session: requests.Session, url: str, signal: str, media: str, body: bytes) -> int:
    resp = session.post(f"{url}/v1/{signal}", data=body, headers={"Content-Type": media})
    assert resp.status_code in (200, 400), (resp.status_code, resp.text[:300])
    assert resp.headers["Content-Type"].startswith(media)  # never aiohttp's plain-text 500
    if media == "application/x-protobuf":
        message: Any = (RESPONSES[signal] if resp.status_code == 200 else status_pb2.Status)()
        message.ParseFromString(resp.content)
    return resp.status_code


@pytest.mark.slow  # about 6 s per database
def test_fuzzed_bodies_get_200_or_400_over_http_and_grpc(db_url: str) -> None:
    seen: dict[int, int] = {}
    with (
        RunningServer(server_settings(db_url), [pipeline_extension(PipelineOptions())]) as srv,
        requests.Session() as session,
        grpc.insecure_channel(srv.grpc_target) as channel,
    ):

        @settings(
            max_examples=150,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(CASES)
        def check(case: tuple[str, str, bytes]) -> None:
            signal, media, body = case
            status = _check_http(session, srv.http_url, signal, media, body)
            seen[status] = seen.get(status, 0) + 1
            if media == "application/x-protobuf":
                try:
                    channel.unary_unary(GRPC_METHODS[signal])(body, timeout=30)
                except grpc.RpcError as exc:
                    err: Any = exc
                    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT, err.details()

        check()
    assert seen.get(200, 0) > 0 and seen.get(400, 0) > 0  # both kinds were exercised
