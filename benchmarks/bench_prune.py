"""Does span retention stall ingest? Ingest batch latency with and without a pruning pass.

A database is filled with ``--old`` spans of the pipeline benchmark's traces (7-span GenAI
conversations) received 30 days ago and marked scored; then a writer thread stores 511-span
requests the way ``serve``'s ingest does (``store_telemetry`` + the conversation hook, one
transaction each) for ``--seconds``, once alone and once while a pruning pass
(``storage.retention.span_pruning.prune``, the serve defaults: 2,000 rows per transaction) deletes
the old
spans. Reported per database: batches stored, p50 / p99 / max batch latency in each phase, and
the pruning pass's duration and rows deleted.

    cd benchmarks && ../.venv/bin/python bench_prune.py --old 100000 --seconds 20 \\
        --postgres postgresql+psycopg://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from bench_storage_bytes import fresh_postgres
from pipeline_load import SPANS_PER_TRACE, TRACES_PER_REQUEST
from pipeline_load import payloads as _payloads
from sqlalchemy import text

from toolscore.collector.otlp.decode import decode_traces, parse_traces_protobuf
from toolscore.collector.pipeline.assign import AssignConfig, assign_spans
from toolscore.storage.migrate import upgrade
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.retention.span_pruning import prune
from toolscore.storage.telemetry.row_encode import prepare_telemetry
from toolscore.storage.telemetry.spans import store_telemetry

DAY_NS = 86_400 * 1_000_000_000


def _store(engine: object, payload: bytes, received_ns: int) -> None:
    spans = decode_traces(parse_traces_protobuf(payload)).spans
    with engine.begin() as conn:  # type: ignore[attr-defined]
        new = store_telemetry(conn, prepare_telemetry(spans, (), received_ns))
        assign_spans(conn, spans, received_at_ns=received_ns, config=AssignConfig(), numbered=new)


def _fill(url: str, spans: int) -> None:
    engine = create_engine(url)
    requests = max(1, spans // (SPANS_PER_TRACE * TRACES_PER_REQUEST))
    old = time.time_ns() - 30 * DAY_NS
    for payload in _payloads("old", requests):
        _store(engine, payload, old)
    with engine.begin() as conn:  # scored, as far as retention is concerned
        conn.execute(text("UPDATE conversations SET status = 'scored', needs_scoring = false"))
    engine.dispose()


def _ingest(url: str, seconds: float, payloads: Sequence[bytes]) -> list[float]:
    engine = create_engine(url)
    latencies: list[float] = []
    deadline = time.monotonic() + seconds
    i = 0
    while time.monotonic() < deadline:
        started = time.monotonic()
        _store(engine, payloads[i % len(payloads)], time.time_ns())
        latencies.append(time.monotonic() - started)
        i += 1
    engine.dispose()
    return latencies


def _summary(name: str, latencies: Sequence[float]) -> str:
    ms = sorted(x * 1000 for x in latencies)
    p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
    return (
        f"{name}: {len(ms)} batches, p50 {statistics.median(ms):.0f} ms, p99 {p99:.0f} ms, "
        f"max {ms[-1]:.0f} ms"
    )


def run(url: str, old: int, seconds: float) -> list[str]:
    upgrade(url)
    _fill(url, old)
    fresh = _payloads(f"live-{time.time_ns()}", max(4, int(seconds * 10)))
    alone = _ingest(url, seconds, fresh[: len(fresh) // 2])
    engine = create_engine(url)
    outcome: dict[str, object] = {}

    def pruning() -> None:
        started = time.monotonic()
        outcome["result"] = prune(engine, time.time_ns() - DAY_NS)
        outcome["seconds"] = time.monotonic() - started

    pruner = threading.Thread(target=pruning)
    pruner.start()
    during = _ingest(url, seconds, fresh[len(fresh) // 2 :])
    pruner.join()
    engine.dispose()
    result = outcome["result"]
    return [
        _summary("  ingest alone       ", alone),
        _summary("  ingest while pruning", during),
        f"  pruning pass: {result.spans} spans of {result.conversations} conversations "  # type: ignore[attr-defined]
        f"in {outcome['seconds']:.1f} s",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", type=int, default=100_000, help="old spans to prune")
    parser.add_argument("--seconds", type=float, default=20.0, help="ingest time per phase")
    parser.add_argument("--postgres", metavar="URL", help="admin URL of a PostgreSQL server")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        print("SQLite", flush=True)
        for line in run(f"sqlite:///{Path(tmp) / 'prune.db'}", args.old, args.seconds):
            print(line, flush=True)
    if args.postgres:
        url, drop = fresh_postgres(args.postgres)
        try:
            print("PostgreSQL", flush=True)
            for line in run(url, args.old, args.seconds):
                print(line, flush=True)
        finally:
            drop()


if __name__ == "__main__":
    main()
