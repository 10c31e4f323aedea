"""Memory held by export requests in flight, with and without ``--max-concurrent-requests``.

Starts ``toolscore serve`` (SQLite, no scoring) as a child process and holds its database's write
lock, so that admitted requests stay in flight (the ingest writer waits out SQLite's busy
timeout). Then ``--clients`` concurrent requests of ``--mib`` MiB each arrive at once, over gRPC
(raw unary calls, as the SDK exporter makes them) or HTTP (``POST /v1/traces``). Once each of
them is either queued for the database or refused (read from ``/metrics``), the server's peak
resident memory (``VmHWM``, reset before the burst through ``/proc/PID/clear_refs``) is compared
with its memory before the burst. The lock is then released and every admitted request commits.

Peer in the same run: the same burst against a cap of ``--clients`` (no request refused), i.e.
the memory the server needs without a cap.

    .venv/bin/python benchmarks/bench_inflight_memory.py --clients 16 --mib 8 --runs 3

Two more scenarios, against a server with default settings:

``--scenario tiny``: ``--clients`` concurrent requests of ``--spans`` tiny spans each (1,000,000:
48 MiB of protobuf) over HTTP, then gRPC, each retried on 503 / UNAVAILABLE until stored; the
server's peak RSS (VmHWM), its RSS once they are stored, the slowest ``/health`` answer while
they were decoded, and the spans stored.

``--scenario slowloris``: 70 HTTP uploads at 1 byte/s and 70 gRPC calls that never send their
message (one connection) while a legitimate client sends 100 exports per transport: how many are
served, and how long they take.

    .venv/bin/python benchmarks/bench_inflight_memory.py --scenario tiny --clients 3
    .venv/bin/python benchmarks/bench_inflight_memory.py --scenario big --clients 16 --spans 54

``--scenario kept``: ``--clients`` requests of ``--spans`` spans each carrying a 62,000-byte
message (under ``--max-attribute-bytes``, so kept whole: decoded, stored and, with ``--scoring``,
scored). ``--scenario kept --clients 16 --spans 900 --scoring``: sixteen ~56 MB requests.

``--scenario big``: the same with ``--clients`` requests of ``--spans`` MiB of big attribute
values each (54 MiB: 57 MB).

``--scenario distinct``: as ``kept``, each span's message its own random text (not shared when
stored or loaded). ``--scenario backlog``: the ``distinct`` requests over HTTP while serve's
scoring processes are stopped (SIGSTOP), then resumed, so that one round finds them all ready.

With ``--scoring``, the process tree (serve and every descendant, RSS summed every 20 ms) is
sampled from the burst until every conversation is scored, and the scoring processes' own peak
is reported beside it.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc
import requests
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

ROOT = Path(__file__).resolve().parents[1]
TRACES = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
SPANS_PER_REQUEST = 8
MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Burst:
    transport: str
    cap: int
    clients: int
    mib: int
    rss_before_mb: float
    peak_growth_mb: float  # VmHWM during the burst minus VmRSS before it
    answers: dict[str, int]  # gRPC code / HTTP status -> count


def request_bytes(trace: int, mib: int) -> bytes:
    """A trace of SPANS_PER_REQUEST spans whose string attributes add up to ``mib`` MiB (the
    receiver truncates them, so the stored and decoded form stays small: what is measured is
    the memory of the request bodies)."""
    req = ExportTraceServiceRequest()
    scope = req.resource_spans.add().scope_spans.add()
    value = ("x" * 1023 + "\n") * (mib * 1024 // SPANS_PER_REQUEST)
    for i in range(SPANS_PER_REQUEST):
        scope.spans.append(
            Span(
                trace_id=trace.to_bytes(16, "big"),
                span_id=(i + 1).to_bytes(8, "big"),
                name="big",
                start_time_unix_nano=1,
                end_time_unix_nano=2,
                attributes=[KeyValue(key="payload", value=AnyValue(string_value=value))],
            )
        )
    return bytes(req.SerializeToString())


class Server:
    """``toolscore serve`` in a child process, on free ports."""

    #: ``--scoring``: serve as it is by default, scoring in child processes (part of the tree
    #: whose memory is measured), instead of ``--no-scoring``.
    scoring = False

    def __init__(
        self, db: Path, cap: int | None, max_request_mib: int | None, scoring: bool | None = None
    ) -> None:
        self.db = db
        if scoring is not None:
            self.scoring = scoring
        limits = [] if cap is None else ["--max-concurrent-requests", str(cap)]
        if not self.scoring:
            limits.append("--no-scoring")
        if max_request_mib is not None:
            limits += ["--max-request-bytes", str(max_request_mib * MIB)]
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "toolscore", "serve", "--db", f"sqlite:///{db}",
             "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0",
             *limits, "--retry-after", "1"],
            stderr=subprocess.PIPE, text=True, cwd=db.parent,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        assert self.proc.stderr is not None
        line, deadline = "", time.monotonic() + 60
        while "OTLP/gRPC on" not in line and time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            if not line and self.proc.poll() is not None:
                break
        match = re.search(r"OTLP/gRPC on 127\.0\.0\.1:(\d+), OTLP/HTTP on http://[^:]+:(\d+)", line)
        if match is None:
            self.stop()
            raise RuntimeError(f"toolscore serve did not start: {line!r}")
        self.grpc_target = f"127.0.0.1:{match.group(1)}"
        self.http_url = f"http://127.0.0.1:{match.group(2)}"
        # drain stderr, so that the child never blocks on a full pipe
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def status_kb(self, field: str) -> int:
        text = Path(f"/proc/{self.proc.pid}/status").read_text()
        match = re.search(rf"^{field}:\s+(\d+) kB", text, re.MULTILINE)
        assert match is not None, field
        return int(match.group(1))

    def reset_peak(self) -> None:
        Path(f"/proc/{self.proc.pid}/clear_refs").write_text("5")  # VmHWM := VmRSS

    def metric(self, name: str) -> float:
        text = requests.get(f"{self.http_url}/metrics", timeout=10).text
        return sum(
            float(m.group(1))
            for m in re.finditer(rf"^{name}(?:\{{[^}}]*\}})? (\S+)$", text, re.MULTILINE)
        )


@contextmanager
def write_locked(db: Path) -> Iterator[None]:
    """Hold the SQLite write lock: the server's ingest writer waits (its busy timeout)."""
    conn = sqlite3.connect(db, isolation_level=None, timeout=30)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")
    finally:
        conn.close()


def _send(server: Server, transport: str, body: bytes) -> str:
    if transport == "grpc":
        with grpc.insecure_channel(
            server.grpc_target, options=[("grpc.max_send_message_length", 2 * len(body))]
        ) as channel:
            try:
                channel.unary_unary(TRACES)(body, timeout=60)
            except grpc.RpcError as exc:
                return str(exc.code().name)  # type: ignore[attr-defined]
            return "OK"
    resp = requests.post(
        f"{server.http_url}/v1/traces",
        data=body,
        headers={"Content-Type": "application/x-protobuf"},
        timeout=60,
    )
    return str(resp.status_code)


def burst(server: Server, transport: str, cap: int, clients: int, mib: int) -> Burst:
    """``clients`` concurrent requests while ingest is held; see the module docstring."""
    bodies = [request_bytes(1_000_000 * (1 if transport == "grpc" else 2) + i, mib)
              for i in range(clients)]  # fmt: skip
    answers: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(clients)

    def client(i: int) -> None:
        barrier.wait()
        answer = _send(server, transport, bodies[i])
        with lock:
            answers.append(answer)

    def refused_so_far() -> float:  # unread (slots taken) or over the memory budget
        return server.metric("toolscore_receiver_throttled_requests_total") + server.metric(
            "toolscore_receiver_memory_refused_requests_total"
        )

    throttled_before = refused_so_far()
    with write_locked(server.db):
        time.sleep(0.2)
        server.reset_peak()
        before_kb = server.status_kb("VmRSS")
        threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
        for t in threads:
            t.start()
        # every request either admitted and waiting for the (locked) database, or refused
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            # admitted: holding a slot (decoded in chunks, so only its first is queued)
            queued = server.metric("toolscore_receiver_in_flight_requests")
            refused = refused_so_far()
            if queued + refused - throttled_before >= clients:
                break
            time.sleep(0.05)
        else:
            raise RuntimeError("the burst did not settle in 30 s")
        time.sleep(0.3)
        peak_kb = server.status_kb("VmHWM")
    for t in threads:
        t.join(60)
    return Burst(
        transport,
        cap,
        clients,
        mib,
        before_kb / 1024,
        (peak_kb - before_kb) / 1024,
        dict(collections.Counter(answers)),
    )


def measure(
    tmp: Path, cap: int, clients: int, mib: int, transports: tuple[str, ...]
) -> list[Burst]:
    """One server with ``--max-concurrent-requests cap``, one burst per transport."""
    tmp.mkdir(parents=True, exist_ok=True)
    server = Server(tmp / f"cap{cap}.db", cap, max_request_mib=2 * mib + 1)
    try:
        for transport in transports:  # warm up: first calls allocate lazily
            _send(server, transport, request_bytes(7 + len(transport), 1))
        return [burst(server, t, cap, clients, mib) for t in transports]
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--scenario",
        choices=("bodies", "tiny", "big", "kept", "distinct", "backlog", "slowloris"),
        default="bodies",
    )
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--mib", type=int, default=8, help="size of each request")
    parser.add_argument(
        "--spans", type=int, default=1_000_000, help="tiny: spans per request; big: MiB"
    )
    parser.add_argument("--cap", type=int, default=1, help="--max-concurrent-requests measured")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--scoring", action="store_true", help="serve with scoring on (its default), not off"
    )
    args = parser.parse_args()
    Server.scoring = args.scoring
    if args.scenario != "bodies":
        sys.path.insert(0, str(ROOT))  # run as a script: make ``benchmarks`` importable
        from benchmarks import bench_inflight_memory as imported
        from benchmarks.bench_hostile_clients import run_scenario

        # the scenarios use the imported module's Server, not this script's (``__main__``)
        imported.Server.scoring = args.scoring

        run_scenario(args.scenario, args.clients, args.spans)
        return
    rows: dict[tuple[str, int], list[Burst]] = collections.defaultdict(list)
    with tempfile.TemporaryDirectory() as tmp:
        for run in range(args.runs):
            for cap in (args.cap, args.clients):  # interleaved: the peer under the same load
                for b in measure(Path(tmp) / f"r{run}", cap, args.clients, args.mib,
                                 ("grpc", "http")):  # fmt: skip
                    rows[(b.transport, cap)].append(b)
                    print(
                        f"run {run + 1} {b.transport:4} cap {cap:3}: peak +{b.peak_growth_mb:6.1f}"
                        f" MB over {b.rss_before_mb:.0f} MB; answers {b.answers}",
                        flush=True,
                    )
    body_mb = args.clients * args.mib * MIB / 1e6
    print(f"\n{args.clients} concurrent requests of {args.mib} MiB ({body_mb:.0f} MB of bodies), "
          f"medians of {args.runs} runs, server peak RSS growth:")  # fmt: skip
    for transport in ("grpc", "http"):
        capped = statistics.median(b.peak_growth_mb for b in rows[(transport, args.cap)])
        uncapped = statistics.median(b.peak_growth_mb for b in rows[(transport, args.clients)])
        print(
            f"  {transport:4}  cap {args.cap}: {capped:7.1f} MB   no effective cap "
            f"(cap {args.clients}): {uncapped:7.1f} MB   ratio {capped / uncapped:.2f}"
        )


if __name__ == "__main__":
    main()
