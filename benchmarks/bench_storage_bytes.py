"""Bytes per stored span, next to the wire size, on SQLite and PostgreSQL.

The spans are those of the growth and pipeline benchmarks (``bench_pipeline._payloads``: unique
7-span OTel GenAI agent traces, one conversation each, in 511-span OTLP requests) and, as a
second load, ``bench_ingest``'s heavier traces (message content, arguments and results: ~1.5 KB
per span on the wire, the issue's figure). Each load is decoded by the receiver's own decoder
and stored the way ``serve`` stores it: ``store_telemetry`` plus the conversation hook
(``assign_spans``), one transaction per request, into a freshly migrated database (no scoring:
the figure is what the raw telemetry costs; its history rows are per conversation). Reported:

- wire: serialised protobuf bytes per span (and gzip, what an SDK usually sends);
- SQLite: file growth per span (pages in use, the free list excluded) and, per table with its
  indexes, from the ``dbstat`` virtual table when the sqlite3 library has it;
- PostgreSQL: ``pg_total_relation_size`` per table (partitions included, indexes and TOAST) per
  span, after ``VACUUM ANALYZE``.

    .venv/bin/python benchmarks/bench_storage_bytes.py --spans 50000 \\
        --postgres postgresql+psycopg://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import gzip
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pipeline_load import SPANS_PER_TRACE, TRACES_PER_REQUEST
from pipeline_load import payloads as _payloads
from sqlalchemy import text
from sqlalchemy.engine import make_url

from toolscore.collector.otlp.decode import decode_traces, parse_traces_protobuf
from toolscore.collector.pipeline.assign import AssignConfig, assign_spans
from toolscore.storage.migrate import upgrade
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.telemetry.row_encode import prepare_telemetry
from toolscore.storage.telemetry.spans import store_telemetry

TABLES = ("spans", "traces", "log_records", "conversations")


def pipeline_traces(spans: int) -> list[bytes]:
    requests = max(1, spans // (SPANS_PER_TRACE * TRACES_PER_REQUEST))
    return _payloads(f"bytes-{uuid.uuid4().hex[:6]}", requests)


def ingest_traces(spans: int) -> list[bytes]:
    from ingest_load import build_requests

    return build_requests(spans, run=int(time.time()))


def store(url: str, payloads: Sequence[bytes]) -> int:
    engine = create_engine(url)
    config = AssignConfig()
    stored = 0
    try:
        for payload in payloads:
            spans = decode_traces(parse_traces_protobuf(payload)).spans
            now = time.time_ns()
            with engine.begin() as conn:
                new = store_telemetry(conn, prepare_telemetry(spans, (), now))
                assign_spans(conn, spans, received_at_ns=now, config=config, numbered=new)
            stored += len(spans)
    finally:
        engine.dispose()
    return stored


def sqlite_bytes(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = db.execute("PRAGMA page_size").fetchone()[0]
        used = db.execute("PRAGMA page_count").fetchone()[0]
        used -= db.execute("PRAGMA freelist_count").fetchone()[0]
        out = {"database": used * page}
        try:
            rows = db.execute(
                "SELECT coalesce(m.tbl_name, s.name), sum(s.pgsize) FROM dbstat s "
                "LEFT JOIN sqlite_master m ON m.name = s.name GROUP BY 1"
            ).fetchall()
        except sqlite3.OperationalError:  # no dbstat in this sqlite3 build
            return out
    out.update({name: int(size) for name, size in rows if name in TABLES})
    return out


def postgres_bytes(url: str) -> dict[str, int]:
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    out: dict[str, int] = {}
    try:
        with engine.connect() as conn:
            conn.execute(text("VACUUM ANALYZE"))
            for table in TABLES:
                out[table] = int(
                    conn.execute(
                        text(
                            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) "
                            "FROM pg_class c WHERE c.oid = CAST(:t AS regclass) OR c.oid IN "
                            "(SELECT inhrelid FROM pg_inherits WHERE inhparent = "
                            "CAST(:t AS regclass))"
                        ),
                        {"t": table},
                    ).scalar_one()
                )
            out["database"] = int(
                conn.execute(text("SELECT pg_database_size(current_database())")).scalar_one()
            )
    finally:
        engine.dispose()
    return out


def fresh_postgres(admin_url: str) -> tuple[str, Any]:
    admin = make_url(admin_url)
    name = f"toolscore_bytes_{uuid.uuid4().hex[:8]}"
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))

    def drop() -> None:
        with engine.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        engine.dispose()

    return admin.set(database=name).render_as_string(hide_password=False), drop


def measure(name: str, payloads: Sequence[bytes], postgres: str | None) -> list[str]:
    spans = sum(len(decode_traces(parse_traces_protobuf(p)).spans) for p in payloads)
    wire = sum(len(p) for p in payloads) / spans
    wire_gz = sum(len(gzip.compress(p)) for p in payloads) / spans
    lines = [f"{name}: {spans} spans; wire {wire:.0f} B/span protobuf, {wire_gz:.0f} gzip"]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bytes.db"
        url = f"sqlite:///{path}"
        upgrade(url)
        empty = sqlite_bytes(path)
        store(url, payloads)
        full = sqlite_bytes(path)
    lines.append("  SQLite     " + _per_span(full, empty, spans))
    if postgres:
        url, drop = fresh_postgres(postgres)
        try:
            upgrade(url)
            empty = postgres_bytes(url)
            store(url, payloads)
            full = postgres_bytes(url)
        finally:
            drop()
        lines.append("  PostgreSQL " + _per_span(full, empty, spans))
    return lines


def _per_span(full: dict[str, int], empty: dict[str, int], spans: int) -> str:
    parts = [f"database {(full['database'] - empty['database']) / spans:.0f} B/span"]
    for table in TABLES:
        if table in full:
            parts.append(f"{table} {(full[table] - empty.get(table, 0)) / spans:.0f}")
    return "; ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spans", type=int, default=50_000)
    parser.add_argument("--postgres", metavar="URL", help="admin URL of a PostgreSQL server")
    args = parser.parse_args()
    for name, load in (
        ("pipeline/growth traces", pipeline_traces),
        ("ingest traces", ingest_traces),
    ):
        for line in measure(name, load(args.spans), args.postgres):
            print(line, flush=True)


if __name__ == "__main__":
    main()
