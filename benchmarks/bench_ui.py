"""Web UI page times with a large history: every page answered within 200 ms at a million
conversations?

For each database (a SQLite file, and PostgreSQL with ``--postgres URL``) a fresh database is
migrated and filled with ``--conversations`` scored conversations spread over 30 days (50
expectations, two metric instances each, one or two tool calls each; a tenth unmatched, a
fiftieth with a warning), written with bulk inserts (the shapes the pipeline writes, without
running it). A real UI server then answers each page ``--requests`` times in a row: the first
answer is reported apart from the median, p95 and max of the rest, and the first computation
of the overview's period figures (pages say they are pending until it ends) before them.

    .venv/bin/python benchmarks/bench_ui.py --conversations 1000000 \\
        --postgres postgresql+psycopg://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import random
import statistics
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import insert, text

from toolscore.collector.ui.server import UiConfig, UiServer
from toolscore.storage import migrate
from toolscore.storage.conversations.tables import conversations, evaluations, tool_calls
from toolscore.storage.expectations.repository import ExpectationData, import_expectations
from toolscore.storage.plumbing.engine import create_engine

EXPECTATIONS = 50
DAYS = 30
CHUNK = 20_000
PAGES = {
    "overview": "/",
    "conversations": "/conversations",
    "by status": "/conversations?status=unmatched",
    "by expectation": "/conversations?expectation=exp-7",
    "below threshold": "/conversations?metric=tool_call_accuracy&below=1",
    "with warnings": "/conversations?warnings=1",
    "text in first message": "/conversations?q=tokyo",
    "one conversation": "/conversation?id=conv-000000042",
    "expectations": "/expectations",
    "one expectation": "/expectation?id=exp-7",
}


def _rows(n: int, now: dt.datetime) -> Iterator[tuple[list[dict[str, Any]], ...]]:
    rng = random.Random(7)
    for start in range(0, n, CHUNK):
        convs, evals, calls = [], [], []
        for i in range(start, min(n, start + CHUNK)):
            cid = f"conv-{i:09d}"
            when = now - dt.timedelta(seconds=rng.uniform(0, DAYS * 86400))
            unmatched = i % 10 == 9
            exp = None if unmatched else f"exp-{i % EXPECTATIONS}"
            city = rng.choice(["Paris", "Tokyo", "Berlin", "Lima", "Oslo"])
            convs.append(
                {
                    "id": cid,
                    "status": "unmatched" if unmatched else "scored",
                    "first_seen_at": when,
                    "last_span_at": when,
                    "last_span_received_ns": int(when.timestamp() * 1e9),
                    "needs_scoring": False,
                    "last_trace_id": uuid.UUID(int=i).hex,
                    "first_user_message": f"What is the weather in {city} tomorrow?",
                    "revision": 1,
                    "scored_at": when,
                    "expectation_id": exp,
                    "expectation_version": None if unmatched else 1,
                    "unmatched_reason": "no expectation matched" if unmatched else None,
                    "warning": "a tool-like span was not used" if i % 50 == 0 else None,
                }
            )
            args = {"city": city}
            calls.append(
                {
                    "conversation_id": cid,
                    "revision": 1,
                    "position": 0,
                    "name": "get_weather",
                    "arguments": args,
                    "arguments_raw": None,
                    "arguments_ok": True,
                    "call_id": f"call-{i}",
                    "trace_id": uuid.UUID(int=i).hex,
                    "span_id": f"{i:016x}",
                    "convention": "otel_genai",
                }
            )
            if unmatched:
                continue
            good = rng.random() < 0.8
            for metric in ("tool_call_accuracy", "tool_call_f1"):
                evals.append(
                    {
                        "conversation_id": cid,
                        "revision": 1,
                        "is_current": True,
                        "trace_id": uuid.UUID(int=i).hex,
                        "root_span_id": f"{i:016x}",
                        "expectation_id": exp,
                        "expectation_version": 1,
                        "metric": metric,
                        "metric_type": metric,
                        "metric_config": {},
                        "score": 1.0 if good else 0.5,
                        "error": None,
                        "details": {"pairs": [], "losses": [], "reasons": []},
                        "predicted_count": 1,
                        "expected_count": 1,
                        "created_at": when,
                    }
                )
        yield convs, evals, calls


def fill(url: str, n: int) -> float:
    """Migrate and fill the database; seconds taken."""
    began = time.perf_counter()
    migrate.upgrade(url)
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            import_expectations(
                conn,
                [
                    ExpectationData(
                        id=f"exp-{e}",
                        reference_tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}}],
                        match={"conversation_id": [f"conv-{e:09d}"]},
                    )
                    for e in range(EXPECTATIONS)
                ],
            )
        now = dt.datetime.now(dt.UTC)
        for convs, evals, calls in _rows(n, now):
            with engine.begin() as conn:
                conn.execute(insert(conversations), convs)
                if evals:
                    conn.execute(insert(evaluations), evals)
                conn.execute(insert(tool_calls), calls)
        with engine.begin() as conn:
            conn.execute(text("ANALYZE"))
    finally:
        engine.dispose()
    return time.perf_counter() - began


@contextmanager
def ui(url: str) -> Iterator[str]:
    engine = create_engine(url)
    loop = asyncio.new_event_loop()
    server = UiServer(UiConfig(engine), "127.0.0.1", 0)
    started = threading.Event()
    stop = asyncio.Event()

    async def run() -> None:
        await server.start()
        started.set()
        await stop.wait()
        await server.stop()

    thread = threading.Thread(target=loop.run_until_complete, args=(run(),), daemon=True)
    thread.start()
    started.wait(60)
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(30)
        engine.dispose()


def _text(url: str) -> str:
    with urllib.request.urlopen(url, timeout=600) as response:
        return str(response.read().decode())


def _get(url: str) -> float:
    began = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as response:
        response.read()
        assert response.status == 200, url
    return (time.perf_counter() - began) * 1000


def measure(base: str, requests: int) -> dict[str, tuple[float, float, float, float]]:
    began = time.perf_counter()
    while "being computed for the first time" in _text(base + "/"):
        time.sleep(1)  # the period figures' first computation, measured apart
    print(f"first computation of the period figures: {time.perf_counter() - began:.0f} s")
    out = {}
    for name, path in PAGES.items():
        cold = _get(base + path)
        warm = sorted(_get(base + path) for _ in range(requests))
        p95 = warm[min(len(warm) - 1, int(0.95 * len(warm)))]
        out[name] = (cold, statistics.median(warm), p95, warm[-1])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--postgres", help="a PostgreSQL server URL (a database is created)")
    parser.add_argument(
        "--postgres-db", help="an already filled PostgreSQL database to measure (not filled)"
    )
    parser.add_argument(
        "--sqlite-file",
        type=Path,
        help="keep the SQLite database here; reused (migrated, not filled again) when it exists",
    )
    args = parser.parse_args()
    targets: list[tuple[str, str]] = []
    tmp = tempfile.TemporaryDirectory()
    if not args.postgres_db or args.sqlite_file:
        targets.append(("SQLite", f"sqlite:///{args.sqlite_file or Path(tmp.name) / 'ui.db'}"))
    if args.postgres:
        targets.append(("PostgreSQL", _fresh_postgres(args.postgres)))
    if args.postgres_db:
        targets.append(("PostgreSQL", args.postgres_db))
    for label, url in targets:
        if url == args.postgres_db or (
            label == "SQLite" and args.sqlite_file and args.sqlite_file.exists()
        ):
            migrate.upgrade(url)
            print(f"{label}: reusing the database", flush=True)
        else:
            seconds = fill(url, args.conversations)
            print(f"{label}: {args.conversations:,} conversations written in {seconds:.0f} s")
        with ui(url) as base:
            results = measure(base, args.requests)
        print(f"| page ({label}) | first (ms) | median (ms) | p95 (ms) | max (ms) |")
        print("|---|---:|---:|---:|---:|")
        for name, (cold, med, p95, worst) in results.items():
            print(f"| {name} | {cold:.0f} | {med:.1f} | {p95:.1f} | {worst:.1f} |", flush=True)


def _fresh_postgres(server_url: str) -> str:
    from sqlalchemy.engine import make_url

    name = f"bench_ui_{uuid.uuid4().hex[:8]}"
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)


if __name__ == "__main__":
    main()
