"""Write-back and history benchmark: outbox export throughput, and the history views' latency.

Write-back: N evaluation rows are exported to a local OTLP sink (gRPC, then OTLP/HTTP) through
the outbox (``export_pass``: enqueue, claim, build SDK spans and log records, export, record),
reported as evaluations per second (each = one span + one log record acknowledged). The peer,
measured in the same run, is the SDK export alone of the same items (no database): the ratio is
what the outbox's durability costs.

Views: the median latency of reading all of ``daily_scores`` and of ``current_scores`` for N
evaluations, next to the peer ``SELECT count(*) FROM evaluations`` (a full scan of the table).

Medians over ``--runs`` runs, each on a fresh database.

    .venv/bin/python benchmarks/bench_writeback.py --count 5000 --runs 3 \\
        --postgres postgresql+psycopg://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import create_engine as sa_create_engine
from sqlalchemy import insert, text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.collector.export.sink import GrpcSink, HttpSink
from toolscore.collector.export.otlp import EvaluationEmitter, create_exporters
from toolscore.collector.export.settings import resolve_export_settings
from toolscore.collector.export.worker import export_pass
from toolscore.storage import migrate
from toolscore.storage.conversations.tables import conversations, evaluations
from toolscore.storage.history import outbox as exports
from toolscore.storage.plumbing.engine import create_engine

T0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)


def _fill(url: str, count: int) -> None:
    migrate.upgrade(url)
    engine = create_engine(url)
    convs = max(1, count // 2)
    with engine.begin() as conn:
        conn.execute(
            insert(conversations),
            [
                {
                    "id": f"c{i}",
                    "status": "scored",
                    "first_seen_at": T0 + dt.timedelta(hours=i % 720),
                    "last_span_at": T0,
                    "last_span_received_ns": 0,
                    "needs_scoring": False,
                    "last_trace_id": f"{i + 1:032x}",
                    "revision": 1,
                }
                for i in range(convs)
            ],
        )
        conn.execute(
            insert(evaluations),
            [
                {
                    "conversation_id": f"c{i // 2}",
                    "revision": 1,
                    "is_current": True,
                    "trace_id": f"{i // 2 + 1:032x}",
                    "root_span_id": f"{i + 1:016x}",
                    "expectation_id": f"e{i % 7}",
                    "expectation_version": 1,
                    "metric": ("tool_call_accuracy", "tool_call_f1")[i % 2],
                    "metric_type": ("tool_call_accuracy", "tool_call_f1")[i % 2],
                    "metric_config": {},
                    "score": (i * 37 % 101) / 100,
                    "details": {"reasons": ["expected get_weather(city='Paris')"]},
                    "predicted_count": 2,
                    "expected_count": 2,
                    "created_at": T0 + dt.timedelta(hours=i % 720),
                }
                for i in range(count)
            ],
        )
    engine.dispose()


def _export(url: str, count: int, protocol: str) -> tuple[float, float]:
    """(outbox evaluations/s, SDK-only evaluations/s) for one fresh database."""
    sink: GrpcSink | HttpSink = GrpcSink().start() if protocol == "grpc" else HttpSink().start()
    settings = resolve_export_settings(
        endpoint=sink.endpoint, protocol=protocol, environ={}, batch_size=500
    )
    assert settings is not None
    emitter = EvaluationEmitter(*create_exporters(settings))
    engine = create_engine(url)
    try:
        started = time.perf_counter()
        done = 0
        while done < count:
            result = export_pass(engine, emitter, settings, max_batches=1000)
            assert result.failed == 0, "the local sink refused a batch"
            done += result.exported
        outbox = count / (time.perf_counter() - started)
        with engine.begin() as conn:
            items = exports.claim_batch(
                conn, dt.datetime.now(dt.UTC) + dt.timedelta(days=1), count, dt.timedelta(0)
            )
        if not items:  # everything is exported: claim ignores exported rows, rebuild items
            with engine.begin() as conn:
                conn.execute(exports.evaluation_exports.update().values(exported_at=None))
                items = exports.claim_batch(
                    conn, dt.datetime.now(dt.UTC) + dt.timedelta(days=1), count, dt.timedelta(0)
                )
        started = time.perf_counter()
        for i in range(0, len(items), settings.batch_size):
            chunk = items[i : i + settings.batch_size]
            assert emitter.export_spans(chunk).ok and emitter.export_logs(chunk).ok
        sdk_only = len(items) / (time.perf_counter() - started)
        return outbox, sdk_only
    finally:
        emitter.shutdown()
        engine.dispose()
        sink.stop()


def _latency(url: str, sql: str, repeat: int = 5) -> float:
    engine = create_engine(url)
    try:
        samples = []
        with engine.connect() as conn:
            for _ in range(repeat):
                started = time.perf_counter()
                conn.execute(text(sql)).all()
                samples.append(time.perf_counter() - started)
        return statistics.median(samples)
    finally:
        engine.dispose()


def _databases(
    postgres: str | None,
) -> list[tuple[str, Callable[[], tuple[str, Callable[[], None]]]]]:
    def sqlite() -> tuple[str, Callable[[], None]]:
        path = Path(tempfile.mkdtemp()) / "bench.db"
        return f"sqlite:///{path}", lambda: None

    out: list[tuple[str, Callable[[], tuple[str, Callable[[], None]]]]] = [("sqlite", sqlite)]
    if postgres:

        def pg() -> tuple[str, Callable[[], None]]:
            name = f"bench_{uuid.uuid4().hex[:10]}"
            admin = sa_create_engine(postgres, isolation_level="AUTOCOMMIT")
            with admin.connect() as conn:
                conn.execute(text(f'CREATE DATABASE "{name}"'))

            def drop() -> None:
                with admin.connect() as conn:
                    conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
                admin.dispose()

            return postgres.rsplit("/", 1)[0] + "/" + name, drop

        out.append(("postgresql", pg))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=5000, help="evaluations (5000)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--postgres", metavar="URL", help="also measure on this server")
    args = parser.parse_args()
    for name, make in _databases(args.postgres):
        rows: dict[str, list[float]] = {}
        for _ in range(args.runs):
            for protocol in ("grpc", "http/protobuf"):
                url, drop = make()
                try:
                    _fill(url, args.count)
                    outbox, sdk = _export(url, args.count, protocol)
                    rows.setdefault(f"outbox {protocol}", []).append(outbox)
                    rows.setdefault(f"sdk only {protocol}", []).append(sdk)
                    if protocol == "grpc":
                        for view in ("daily_scores", "current_scores"):
                            rows.setdefault(view, []).append(_latency(url, f"SELECT * FROM {view}"))
                        rows.setdefault("count(*)", []).append(
                            _latency(url, "SELECT count(*) FROM evaluations")
                        )
                finally:
                    drop()
        m = {k: statistics.median(v) for k, v in rows.items()}
        print(f"{name}: {args.count} evaluations, medians of {args.runs} runs")
        for protocol in ("grpc", "http/protobuf"):
            o, s = m[f"outbox {protocol}"], m[f"sdk only {protocol}"]
            print(
                f"  write-back {protocol:>13}: {o:8.0f} evaluations/s through the outbox; "
                f"SDK export alone {s:8.0f}/s (ratio {o / s:.2f})"
            )
        base = m["count(*)"]
        for view in ("daily_scores", "current_scores"):
            print(
                f"  SELECT * FROM {view:<15} {m[view] * 1000:8.1f} ms "
                f"(count(*) scan {base * 1000:.1f} ms, ratio {m[view] / base:.1f})"
            )


if __name__ == "__main__":
    main()
