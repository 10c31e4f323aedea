"""Does the database stop growing with span retention on? A soak of ``toolscore serve``.

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

``--logs``: each span request is followed by its conversations' GenAI content events as OTLP log
records (``POST /v1/logs``, protobuf; 9 a conversation, OpenLLMetry's OTel GenAI <= 1.36 event
form, ``soak_logs.py``) carrying their trace and span ids, so ``log_records`` retention is
exercised; the table gains the offered and stored log records/s. ``--postgres ADMIN_URL``: the
soak runs on a new PostgreSQL database made next to ADMIN_URL's (dropped at the end unless
``--keep``) and the sizes are PostgreSQL's (``soak_sizes.py``): the database, ``spans`` and
``log_records`` with their day partitions, indexes and TOAST, and the history tables.

    cd benchmarks && ../.venv/bin/python bench_retention_soak.py --rate 5000 --duration 1800 \\
        --retention 2m --interval 20 --every 60 [--history-retention 5m] [--logs] \\
        [--postgres postgresql+psycopg://postgres@127.0.0.1:5432/postgres [--keep]]
"""

from __future__ import annotations

import argparse
import http.client
import re
import socket
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
from soak_logs import LOGS_PER_TRACE, log_template
from soak_sizes import (
    create_database,
    drop_database,
    postgres_sample,
    postgres_tables,
    sqlite_sample,
    sqlite_tables,
)

from toolscore.storage.plumbing.engine import create_engine

POOL = 64


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
    """Post rounds of the templates at ``rate`` spans/s for ``duration`` s from 4 connections
    (with ``state["logs"]``, each span request followed by its conversations' log records)."""
    bodies = _templates(f"soak{uuid.uuid4().hex[:6]}")
    logs = [log_template(b) for b in bodies] if state["logs"] else []
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
            marker = b"R%06d" % (i // POOL)
            _post(conn, "traces", bodies[i % POOL].replace(b"R000000", marker), state, lock)
            if logs:
                _post(conn, "logs", logs[i % POOL].replace(b"R000000", marker), state, lock)

    threads = [threading.Thread(target=sender) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    state["seconds"] = time.monotonic() - start


def _post(conn: Any, signal: str, body: bytes, state: dict[str, Any], lock: Any) -> None:
    conn.request("POST", f"/v1/{signal}", body=body,
                 headers={"Content-Type": "application/x-protobuf"})  # fmt: skip
    response = conn.getresponse()
    response.read()
    with lock:
        state[("ok" if response.status == 200 else "failed") if signal == "traces"
              else ("logs_ok" if response.status == 200 else "logs_failed")] += 1  # fmt: skip


def _metric(port: int, name: str, label: str = "") -> float:
    """The sum of the series of ``name`` (with ``label``, as ``key="value"``; nan: none)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    labels = rf"{{[^}}]*{re.escape(label)}[^}}]*}}" if label else r"(?:{[^}]*})?"
    found = re.findall(rf"^{name}{labels} (\S+)$", text, re.M)
    return sum(float(v) for v in found) if found else float("nan")


def _row(db: Any, port: int, state: dict[str, Any], last: dict[str, float]) -> str:
    """One line of the table: the database now and the period since ``last`` (updated)."""
    mib = 2**20
    now = time.monotonic()
    sent = state["ok"] * SPANS_PER_TRACE * TRACES_PER_REQUEST
    logs_sent = state["logs_ok"] * LOGS_PER_TRACE * TRACES_PER_REQUEST
    s = db.sample()
    lag = _metric(port, "toolscore_conversations_oldest_waiting_seconds")
    deleted = _metric(port, "toolscore_retention_deleted_conversations_total")
    accepted = _metric(port, "toolscore_receiver_accepted_items_total", 'signal="traces"')
    logs_accepted = _metric(port, "toolscore_receiver_accepted_items_total", 'signal="logs"')
    dt = now - last["t"]
    if db.engine is None:
        sizes = (
            f"| {s['size'] / mib:.1f} "
            f"| {s['pages'] * s['page'] / mib:.1f} / {s['free'] * s['page'] / mib:.1f} "
        )
    else:
        sizes = (
            f"| {s['size'] / mib:.1f} | {s['spans_bytes'] / mib:.1f} | {s['logs_bytes'] / mib:.1f} "
        )
    line = (
        f"| {(now - state['start']) / 60:.1f} {sizes}"
        f"| {s['spans']:,.0f} | {s['logs']:,.0f} | {s['history'] / mib:.1f} "
        f"| {s['convs']:,.0f} ({deleted:,.0f}) "
        f"| {(sent - last['sent']) / dt:,.0f} / {(accepted - last['stored']) / dt:,.0f} "
    )
    if state["logs"]:
        line += (
            f"| {(logs_sent - last['logs_sent']) / dt:,.0f} "
            f"/ {(nan0(logs_accepted) - last['logs_stored']) / dt:,.0f} "
        )
    last.update(t=now, sent=sent, stored=accepted, logs_sent=logs_sent,
                logs_stored=nan0(logs_accepted))  # fmt: skip
    return line + f"| {lag:.0f} |"


def nan0(x: float) -> float:
    return 0.0 if x != x else x


def _report(db: Any, port: int, state: dict[str, Any], every: float, sender: Any) -> None:
    sizes = (
        "file + WAL (MiB) | pages / free (MiB)"
        if db.engine is None
        else "database (MiB) | spans (MiB) | log_records (MiB)"
    )
    logs = " offered / stored log records/s |" if state["logs"] else ""
    header = (
        f"| min | {sizes} | spans | log_records | history (MiB) "
        f"| conversations (deleted) | offered / stored spans/s |{logs} scoring lag (s) |"
    )
    print(header)
    print("|" + "---:|" * (header.count("|") - 1))
    last = {"t": state["start"], "sent": 0.0, "stored": 0.0, "logs_sent": 0.0, "logs_stored": 0.0}
    while sender.is_alive():
        sender.join(every)
        print(_row(db, port, state, last), flush=True)


class _Database:
    """The soak's database: a SQLite file in ``tmp``, or a new PostgreSQL database."""

    def __init__(self, tmp: str, admin_url: str | None) -> None:
        self.admin_url, self.path = admin_url, Path(tmp) / "soak.db"
        self.url = create_database(admin_url) if admin_url else f"sqlite:///{self.path}"
        self.engine = None if admin_url is None else create_engine(self.url)

    def sample(self) -> dict[str, float]:
        return sqlite_sample(self.path) if self.engine is None else postgres_sample(self.engine)

    def tables(self) -> list[tuple[str, int]]:
        return sqlite_tables(self.path) if self.engine is None else postgres_tables(self.engine)

    def close(self, keep: bool) -> None:
        if self.engine is not None and self.admin_url is not None:
            self.engine.dispose()
            if keep:
                print(f"kept {self.url}")
            else:
                drop_database(self.admin_url, self.url)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=1500)
    parser.add_argument("--duration", type=float, default=180)
    parser.add_argument("--retention", default="30s")
    parser.add_argument("--history-retention", default="forever")
    parser.add_argument("--interval", type=float, default=5)
    parser.add_argument("--every", type=float, default=60)
    parser.add_argument("--logs", action="store_true", help="also send the GenAI events as logs")
    parser.add_argument("--postgres", metavar="ADMIN_URL", help="soak a new PostgreSQL database")
    parser.add_argument("--keep", action="store_true", help="keep the PostgreSQL database")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = _Database(tmp, args.postgres)
        try:
            _prepare(db.url)
            _soak(db, tmp, args)
        finally:
            db.close(args.keep)


def _soak(db: _Database, tmp: str, args: argparse.Namespace) -> None:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "toolscore", "serve", "--db", db.url, "--grpc", "off",
         "--http", f"127.0.0.1:{port}", "--settle", "1", "--log-level", "INFO",
         "--span-retention", args.retention,
         "--history-retention", args.history_retention,
         "--span-retention-interval", str(args.interval)],
        cwd=tmp,
    )  # fmt: skip
    try:
        time.sleep(3)
        state: dict[str, Any] = dict.fromkeys(("next", "ok", "failed", "logs_ok", "logs_failed"), 0)
        state.update(logs=args.logs, start=time.monotonic())
        sender = threading.Thread(target=_load, args=(port, args.rate, args.duration, state))
        sender.start()
        while state["next"] == 0:  # the templates are being made
            time.sleep(0.1)
        _report(db, port, state, args.every, sender)
        sent = state["ok"] * SPANS_PER_TRACE * TRACES_PER_REQUEST
        seconds = state["seconds"]
        print(f"load: {sent:,} spans in {seconds:.0f} s ({sent / seconds:,.0f}/s), "
              f"{state['failed']} requests failed")  # fmt: skip
        if args.logs:
            logs = state["logs_ok"] * LOGS_PER_TRACE * TRACES_PER_REQUEST
            print(f"log records: {logs:,} in {seconds:.0f} s ({logs / seconds:,.0f}/s), "
                  f"{state['logs_failed']} requests failed")  # fmt: skip
        print("MiB by table (with indexes): " + ", ".join(
            f"{name} {size / 2**20:.1f}" for name, size in db.tables()[:8]
        ))  # fmt: skip
    finally:
        server.terminate()
        server.wait(60)


if __name__ == "__main__":
    main()
