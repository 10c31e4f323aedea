"""Where an ingest transaction's time goes on one database: each phase of the real ingest path
timed over N requests of the pipeline load (73 7-span traces, 511 spans a request).

Phases: building the span rows, numbering their traces (reading or making each trace's
number), inserting the spans, reading the traces' assignments, inserting
new assignments, upserting the conversations, committing. ``--other-commits`` runs a second
process that commits a one-row write every 50 ms, as the scoring processes do, so whatever
another process's commit costs this connection (on SQLite, its page cache) is in the figures.
``--cache-mib`` sets this connection's SQLite page cache (``--mmap-mib`` its mmap_size);
``--warm`` first reads the random-keyed indexes the ingest path writes into it; ``--evict`` first
drops the file from the page cache (what a host that pages out idle page cache does to it).
Reported: medians over the second half of the requests (the first half warms up).

    cd benchmarks && python ingest_phases.py --db sqlite:////work/growthdata/grown.db \\
        --requests 300 [--other-commits] [--cache-mib 1024 --warm] [--evict]

It writes the requests' rows into the database given (and a table ``xp_tick`` with
``--other-commits``): use a copy or a benchmark's database.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time
import uuid
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from pipeline_load import payloads
from sqlalchemy import event
from sqlalchemy.engine import make_url

from toolscore.collector.otlp.decode import decode_traces
from toolscore.collector.pipeline.assign import AssignConfig, _summarise
from toolscore.storage.conversations import assignments
from toolscore.storage.plumbing.engine import create_engine
from toolscore.storage.telemetry.row_encode import span_values
from toolscore.storage.telemetry.spans import insert_keyed_spans, keyed_span_rows
from toolscore.storage.telemetry.traces import number_traces

PHASES = ("rows", "numbers", "spans", "read", "insert", "upsert", "commit", "total")
WARM = (  # the indexes every ingest request writes
    "SELECT count(*) FROM spans INDEXED BY sqlite_autoindex_spans_1 WHERE trace_seq > 0",
    "SELECT count(*) FROM traces INDEXED BY sqlite_autoindex_traces_1 WHERE trace_id > ''",
    "SELECT count(*) FROM traces INDEXED BY ix_traces_conversation_id WHERE conversation_id > ''",
    "SELECT count(*) FROM conversations INDEXED BY sqlite_autoindex_conversations_1 WHERE id > ''",
)


def _evict(url: str) -> None:
    """Drop a SQLite file (and its log) from the page cache: clean pages go at once."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database:
        raise SystemExit("--evict: only a SQLite file can be dropped from the page cache")
    path = parsed.database
    for name in (path, path + "-wal"):
        if os.path.exists(name):
            fd = os.open(name, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def _other(url: str, stop: Any) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS xp_tick (n INTEGER)")
    while not stop.is_set():
        with engine.begin() as conn:
            conn.exec_driver_sql("INSERT INTO xp_tick VALUES (1)")
        time.sleep(0.05)
    engine.dispose()


def _one(engine: Any, spans: list[Any], config: AssignConfig) -> dict[str, float]:
    marks = [time.perf_counter()]
    now = time.time_ns()
    rows = [span_values(s, now, {}) for s in spans]
    marks.append(time.perf_counter())
    with engine.connect() as conn:
        conn.begin()
        numbered = number_traces(conn, {row[0] for row in rows})
        keyed = keyed_span_rows(rows, numbered.numbers)
        marks.append(time.perf_counter())
        insert_keyed_spans(conn, keyed)
        marks.append(time.perf_counter())
        traces = _summarise(spans, [], config)
        proposed = {t.trace_id: t.named or t.trace_id for t in traces}
        known = assignments._read_assigned(conn, sorted(proposed.keys() - numbered.new))
        marks.append(time.perf_counter())
        new = {t: proposed[t] for t in sorted(proposed.keys() - known.keys())}
        assignments._assign_new(conn, new)
        marks.append(time.perf_counter())
        touched = [assignments.ConversationTouch(c, t, None, None) for t, c in proposed.items()]
        assignments.upsert_conversations(conn, touched, now)
        marks.append(time.perf_counter())
        conn.commit()
    marks.append(time.perf_counter())
    steps = {p: 1000 * (b - a) for p, a, b in zip(PHASES, marks, marks[1:], strict=False)}
    return {**steps, "total": 1000 * (marks[-1] - marks[0])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--db", required=True, help="database URL (it is written to)")
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--other-commits", action="store_true")
    parser.add_argument("--cache-mib", type=int, help="SQLite page cache of this connection")
    parser.add_argument("--mmap-mib", type=int, help="SQLite mmap_size of this connection")
    parser.add_argument("--warm", action="store_true", help="read the indexes first (SQLite)")
    parser.add_argument("--evict", action="store_true", help="drop the file from the page cache")
    args = parser.parse_args()
    engine = create_engine(args.db)
    if args.cache_mib or args.mmap_mib:

        @event.listens_for(engine, "connect")
        def _cache(dbapi_conn: Any, _record: Any) -> None:
            if args.cache_mib:
                dbapi_conn.execute(f"PRAGMA cache_size=-{args.cache_mib * 1024}")
            if args.mmap_mib:
                dbapi_conn.execute(f"PRAGMA mmap_size={args.mmap_mib * 1024 * 1024}")

    requests = []
    for body in payloads(f"p{uuid.uuid4().hex[:6]}", args.requests):
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        requests.append(decode_traces(request).spans)
    if args.warm:
        with engine.connect() as conn:
            for query in WARM:
                conn.exec_driver_sql(query)
    if args.evict:
        _evict(args.db)
    stop = mp.Event()
    other = mp.Process(target=_other, args=(args.db, stop)) if args.other_commits else None
    if other is not None:
        other.start()
        time.sleep(0.5)
    runs = []
    for spans in requests:
        runs.append(_one(engine, spans, AssignConfig()))
        time.sleep(0.05)
    if other is not None:
        stop.set()
        other.join()
    tail = runs[len(runs) // 2 :]
    cells = " | ".join(f"{p} {statistics.median(r[p] for r in tail):.2f}" for p in PHASES)
    print(f"{args.db.rsplit('/', 1)[-1]}: {cells} ms (medians of the last {len(tail)})")


if __name__ == "__main__":
    main()
