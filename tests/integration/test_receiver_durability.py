"""Durability: a database outage, a locked SQLite file and SIGTERM lose nothing acknowledged and
store nothing twice."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import grpc
import requests
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
from sqlalchemy.engine import make_url

from tests.integration.serve_harness import RunningServer, agent_spans, count_rows, server_settings
from toolscore.storage.migrate import upgrade
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.telemetry.spans import spans_table

TRACES = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


class ToggleProxy:
    """A TCP proxy to the database that can drop every connection and refuse new ones."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._up = True
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self._up:
                client.close()
                continue
            upstream = socket.create_connection(self._target)
            with self._lock:
                self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def down(self) -> None:
        self._up = False
        with self._lock:
            for conn in self._conns:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
            self._conns.clear()

    def up(self) -> None:
        self._up = True

    def close(self) -> None:
        self.down()
        self._listener.close()


def test_database_outage_then_back_loses_nothing_and_stores_once(postgres_url: str) -> None:
    upgrade(postgres_url)
    real = make_url(postgres_url)
    proxy = ToggleProxy(real.host or "127.0.0.1", real.port or 5432)
    via_proxy = real.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    first, second, third = agent_spans(tools=5), agent_spans(tools=6), agent_spans(tools=7)
    settings = server_settings(via_proxy, retry_after_s=0.5, upgrade=False)
    try:
        with RunningServer(settings) as srv:
            grpc_exp = GrpcSpanExporter(endpoint=srv.grpc_target, insecure=True, timeout=20)
            http_exp = HttpSpanExporter(endpoint=f"{srv.http_url}/v1/traces", timeout=20)
            assert grpc_exp.export(first) == SpanExportResult.SUCCESS

            proxy.down()
            assert requests.get(f"{srv.http_url}/health", timeout=10).status_code == 503
            results: dict[str, SpanExportResult] = {}
            senders = [
                threading.Thread(
                    target=lambda: results.__setitem__("grpc", grpc_exp.export(second))
                ),
                threading.Thread(
                    target=lambda: results.__setitem__("http", http_exp.export(third))
                ),
            ]
            for t in senders:
                t.start()
            time.sleep(2.5)  # both exporters are refused (retryable) and back off meanwhile
            failures = srv.app.metrics.commit_failures._value.get()
            proxy.up()
            for t in senders:
                t.join(30)
            assert failures >= 2
            assert requests.get(f"{srv.http_url}/health", timeout=10).status_code == 200
            assert results == {"grpc": SpanExportResult.SUCCESS, "http": SpanExportResult.SUCCESS}
            # a resend after the outage (as a client that timed out would) changes nothing
            assert grpc_exp.export(second) == SpanExportResult.SUCCESS
    finally:
        proxy.close()
    assert count_rows(postgres_url) == 5 + 6 + 7


def test_locked_sqlite_file_delays_but_loses_nothing(sqlite_url: str) -> None:
    spans = agent_spans(tools=7)
    with RunningServer(server_settings(sqlite_url)) as srv:
        locker = create_engine(sqlite_url)
        with locker.connect() as conn:
            conn.exec_driver_sql("BEGIN EXCLUSIVE")
            exporter = GrpcSpanExporter(endpoint=srv.grpc_target, insecure=True, timeout=20)
            result: list[SpanExportResult] = []
            sender = threading.Thread(target=lambda: result.append(exporter.export(spans)))
            sender.start()
            time.sleep(1.0)
            assert not result  # not acknowledged while the file is locked
            conn.exec_driver_sql("COMMIT")
        sender.join(20)
        locker.dispose()
        assert result == [SpanExportResult.SUCCESS]
    assert count_rows(sqlite_url) == 7


def _request(trace: int, spans: int) -> bytes:
    req = ExportTraceServiceRequest()
    out = req.resource_spans.add().scope_spans.add().spans
    for i in range(spans):
        out.append(
            Span(
                trace_id=trace.to_bytes(16, "big"),
                span_id=(i + 1).to_bytes(8, "big"),
                name="load",
                start_time_unix_nano=1,
                end_time_unix_nano=2,
            )
        )
    return req.SerializeToString()


def test_sigterm_stops_cleanly_and_keeps_every_acknowledged_span(tmp_path: Path) -> None:
    db = tmp_path / "serve.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolscore", "serve", "--db", f"sqlite:///{db}",
         "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"],
        stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )  # fmt: skip
    assert proc.stderr is not None
    line = ""
    deadline = time.monotonic() + 60
    while "OTLP/gRPC on" not in line and time.monotonic() < deadline:
        line = proc.stderr.readline()
    match = re.search(
        r"OTLP/gRPC on 127\.0\.0\.1:(\d+), OTLP/HTTP on http://127\.0\.0\.1:(\d+)", line
    )
    assert match, line
    assert f"database sqlite:///{db}" in line
    target = f"127.0.0.1:{match.group(1)}"

    acked: list[int] = []
    refused: list[grpc.StatusCode] = []
    stop = threading.Event()

    def send(worker: int) -> None:
        with grpc.insecure_channel(target) as channel:
            call = channel.unary_unary(TRACES)
            trace = worker * 1_000_000
            while not stop.is_set():
                trace += 1
                try:
                    call(_request(trace, 50), timeout=10)
                except grpc.RpcError as exc:
                    refused.append(exc.code())
                    if exc.code() != grpc.StatusCode.CANCELLED:
                        return
                else:
                    acked.append(trace)

    workers = [threading.Thread(target=send, args=(w,)) for w in range(1, 5)]
    for w in workers:
        w.start()
    time.sleep(1.5)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0
    stop.set()
    for w in workers:
        w.join(15)
    rest = proc.stderr.read()
    assert "stopped" in rest

    assert len(acked) > 4
    engine = create_engine(f"sqlite:///{db}")
    with engine.connect() as conn:
        stored = {int(t, 16) for t in conn.execute(select(spans_table.c.trace_id)).scalars()}
        total = len(conn.execute(select(spans_table.c.span_id)).all())
    engine.dispose()
    assert set(acked) <= stored  # every acknowledged request is in the database
    assert total == 50 * len(stored)  # and whole: nothing half-stored
    # refused calls got retryable codes only (grpc core may CANCEL a call racing its shutdown)
    assert set(refused) <= {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED}


def test_acknowledged_spans_survive_kill_9(tmp_path: Path) -> None:
    db = tmp_path / "killed.db"
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolscore", "serve", "--db", f"sqlite:///{db}",
         "--grpc", "127.0.0.1:0", "--http", "off"],
        stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )  # fmt: skip
    assert proc.stderr is not None
    line = ""
    deadline = time.monotonic() + 60
    while "OTLP/gRPC on" not in line and time.monotonic() < deadline:
        line = proc.stderr.readline()
    match = re.search(r"OTLP/gRPC on 127\.0\.0\.1:(\d+)", line)
    assert match, line
    try:
        with grpc.insecure_channel(f"127.0.0.1:{match.group(1)}") as channel:
            call = channel.unary_unary(TRACES)
            for trace in range(1, 6):
                call(_request(trace, 100), timeout=10)
    finally:
        proc.kill()  # SIGKILL right after the last acknowledgement: no shutdown code runs
        proc.wait(10)
    assert count_rows(f"sqlite:///{db}") == 500
