"""Does the SQLite file stop growing with span retention on? A soak of ``toolscore serve``.

``serve`` (scoring on, ``--span-retention`` and ``--history-retention`` short so that the steady
state comes within minutes)
receives the pipeline benchmark's load (7-span GenAI conversations over OTLP/HTTP, every one
matching an expectation) at ``--rate`` spans/s for ``--duration`` s. Every ``--every`` seconds the
script prints the database file (+ WAL), its page count and free pages, the ``spans`` and
``log_records`` rows, the history tables' size (``conversations``, ``tool_calls``,
``evaluations`` with their indexes), the offered and stored spans/s of the period and the scoring
lag (the oldest conversation waiting to be scored). The requests are a pool of templates whose
conversation and trace ids are rewritten per round, so a long soak holds no more than the pool in
memory and spends little CPU making its load.

    cd benchmarks && ../.venv/bin/python bench_retention_soak.py --rate 5000 --duration 1800 \\
        --retention 2m --interval 20 --every 60 [--history-retention 5m]
"""

from __future__ import annotations

import argparse
import http.client
import re
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from bench_pipeline import _prepare
from pipeline_load import SPANS_PER_TRACE, TRACES_PER_REQUEST, trace

POOL = 64
HISTORY = ("conversations", "conversation_traces", "tool_calls", "evaluations")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _templates(prefix: str) -> list[bytes]:
    """POOL requests whose conversation ids and trace ids start with the round marker R000000."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    out, n, now = [], 0, time.time_ns()
    for _ in range(POOL):
        req = ExportTraceServiceRequest()
        rs = req.resource_spans.add()
        rs.resource.attributes.add(key="service.name").value.string_value = "bench-agent"
        rs.scope_spans.add().scope.name = "bench"
        for _ in range(TRACES_PER_REQUEST):
            trace(req, f"{prefix}-R000000-{n}", now)
            n += 1
        for span in rs.scope_spans[0].spans:  # same marker in every trace id, unique tail
            span.trace_id = b"R000000" + span.trace_id[7:]
        out.append(req.SerializeToString())
    return out


def _load(port: int, rate: float, duration: float, state: dict[str, Any]) -> None:
    """Post rounds of the templates at ``rate`` spans/s for ``duration`` s from 4 connections."""
    bodies = _templates(f"soak{uuid.uuid4().hex[:6]}")
    total = max(1, int(rate * duration / (SPANS_PER_TRACE * TRACES_PER_REQUEST)))
    interval = SPANS_PER_TRACE * TRACES_PER_REQUEST / rate
    lock = threading.Lock()
    start = state["start"] = time.monotonic()

    def sender() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        while True:
            with lock:
                i = state["next"]
                state["next"] += 1
            if i >= total:
                break
            delay = start + i * interval - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            body = bodies[i % POOL].replace(b"R000000", b"R%06d" % (i // POOL))
            conn.request("POST", "/v1/traces", body=body,
                         headers={"Content-Type": "application/x-protobuf"})  # fmt: skip
            response = conn.getresponse()
            response.read()
            with lock:
                state["ok" if response.status == 200 else "failed"] += 1

    threads = [threading.Thread(target=sender) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    state["seconds"] = time.monotonic() - start


def _metric(port: int, name: str) -> float:
    """The sum of the series of ``name`` (nan: none)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    found = re.findall(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M)
    return sum(float(v) for v in found) if found else float("nan")


def _sample(path: Path) -> dict[str, float]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60) as db:

        def one(sql: str, *params: str) -> int:
            return int(db.execute(sql, params).fetchone()[0])

        page = one("PRAGMA page_size")
        names = db.execute(
            f"SELECT name FROM sqlite_master WHERE tbl_name IN ({','.join('?' * len(HISTORY))})"
            " AND type IN ('table', 'index')",
            HISTORY,
        ).fetchall()
        history = sum(
            one("SELECT coalesce(sum(pgsize), 0) FROM dbstat WHERE name = ? AND aggregate = 1", n)
            for (n,) in names
        )
        row = {
            "pages": one("PRAGMA page_count"), "free": one("PRAGMA freelist_count"),
            "spans": one("SELECT count(*) FROM spans"),
            "logs": one("SELECT count(*) FROM log_records"),
            "convs": one("SELECT count(*) FROM conversations"),
            "history": history, "page": page,
        }  # fmt: skip
    wal = path.with_name(path.name + "-wal")
    row["size"] = path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)
    return row


def _report(path: Path, port: int, state: dict[str, Any], every: float, sender: Any) -> None:
    mib = 2**20
    print("| min | file + WAL (MiB) | pages / free (MiB) | spans | log_records | history (MiB) "
          "| conversations (deleted) | offered / stored spans/s | scoring lag (s) |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    last_t, last_sent, last_stored = state["start"], 0, 0.0
    while sender.is_alive():
        sender.join(every)
        now = time.monotonic()
        sent = state["ok"] * SPANS_PER_TRACE * TRACES_PER_REQUEST
        s = _sample(path)
        lag = _metric(port, "toolscore_conversations_oldest_waiting_seconds")
        deleted = _metric(port, "toolscore_retention_deleted_conversations_total")
        accepted = _metric(port, "toolscore_receiver_accepted_items_total")
        dt = now - last_t
        stored = (accepted - last_stored) / dt
        print(
            f"| {(now - state['start']) / 60:.1f} | {s['size'] / mib:.1f} "
            f"| {s['pages'] * s['page'] / mib:.1f} / {s['free'] * s['page'] / mib:.1f} "
            f"| {s['spans']:,} | {s['logs']:,} | {s['history'] / mib:.1f} "
            f"| {s['convs']:,} ({deleted:,.0f}) "
            f"| {(sent - last_sent) / dt:,.0f} / {stored:,.0f} | {lag:.0f} |",
            flush=True,
        )
        last_t, last_sent, last_stored = now, sent, accepted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=1500)
    parser.add_argument("--duration", type=float, default=180)
    parser.add_argument("--retention", default="30s")
    parser.add_argument("--history-retention", default="forever")
    parser.add_argument("--interval", type=float, default=5)
    parser.add_argument("--every", type=float, default=60)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "soak.db"
        url = f"sqlite:///{path}"
        _prepare(url)
        port = _free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "toolscore", "serve", "--db", url, "--grpc", "off",
             "--http", f"127.0.0.1:{port}", "--settle", "1", "--log-level", "INFO",
             "--span-retention", args.retention,
             "--history-retention", args.history_retention,
             "--span-retention-interval", str(args.interval)],
            cwd=tmp,
        )  # fmt: skip
        try:
            time.sleep(3)
            state: dict[str, Any] = {"next": 0, "ok": 0, "failed": 0, "start": time.monotonic()}
            sender = threading.Thread(target=_load, args=(port, args.rate, args.duration, state))
            sender.start()
            while state["next"] == 0:  # the templates are being made
                time.sleep(0.1)
            _report(path, port, state, args.every, sender)
            sent = state["ok"] * SPANS_PER_TRACE * TRACES_PER_REQUEST
            seconds = state["seconds"]
            print(f"load: {sent:,} spans in {seconds:.0f} s ({sent / seconds:,.0f}/s), "
                  f"{state['failed']} requests failed")  # fmt: skip
            with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
                tables = db.execute(
                    "SELECT coalesce(m.tbl_name, s.name), sum(s.pgsize) FROM dbstat s "
                    "LEFT JOIN sqlite_master m ON m.name = s.name GROUP BY 1 ORDER BY 2 DESC"
                ).fetchall()
            print("MiB by table (with indexes): " + ", ".join(
                f"{name} {size / 2**20:.1f}" for name, size in tables[:8]
            ))  # fmt: skip
        finally:
            server.terminate()
            server.wait(60)


if __name__ == "__main__":
    main()
