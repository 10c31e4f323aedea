"""Scenarios of bench_inflight_memory.py against a default ``toolscore serve``.

``tiny``: huge requests of tiny spans: peak and held RSS, /health latency while they are decoded.
``big``: huge requests of big attribute values (``--spans``: MiB per request), the same figures.
``slowloris``: slow uploads and idle calls while a legitimate client exports.
Run through ``bench_inflight_memory.py --scenario tiny|slowloris``.
"""

from __future__ import annotations

import contextlib
import socket
import sqlite3
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import grpc
import requests
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from benchmarks.bench_inflight_memory import SPANS_PER_REQUEST, TRACES, Server, request_bytes

PB = {"Content-Type": "application/x-protobuf"}
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1), ("grpc.max_send_message_length", -1)]


def tiny_spans(count: int, first: int) -> bytes:
    """One request of ``count`` spans with nothing but ids, a name and times (~48 bytes each)."""
    req = ExportTraceServiceRequest()
    spans = req.resource_spans.add().scope_spans.add().spans
    for i in range(first, first + count):
        span = spans.add()
        span.trace_id = (i // 1000 + 1).to_bytes(16, "big")
        span.span_id = (i + 1).to_bytes(8, "big")
        span.name = "t"
        span.start_time_unix_nano, span.end_time_unix_nano = 1, 2
    return bytes(req.SerializeToString())


@dataclass(frozen=True, slots=True)
class BurstRun:
    transport: str
    clients: int
    spans: int  # per request
    rss_before_mb: float
    peak_mb: float  # RSS of the server's process tree, sampled every 20 ms (and VmHWM)
    held_mb: float  # RSS 2 s after everything was stored
    health_max_s: float  # slowest /health answer while the requests were handled
    seconds: float
    answers: dict[str, int]  # one per attempt: 200/OK, 503/UNAVAILABLE...
    acknowledged: int  # spans of the requests acknowledged (200 / OK)
    stored: int  # rows in the spans table added during the run


TinyRun = BurstRun


class HealthProbe:
    """GET /health every 50 ms in a thread; ``worst`` is the slowest answer (timeouts: 5 s)."""

    def __init__(self, url: str) -> None:
        self._url = url
        self._stop = threading.Event()
        self.worst = 0.0
        self.failures = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> HealthProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        session = requests.Session()
        while not self._stop.wait(0.05):
            started = time.monotonic()
            try:
                ok = session.get(f"{self._url}/health", timeout=5).status_code == 200
            except requests.RequestException:
                ok = False
            self.worst = max(self.worst, time.monotonic() - started)
            self.failures += not ok


def tree_rss_kb(pid: int) -> int:
    """Resident memory of ``pid`` and its descendants (a vanished process counts 0)."""
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        with contextlib.suppress(OSError):
            status = Path(f"/proc/{current}/status").read_text()
            total += int(status.split("VmRSS:", 1)[1].split()[0]) if "VmRSS:" in status else 0
            for task in Path(f"/proc/{current}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
    return total


class TreeSampler:
    """The peak of ``tree_rss_kb(pid)``, sampled every 20 ms in a thread."""

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self._stop = threading.Event()
        self.peak_kb = tree_rss_kb(pid)
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak_kb = max(self.peak_kb, tree_rss_kb(self._pid))


def send_until_stored(server: Server, transport: str, body: bytes, answers: Counter[str]) -> bool:
    """Send ``body`` until it is acknowledged, following Retry-After / RetryInfo (1 s); whether
    it was acknowledged (False: refused for good, or still refused after 300 attempts)."""
    for _ in range(300):
        if transport == "http":
            resp = requests.post(f"{server.http_url}/v1/traces", data=body, headers=PB, timeout=300)
            answers[str(resp.status_code)] += 1
            if resp.status_code != 503:
                return resp.status_code == 200
        else:
            with grpc.insecure_channel(server.grpc_target, OWN_CONNECTION) as channel:
                try:
                    channel.unary_unary(TRACES)(body, timeout=300)
                    answers["OK"] += 1
                    return True
                except grpc.RpcError as exc:
                    code = exc.code().name  # type: ignore[attr-defined]
                    answers[code] += 1
                    if code != "UNAVAILABLE":
                        return False
        time.sleep(1)
    return False


def spans_in(db: Path) -> int:
    with contextlib.closing(sqlite3.connect(db, timeout=60)) as conn:
        return int(conn.execute("SELECT count(*) FROM spans").fetchone()[0])


def burst_run(server: Server, transport: str, bodies: list[bytes], spans: int) -> BurstRun:
    """``bodies`` (of ``spans`` spans each) sent at once, each by its own client on its own
    connection, retried while refused as retryable; see BurstRun."""
    stored_before = spans_in(server.db)
    time.sleep(0.5)
    server.reset_peak()
    before = tree_rss_kb(server.proc.pid)
    answers: Counter[str] = Counter()
    started = time.monotonic()
    with (
        TreeSampler(server.proc.pid) as sampler,
        HealthProbe(server.http_url) as probe,
        ThreadPoolExecutor(len(bodies)) as pool,
    ):
        acked = list(pool.map(lambda b: send_until_stored(server, transport, b, answers), bodies))
    seconds = time.monotonic() - started
    peak = max(sampler.peak_kb, server.status_kb("VmHWM"))
    time.sleep(2)
    return BurstRun(
        transport,
        len(bodies),
        spans,
        before / 1024,
        peak / 1024,
        tree_rss_kb(server.proc.pid) / 1024,
        probe.worst,
        seconds,
        dict(answers),
        sum(acked) * spans,
        spans_in(server.db) - stored_before,
    )


def tiny_run(server: Server, transport: str, clients: int, spans: int, first: int) -> BurstRun:
    bodies = [tiny_spans(spans, first + i * spans) for i in range(clients)]
    return burst_run(server, transport, bodies, spans)


def big_run(server: Server, transport: str, clients: int, mib: int, first: int) -> BurstRun:
    """``clients`` requests of ``mib`` MiB each: 8 spans of big string attributes (truncated
    when decoded: what costs memory is the bodies and their parsing)."""
    bodies = [request_bytes(first + i, mib) for i in range(clients)]
    return burst_run(server, transport, bodies, SPANS_PER_REQUEST)


def kept_spans(trace: int, spans: int, value_bytes: int) -> bytes:
    """One request of ``spans`` spans, each with a message attribute of ``value_bytes`` (under
    ``--max-attribute-bytes``: kept whole, decoded, stored and scored)."""
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    req = ExportTraceServiceRequest()
    scope = req.resource_spans.add().scope_spans.add()
    value = AnyValue(string_value="y" * value_bytes)
    for i in range(spans):
        scope.spans.append(
            Span(
                trace_id=trace.to_bytes(16, "big"),
                span_id=(i + 1).to_bytes(8, "big"),
                name="kept",
                start_time_unix_nano=1,
                end_time_unix_nano=2,
                attributes=[KeyValue(key="gen_ai.input.messages", value=value)],
            )
        )
    return bytes(req.SerializeToString())


def kept(clients: int, spans: int) -> list[BurstRun]:
    """``clients`` requests of ``spans`` spans of 62,000-byte messages (900: ~56 MB each)."""
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp) / "kept.db", None, None)
        try:
            return [
                burst_run(
                    server, t, [kept_spans(first + i, spans, 62_000) for i in range(clients)], spans
                )
                for t, first in (("http", 3_000), ("grpc", 4_000))
            ]
        finally:
            server.stop()


def tiny(clients: int, spans: int) -> list[BurstRun]:
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp) / "tiny.db", None, None)
        try:
            return [
                tiny_run(server, t, clients, spans, first)
                for t, first in (("http", 0), ("grpc", 100_000_000))
            ]
        finally:
            server.stop()


def big(clients: int, mib: int) -> list[BurstRun]:
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp) / "big.db", None, None)
        try:
            return [
                big_run(server, t, clients, mib, first)
                for t, first in (("http", 1_000), ("grpc", 2_000))
            ]
        finally:
            server.stop()


def _never(stop: threading.Event) -> Iterator[bytes]:
    stop.wait()
    return
    yield b""  # pragma: no cover


def slowloris(exports: int = 100, attackers: int = 70) -> dict[str, float]:
    """Legitimate exports served while slow uploads and idle calls try to hold the server."""
    from tests.integration.test_receiver_concurrency import _request

    stop = threading.Event()
    with tempfile.TemporaryDirectory() as tmp:
        server = Server(Path(tmp) / "slow.db", None, None)
        port = int(server.http_url.rsplit(":", 1)[1])
        socks = []
        try:
            for _ in range(attackers):
                sock = socket.create_connection(("127.0.0.1", port))
                sock.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: "
                             b"application/x-protobuf\r\nContent-Length: 1000\r\n\r\n")  # fmt: skip
                socks.append(sock)
            threading.Thread(target=_drip, args=(socks, stop), daemon=True).start()
            idle = grpc.insecure_channel(server.grpc_target, OWN_CONNECTION)
            calls = [idle.stream_unary(TRACES).future(_never(stop)) for _ in range(attackers)]
            time.sleep(1.5)
            result = _legit(server, exports, _request)
            stop.set()
            for call in calls:
                call.cancel()
            idle.close()
            return result
        finally:
            stop.set()
            for sock in socks:
                sock.close()
            server.stop()


def _drip(socks: list[socket.socket], stop: threading.Event) -> None:
    while not stop.wait(1.0):
        for sock in socks:
            with contextlib.suppress(OSError):
                sock.sendall(b"\n")


def _legit(server: Server, exports: int, make: object) -> dict[str, float]:
    build = make  # tests.integration.test_receiver_concurrency._request
    ok = {"http": 0, "grpc": 0}
    started = time.monotonic()
    with grpc.insecure_channel(server.grpc_target, OWN_CONNECTION) as channel:
        for i in range(exports):
            body = build(10_000 + i)  # type: ignore[operator]
            resp = requests.post(f"{server.http_url}/v1/traces", data=body, headers=PB, timeout=10)
            ok["http"] += resp.status_code == 200
            try:
                channel.unary_unary(TRACES)(build(20_000 + i), timeout=10)  # type: ignore[operator]
                ok["grpc"] += 1
            except grpc.RpcError:
                pass
    return {"http_served": ok["http"] / exports, "grpc_served": ok["grpc"] / exports,
            "seconds": time.monotonic() - started}  # fmt: skip


def run_scenario(name: str, clients: int, spans: int) -> None:
    if name == "slowloris":
        r = slowloris()
        print(f"slowloris (70 slow HTTP uploads, 70 idle gRPC calls): legitimate exports served "
              f"HTTP {r['http_served']:.0%}, gRPC {r['grpc_served']:.0%}, 200 exports in "
              f"{r['seconds']:.2f} s")  # fmt: skip
        return
    runs = {"big": big, "kept": kept, "tiny": tiny}[name](clients, spans)
    what = {
        "big": f"MiB requests of {SPANS_PER_REQUEST} spans",
        "kept": "spans of 62,000-byte messages (kept whole)",
        "tiny": "tiny spans",
    }[name]
    for run in runs:
        print(
            f"{run.transport:4} {run.clients} x {spans:,} {what}: RSS "
            f"{run.rss_before_mb:.0f} MB -> peak {run.peak_mb:.0f} MB, "
            f"{run.held_mb:.0f} MB after; /health worst "
            f"{run.health_max_s:.3f} s; {run.stored:,} spans stored "
            f"({run.acknowledged:,} acknowledged) in {run.seconds:.1f} s; answers {run.answers}",
            flush=True,
        )
