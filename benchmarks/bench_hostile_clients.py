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
    # With scoring on: the tree's peak from the burst until every conversation was scored, the
    # peak of the scoring processes alone (the tree but serve), and how long scoring took.
    scored_peak_mb: float | None = None
    scoring_peak_mb: float | None = None
    scored_s: float | None = None


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
    return sum(tree_rss_parts(pid))


def tree_rss_parts(pid: int) -> tuple[int, int]:
    """Resident memory (KiB) of ``pid`` itself and of its descendants together."""
    own, total, todo = 0, 0, [pid]
    while todo:
        current = todo.pop()
        with contextlib.suppress(OSError):
            status = Path(f"/proc/{current}/status").read_text()
            rss = int(status.split("VmRSS:", 1)[1].split()[0]) if "VmRSS:" in status else 0
            own = rss if current == pid else own
            total += rss
            for task in Path(f"/proc/{current}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
    return own, total - own


class TreeSampler:
    """The peak of ``tree_rss_kb(pid)`` (and of its descendants alone), sampled every 20 ms in
    a thread."""

    def __init__(self, pid: int) -> None:
        self._pid = pid
        self._stop = threading.Event()
        self.peak_kb = tree_rss_kb(pid)
        self.children_peak_kb = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            own, children = tree_rss_parts(self._pid)
            self.peak_kb = max(self.peak_kb, own + children)
            self.children_peak_kb = max(self.children_peak_kb, children)


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


def unscored_in(db: Path) -> int:
    """Conversations still to score (open, or waiting for a scoring)."""
    with contextlib.closing(sqlite3.connect(db, timeout=60)) as conn:
        query = "SELECT count(*) FROM conversations WHERE status = 'open' OR needs_scoring"
        return int(conn.execute(query).fetchone()[0])


def until_scored(db: Path, timeout_s: float = 600) -> float:
    """Wait until every conversation is scored; how long it took."""
    started = time.monotonic()
    while unscored_in(db) and time.monotonic() - started < timeout_s:
        time.sleep(0.2)
    return time.monotonic() - started


def burst_run(
    server: Server, transport: str, bodies: list[bytes], spans: int, until_done: bool = True
) -> BurstRun:
    """``bodies`` (of ``spans`` spans each) sent at once, each by its own client on its own
    connection, retried while refused as retryable; see BurstRun."""
    stored_before = spans_in(server.db)
    time.sleep(0.5)
    server.reset_peak()
    before = tree_rss_kb(server.proc.pid)
    answers: Counter[str] = Counter()
    started = time.monotonic()
    with TreeSampler(server.proc.pid) as whole:
        with (
            TreeSampler(server.proc.pid) as sampler,
            HealthProbe(server.http_url) as probe,
            ThreadPoolExecutor(len(bodies)) as pool,
        ):
            acked = list(
                pool.map(lambda b: send_until_stored(server, transport, b, answers), bodies)
            )
        seconds = time.monotonic() - started
        peak = max(sampler.peak_kb, server.status_kb("VmHWM"))
        scored_s = until_scored(server.db) if server.scoring and until_done else None
    time.sleep(2)
    scoring = (whole.peak_kb / 1024, whole.children_peak_kb / 1024, scored_s)
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
        *(scoring if scored_s is not None else (None, None, None)),
    )


def tiny_run(server: Server, transport: str, clients: int, spans: int, first: int) -> BurstRun:
    bodies = [tiny_spans(spans, first + i * spans) for i in range(clients)]
    return burst_run(server, transport, bodies, spans)


def big_run(server: Server, transport: str, clients: int, mib: int, first: int) -> BurstRun:
    """``clients`` requests of ``mib`` MiB each: 8 spans of big string attributes (truncated
    when decoded: what costs memory is the bodies and their parsing)."""
    bodies = [request_bytes(first + i, mib) for i in range(clients)]
    return burst_run(server, transport, bodies, SPANS_PER_REQUEST)


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
    from benchmarks.kept_messages import backlog, distinct, kept

    scenarios = {"big": big, "kept": kept, "distinct": distinct, "backlog": backlog, "tiny": tiny}
    runs = scenarios[name](clients, spans)
    what = {
        "big": f"MiB requests of {SPANS_PER_REQUEST} spans",
        "kept": "spans of 62,000-byte messages (kept whole)",
        "distinct": "spans of distinct 62,000-byte messages (kept whole)",
        "backlog": "spans of distinct 62,000-byte messages (kept whole)",
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
        if run.scored_peak_mb is not None:
            print(
                f"     until scored ({run.scored_s:.1f} s after the last acknowledgement): "
                f"process tree peak {run.scored_peak_mb:.0f} MB, scoring processes "
                f"{run.scoring_peak_mb:.0f} MB",
                flush=True,
            )
