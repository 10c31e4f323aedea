"""A real OTLP sink for tests: gRPC TraceService + LogsService, and OTLP/HTTP, on ephemeral ports.

It records every request it acknowledged (decoded protobuf) with the metadata/headers it got, and
can be stopped and started again on the same port to simulate an outage.
"""

from __future__ import annotations

import gzip
import threading
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span


def any_value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind) if kind else None


def attrs(kvs: Any) -> dict[str, Any]:
    return {kv.key: any_value(kv.value) for kv in kvs}


@dataclass
class Received:
    lock: threading.Lock = field(default_factory=threading.Lock)
    traces: list[trace_service_pb2.ExportTraceServiceRequest] = field(default_factory=list)
    logs: list[logs_service_pb2.ExportLogsServiceRequest] = field(default_factory=list)
    metadata: list[dict[str, str]] = field(default_factory=list)

    def spans(self) -> list[tuple[dict[str, Any], str, Span]]:
        """(resource attributes, scope name, span) for every span received."""
        with self.lock:
            return [
                (attrs(rs.resource.attributes), ss.scope.name, span)
                for req in self.traces
                for rs in req.resource_spans
                for ss in rs.scope_spans
                for span in ss.spans
            ]

    def log_records(self) -> list[tuple[dict[str, Any], str, LogRecord]]:
        with self.lock:
            return [
                (attrs(rl.resource.attributes), sl.scope.name, rec)
                for req in self.logs
                for rl in req.resource_logs
                for sl in rl.scope_logs
                for rec in sl.log_records
            ]


class GrpcSink:
    """OTLP/gRPC sink; ``stop()`` then ``start()`` reuses the port. ``logs=False``: no logs
    service (the target answers UNIMPLEMENTED, as Phoenix does)."""

    def __init__(self, logs: bool = True) -> None:
        self.logs = logs
        self.received = Received()
        self.port = 0
        self._server: grpc.Server | None = None

    def start(self) -> GrpcSink:
        received = self.received

        class Traces(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                with received.lock:
                    received.traces.append(request)
                    received.metadata.append(dict(context.invocation_metadata()))
                return trace_service_pb2.ExportTraceServiceResponse()

        class Logs(logs_service_pb2_grpc.LogsServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                with received.lock:
                    received.logs.append(request)
                    received.metadata.append(dict(context.invocation_metadata()))
                return logs_service_pb2.ExportLogsServiceResponse()

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), server)
        if self.logs:
            logs_service_pb2_grpc.add_LogsServiceServicer_to_server(Logs(), server)
        self.port = server.add_insecure_port(f"127.0.0.1:{self.port}")
        server.start()
        self._server = server
        return self

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=None).wait()
            self._server = None


class HttpSink:
    """OTLP/HTTP (protobuf) sink on ``/v1/traces`` and ``/v1/logs``, gzip aware. ``status``
    maps a path to the error status it answers (e.g. ``{"/v1/logs": 405}``, as Phoenix)."""

    def __init__(self, status: dict[str, int] | None = None) -> None:
        self.status = dict(status or {})
        self.received = Received()
        self.paths: list[str] = []
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> HttpSink:
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path in sink.status:
                    with sink.received.lock:
                        sink.paths.append(self.path)
                    self.send_response(sink.status[self.path])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                with sink.received.lock:
                    sink.paths.append(self.path)
                    sink.received.metadata.append({k.lower(): v for k, v in self.headers.items()})
                    if self.path == "/v1/traces":
                        req = trace_service_pb2.ExportTraceServiceRequest()
                        req.ParseFromString(body)
                        sink.received.traces.append(req)
                        out = trace_service_pb2.ExportTraceServiceResponse()
                    else:
                        req2 = logs_service_pb2.ExportLogsServiceRequest()
                        req2.ParseFromString(body)
                        sink.received.logs.append(req2)
                        out = logs_service_pb2.ExportLogsServiceResponse()  # type: ignore[assignment]
                payload = out.SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    @property
    def endpoint(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
