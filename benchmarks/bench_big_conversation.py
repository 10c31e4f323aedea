"""One huge conversation on a real ``toolscore serve``: is it scored, and do the others wait?

Starts ``python -m toolscore serve`` with its default settings (settle 5 s, scoring in child
processes: one per core, up to 4) on a fresh database, then posts over OTLP/HTTP one
conversation of ``--spans`` spans (agent turns of 7 spans sharing one ``gen_ai.conversation.id``:
an ``invoke_agent`` root, a ``chat`` with 4 tool calls, 4 ``execute_tool``, a final ``chat``) as
fast as the server takes it, while small neighbour conversations (one turn each) arrive every
``--every`` seconds from the start until the big one is scored. Reports:

- the big conversation: time from its last span to its evaluation rows, and its status;
- neighbours whose last span came after the big one's: latency p50 / max (target: settle + 10 s);
- peak RSS of the serve process and of each scoring child (Linux /proc, polled every 0.2 s).

    .venv/bin/python benchmarks/bench_big_conversation.py \\
        --postgres postgresql+psycopg://postgres@127.0.0.1:5432/test --spans 300000
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

SPANS_PER_TRACE = 7
TRACES_PER_REQUEST = 73  # 511 spans, about the OTel SDK's default batch
CALLS = [("get_weather", {"city": "Paris"}), ("get_time", {"timezone": "Asia/Tokyo"})] * 2


def _trace(req: Any, conv_id: str, now_ns: int) -> None:
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    def kv(key: str, value: str) -> KeyValue:
        return KeyValue(key=key, value=AnyValue(string_value=value))

    trace_id, root = uuid.uuid4().bytes, uuid.uuid4().bytes[:8]
    ids = [f"call_{uuid.uuid4().hex[:10]}" for _ in CALLS]
    user = {"role": "user", "parts": [{"type": "text", "content": "Weather and time?"}]}
    parts = [
        {"type": "tool_call", "id": i, "name": n, "arguments": a}
        for i, (n, a) in zip(ids, CALLS, strict=True)
    ]
    conv = kv("gen_ai.conversation.id", conv_id)
    spans: list[tuple[bytes, bytes | None, str, list[Any]]] = [
        (
            root,
            None,
            "invoke_agent",
            [kv("gen_ai.operation.name", "invoke_agent"), conv, kv("toolscore.reference.id", "b")],
        ),
        (
            uuid.uuid4().bytes[:8],
            root,
            "chat",
            [
                kv("gen_ai.operation.name", "chat"),
                conv,
                kv("gen_ai.input.messages", json.dumps([user])),
                kv("gen_ai.output.messages", json.dumps([{"role": "assistant", "parts": parts}])),
            ],
        ),
    ]
    for call_id, (name, args) in zip(ids, CALLS, strict=True):
        attrs = [
            kv("gen_ai.operation.name", "execute_tool"),
            kv("gen_ai.tool.name", name),
            kv("gen_ai.tool.call.id", call_id),
            kv("gen_ai.tool.call.arguments", json.dumps(args)),
        ]
        spans.append((uuid.uuid4().bytes[:8], root, "execute_tool", attrs))
    spans.append(
        (uuid.uuid4().bytes[:8], root, "chat", [kv("gen_ai.operation.name", "chat"), conv])
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


def _request(conv_ids: list[str]) -> bytes:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.add(key="service.name").value.string_value = "bench-agent"
    rs.scope_spans.add().scope.name = "bench"
    now = time.time_ns()
    for conv_id in conv_ids:
        _trace(req, conv_id, now)
    return req.SerializeToString()


def _post(conn: http.client.HTTPConnection, body: bytes) -> None:
    conn.request(
        "POST", "/v1/traces", body=body, headers={"Content-Type": "application/x-protobuf"}
    )
    response = conn.getresponse()
    response.read()
    if response.status != 200:
        raise RuntimeError(f"export refused: HTTP {response.status}")


def _send_big(port: int, traces: int, senders: int = 2) -> float:
    """Post the big conversation; returns the wall time of its last accepted request."""
    requests = [TRACES_PER_REQUEST] * (traces // TRACES_PER_REQUEST)
    if traces % TRACES_PER_REQUEST:
        requests.append(traces % TRACES_PER_REQUEST)
    lock = threading.Lock()

    def sender() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while True:
            with lock:
                if not requests:
                    return
                n = requests.pop()
            _post(conn, _request(["big"] * n))

    threads = [threading.Thread(target=sender) for _ in range(senders)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.time()


class _Neighbours(threading.Thread):
    """Small conversations, one every ``every`` seconds, until stopped."""

    def __init__(self, port: int, every: float) -> None:
        super().__init__(daemon=True)
        self.port, self.every, self.sent, self.stop = port, every, 0, threading.Event()

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        while not self.stop.is_set():
            _post(conn, _request([f"small-{self.sent:05}"]))
            self.sent += 1
            self.stop.wait(self.every)


class _Rss(threading.Thread):
    """Peak RSS (MB) per process of a process tree, from /proc."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root, self.peak, self.stop = root, {}, threading.Event()
        self.peak: dict[int, float]

    def _tree(self) -> list[int]:
        parents: dict[int, int] = {}
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError):
                continue
        tree, frontier = [self.root], [self.root]
        while frontier:
            frontier = [p for p, parent in parents.items() if parent in frontier]
            tree += frontier
        return tree

    def run(self) -> None:
        page_mb = os.sysconf("SC_PAGE_SIZE") / 2**20
        while not self.stop.wait(0.2):
            for pid in self._tree():
                try:
                    rss = int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page_mb
                except (OSError, ValueError):
                    continue
                self.peak[pid] = max(self.peak.get(pid, 0.0), rss)


def _prepare(db_url: str) -> None:
    from toolscore.storage.expectations.repository import ExpectationData, import_expectations
    from toolscore.storage.migrate import upgrade
    from toolscore.storage.plumbing.engine import create_engine

    upgrade(db_url)
    engine = create_engine(db_url)
    with engine.connect() as conn:
        reference = [{"name": n, "args": a} for n, a in CALLS]
        import_expectations(conn, [ExpectationData(id="b", reference_tool_calls=reference)])
    engine.dispose()


State = dict[str, tuple[str, float | None, bool, float]]


def _state(db_url: str) -> State:
    """Per conversation: status, seconds from its last span to its first evaluation row (None
    until scored), whether it still needs scoring, and its last span's time (epoch s)."""
    from sqlalchemy import func, select

    from toolscore.storage.conversations.tables import conversations, evaluations
    from toolscore.storage.plumbing.engine import create_engine

    engine = create_engine(db_url)
    c, e = conversations.c, evaluations.c
    try:
        with engine.connect() as conn:
            first = (
                select(e.conversation_id, func.min(e.created_at).label("at"))
                .group_by(e.conversation_id)
                .subquery()
            )
            rows = conn.execute(
                select(
                    c.id, c.status, c.last_span_at, c.needs_scoring, c.scored_at, first.c.at
                ).outerjoin(first, first.c.conversation_id == c.id)
            ).all()
    finally:
        engine.dispose()
    out = {}
    for conv, status, last, pending, scored_at, at in rows:
        done = at or (scored_at if status == "error" else None)
        latency = (done - last).total_seconds() if done else None
        out[conv] = (status, latency, pending, last.timestamp())
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _fresh_database(admin_url: str) -> tuple[str, Any]:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"toolscore_bigconv_{uuid.uuid4().hex[:8]}"
    admin = create_engine(make_url(admin_url), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))

    def drop() -> None:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()

    return make_url(admin_url).set(database=name).render_as_string(hide_password=False), drop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", required=True, help="server URL; a fresh database is made")
    parser.add_argument("--spans", type=int, default=300_000)
    parser.add_argument("--every", type=float, default=0.5, help="seconds between neighbours")
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args()
    db_url, drop = _fresh_database(args.postgres)
    try:
        run(db_url, args.spans, args.every, args.timeout)
    finally:
        drop()


def run(db_url: str, spans: int, every: float, timeout: float) -> None:
    _prepare(db_url)
    port = _free_port()
    serve = subprocess.Popen(
        [sys.executable, "-m", "toolscore", "serve", "--db", db_url, "--grpc", "off",
         "--http", f"127.0.0.1:{port}"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    log: list[str] = []
    threading.Thread(target=lambda: log.extend(serve.stderr or ()), daemon=True).start()
    rss = _Rss(serve.pid)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or serve.poll() is not None:
                    raise RuntimeError("serve did not start:\n" + "".join(log)) from None
                time.sleep(0.2)
        rss.start()
        neighbours = _Neighbours(port, every)
        neighbours.start()
        started = time.time()
        traces = -(-spans // SPANS_PER_TRACE)
        last_big = _send_big(port, traces)
        print(f"sent {traces * SPANS_PER_TRACE} spans in {last_big - started:.1f} s", flush=True)
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            state = _state(db_url)
            big = state.get("big")
            if big is not None and big[1] is not None and not big[2]:
                break
            time.sleep(1)
        time.sleep(every * 4)  # neighbours sent just before the big one finished
        neighbours.stop.set()
        neighbours.join()
        time.sleep(5 + 10)  # their settle time and the target margin
        state = _state(db_url)
    finally:
        rss.stop.set()
        serve.terminate()
        serve.wait(120)
    _report(state, rss.peak, serve.pid, last_big, neighbours.sent, log)


def _report(
    state: State,
    peak: dict[int, float],
    serve_pid: int,
    last_big: float,
    sent: int,
    log: list[str],
) -> None:
    status, big_latency, _, _ = state.get("big", ("missing", None, True, 0.0))
    print(f"big conversation: {status}, scored {big_latency} s after its last span")
    small = {k: v for k, v in state.items() if k.startswith("small-")}
    unscored = sum(1 for v in small.values() if v[1] is None)
    print(f"neighbours: {sent} sent, {len(small)} stored, {unscored} not scored")
    for label, group in (
        ("all neighbours", small.values()),
        (
            "neighbours after the big one's last span",
            [v for v in small.values() if v[3] > last_big],
        ),
    ):
        latencies = sorted(v[1] for v in group if v[1] is not None)
        if latencies:
            print(
                f"{label} ({len(latencies)}): latency p50 {statistics.median(latencies):.2f} s, "
                f"max {latencies[-1]:.2f} s (target: settle 5 + 10 s)"
            )
    children = {pid: mb for pid, mb in peak.items() if pid != serve_pid}
    print(f"peak RSS: serve {peak.get(serve_pid, 0):.0f} MB; scoring processes (each, MB): "
          + ", ".join(f"{mb:.0f}" for mb in sorted(children.values(), reverse=True)))  # fmt: skip
    notes = [line.strip() for line in log if "spans: scored on its own" in line or "lost" in line]
    for line in notes[:5]:
        print("serve:", line[:200])


if __name__ == "__main__":
    main()
