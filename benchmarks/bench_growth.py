"""Flat cost as data grows: the same load on a database holding N stored spans and on a fresh one.

For each database (SQLite file, PostgreSQL) and each size N (0, 1 million, 5 million spans by
default), the benchmark grows one database to N stored spans, then runs a real ``toolscore
serve`` (scoring on, default settings, ``--settle 1``) on it under a fixed offered load from a
separate process (7-span GenAI agent traces, 73 per OTLP/HTTP request, as ``bench_pipeline.py``)
and, right after, the same on a fresh database: the fresh run is the peer, measured in the same
minute on the same machine. Reported per size: stored spans/s, scoring latency p99 (a
conversation's last span to its evaluation rows), CPU per unit of work and the server's and its
scoring processes' peak RSS (medians of the runs, the median of the pairs' ratios); and the
request latency pooled: every request of every run on a side, their p99 and median, the ratio
and a 90 % bootstrap interval of the p99 ratio (``growth_stats.py``).

The stored data is grown quickly with bulk inserts, not through the server: a real scored
conversation is made once (through the server), and its rows in every table (spans,
conversations, evaluations, tool_calls) are copied with new ids, spread
over the past days, so the indexes and the tables the server reads grow as in production.

    cd benchmarks && python bench_growth.py --sizes 0,5000000,20000000 --rate 2000 \\
        --duration 45 --pairs 3 --postgres postgresql+psycopg://postgres@127.0.0.1:5432/postgres
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench_pipeline import _latencies, _prepare
from growth_data import TABLES, Databases, grow, raw_rows
from growth_load import Serve, load, post
from growth_stats import Pooled, pooled
from pipeline_load import SPANS_PER_TRACE, TRACES_PER_REQUEST
from pipeline_load import payloads as _payloads
from sqlalchemy import select

from toolscore.storage.conversations.tables import conversations
from toolscore.storage.plumbing.engine import create_engine


def _template(url: str) -> dict[str, tuple[list[str], list[list[Any]]]]:
    """One conversation's rows in every table as the database stores them (columns, values;
    PostgreSQL: COPY text fields), scored by a real server on ``url``."""
    _prepare(url)
    prefix = f"t{uuid.uuid4().hex[:6]}"
    with Serve(url) as server:
        post(server.port, _payloads(prefix, 1)[0])
        _latencies(url, prefix, TRACES_PER_REQUEST, timeout=120)
    conv = f"{prefix}-0"
    engine = create_engine(url)
    with engine.connect() as conn:
        trace = conn.execute(
            select(conversations.c.last_trace_id).where(conversations.c.id == conv)
        ).scalar_one()
        where = {
            "traces": f"trace_id = '{trace}'",
            "spans": f"trace_id = '{trace}'",
            "conversations": f"id = '{conv}'",
            "evaluations": f"conversation_id = '{conv}'",
            "tool_calls": f"conversation_id = '{conv}'",
        }
        out = {t.name: raw_rows(conn, t, where[t.name]) for t in TABLES}
    engine.dispose()
    assert len(out["spans"][1]) == SPANS_PER_TRACE and out["evaluations"][1], out
    out["_ids"] = ([conv, trace], [])
    return out


# --- one measurement ------------------------------------------------------------------------


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else float("nan")


def measure(
    url: str,
    rate: float,
    duration: float,
    retention: str,
    scoring: bool = True,
    warmup: float = 0.0,
) -> tuple[dict[str, float], list[float], list[float]]:
    """One run: its figures, every measured request's latency and every warm-up request's
    (seconds). The figures are of the measured requests only; CPU is counted from the first of
    them, so it includes the scoring of the warm-up's last conversations (on both sides)."""
    prefix = f"m{uuid.uuid4().hex[:8]}"
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager, Serve(url, retention, scoring) as server:
        result = manager.dict(measuring=manager.Event())
        time.sleep(3)  # scoring processes started
        args = (server.port, rate, duration, prefix, result, warmup)
        sender = ctx.Process(target=load, args=args)
        sender.start()
        result["measuring"].wait(warmup + 60)
        cpu0, child_cpu0 = server.cpu_s()
        disk0 = server.disk_read_bytes()
        sender.join()
        sent = dict(result)
        expected = len(sent["latencies"]) * TRACES_PER_REQUEST
        # without scoring every conversation counts as scored at once (no latency to wait for)
        scored = _latencies(url, prefix, expected, timeout=120)[0] if scoring else [0.0] * expected
        rss, child_rss = server.rss_mb()
        cpu1, child_cpu1 = server.cpu_s()
        disk1 = server.disk_read_bytes()
    stored = len(sent["latencies"]) * SPANS_PER_TRACE * TRACES_PER_REQUEST
    figures = {
        "spans_per_s": stored / sent["seconds"],
        # CPU per unit of work: what a loaded machine changes least
        "server_us_per_span": 1e6 * (cpu1 - cpu0) / max(1, stored),
        "scoring_ms_per_conv": 1e3 * (child_cpu1 - child_cpu0) / max(1, len(scored)),
        "failed": sent["failed"],
        "request_p99_ms": 1000 * _p99(sent["latencies"]),
        "scored": len(scored) / max(1, expected),
        "scoring_p99_s": _p99(scored),
        "rss_mb": rss,
        # page-cache misses: index pages read back from the disk (SQLite; PostgreSQL reads in
        # its own processes)
        "disk_kb_per_request": (disk1 - disk0) / 1024 / max(1, len(sent["latencies"])),
        "child_rss_mb": child_rss,
    }
    return figures, list(sent["latencies"]), list(sent["warmup"])


# --- databases ----------------------------------------------------------------------------------


METRICS = (  # (key, heading, format)
    ("spans_per_s", "stored spans/s", "{:,.0f}"),
    ("scoring_p99_s", "scoring p99 s", "{:.2f}"),
    ("server_us_per_span", "server CPU us/span", "{:.1f}"),
    ("scoring_ms_per_conv", "scoring CPU ms/conv", "{:.3f}"),
    ("rss_mb", "server peak RSS MB", "{:.0f}"),
    ("child_rss_mb", "scoring peak RSS MB", "{:.0f}"),
    ("disk_kb_per_request", "disk reads KB/request (toolscore processes)", "{:.0f}"),
)
# Below this on the fresh side a ratio says nothing (a fresh database reads ~0 from the disk).
RATIO_FLOOR = {"disk_kb_per_request": 1.0}


def measure_pairs(
    grown: str, dbs: Databases, args: argparse.Namespace
) -> tuple[dict[str, float], dict[str, float], dict[str, float], Pooled]:
    """``args.pairs`` grown/fresh pairs, alternating which runs first (the order effect then
    cancels); medians of each side, the median of the per-pair ratios, and the request
    latencies of every run pooled per side."""
    sides: dict[str, list[dict[str, float]]] = {"grown": [], "fresh": []}
    requests: dict[str, list[float]] = {"grown": [], "fresh": []}
    warm: dict[str, list[float]] = {"grown": [], "fresh": []}
    for i in range(args.pairs):
        fresh = dbs.new("fresh")
        _prepare(fresh)
        order = [("grown", grown), ("fresh", fresh)]
        for side, url in order if i % 2 == 0 else order[::-1]:
            figures, latencies, warmup = measure(
                url,
                args.rate,
                args.duration,
                args.span_retention,
                not args.no_scoring,
                args.warmup,
            )
            sides[side].append(figures)
            requests[side] += latencies
            warm[side] += warmup
        dbs.drop(fresh)
    g, f = sides["grown"], sides["fresh"]
    med = {
        side: {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        for side, runs in sides.items()
    }
    ratios = {
        k: statistics.median(
            a[k] / b[k] if b[k] else float("nan") for a, b in zip(g, f, strict=True)
        )
        for k in g[0]
    }
    if warm["grown"] and warm["fresh"]:  # the warm-up's pooled medians, as a pseudo-metric
        med["grown"]["warmup_median_ms"] = 1000 * statistics.median(warm["grown"])
        med["fresh"]["warmup_median_ms"] = 1000 * statistics.median(warm["fresh"])
        ratios["warmup_median_ms"] = (
            med["grown"]["warmup_median_ms"] / med["fresh"]["warmup_median_ms"]
        )
    return med["grown"], med["fresh"], ratios, pooled(requests["grown"], requests["fresh"])


POOLED_HEADINGS = (
    "requests pooled grown / fresh",
    "pooled request p99 ms grown / fresh (ratio, 90 % interval)",
    "pooled request median ms grown / fresh (ratio)",
)


def _row(
    size: int, g: dict[str, float], f: dict[str, float], r: dict[str, float], p: Pooled
) -> str:
    cells = [f"{size:>12,}", f"{p.grown_n} / {p.fresh_n}"]
    cells.append(
        f"{1000 * p.grown_p99:,.0f} / {1000 * p.fresh_p99:,.0f} "
        f"({p.p99_ratio:.2f}x, {p.p99_low:.2f}-{p.p99_high:.2f})"
    )
    cells.append(
        f"{1000 * p.grown_median:,.1f} / {1000 * p.fresh_median:,.1f} ({p.median_ratio:.2f}x)"
    )
    for key, _, fmt in METRICS:
        ratio = f"{r[key]:.2f}x" if f[key] >= RATIO_FLOOR.get(key, 0.0) else "no ratio"
        cells.append(f"{fmt.format(g[key])} / {fmt.format(f[key])} ({ratio})")
    if "warmup_median_ms" in g:
        cells.append(
            f"{g['warmup_median_ms']:.1f} / "
            f"{f['warmup_median_ms']:.1f} ({r['warmup_median_ms']:.2f}x)"
        )
    if not g["scored"] == f["scored"] == 1:
        cells.append(f"scored {g['scored']:.2f} / {f['scored']:.2f}")
    return " | ".join(cells)


def run_kind(kind: str, args: argparse.Namespace, workdir: Path) -> None:
    dbs = Databases(kind, args.postgres, workdir)
    try:
        grown = args.grown or dbs.new("grown")
        template = _template(dbs.new("template"))
        if not args.grown:  # a given database keeps its rows (and its expectation)
            _prepare(grown)
        print(
            f"\n{kind}: {args.rate:g} spans/s offered for {args.duration:g} s per measurement, "
            f"{args.pairs} grown/fresh pairs per size (alternating order): request latency "
            "pooled over every run of a side; the rest medians, and the median of the pairs' "
            "ratios"
        )
        heads = [*POOLED_HEADINGS, *(f"{h} grown / fresh" for _, h, _ in METRICS)]
        if args.warmup > 0:
            heads.append(f"first {args.warmup:g} s (warm-up) request median ms, pooled")
        rows = [" | ".join(["stored spans", *heads])]
        for size in args.sizes:
            took = grow(grown, template, size)
            if size:
                print(f"  grown to {size:,} spans in {took:.0f} s: {grown}", flush=True)
            if not args.pairs:  # grow only (with --keep, for later --grown runs)
                continue
            rows.append(_row(size, *measure_pairs(grown, dbs, args)))
            print(f"  {rows[-1]}  (load average {os.getloadavg()[0]:.1f})", flush=True)
        print("\n".join(["", f"{kind}:", *rows]))
    finally:
        if not args.keep:
            dbs.drop_all()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="0,1000000,5000000", help="stored spans, ascending")
    parser.add_argument("--rate", type=float, default=3_000, help="offered spans per second")
    parser.add_argument("--duration", type=float, default=20, help="seconds of load measured")
    parser.add_argument(
        "--warmup",
        type=float,
        default=30,
        help="seconds of the same load before the measured seconds, without a pause, reported "
        "apart (0: none): a server left running has its working set in memory, one just "
        "started on a file whose pages were reclaimed reads it from disk first",
    )
    parser.add_argument(
        "--pairs", type=int, default=3, help="grown/fresh pairs per size (0: grow only)"
    )
    parser.add_argument("--postgres", metavar="URL", help="an admin URL: databases are made")
    parser.add_argument("--no-sqlite", action="store_true")
    parser.add_argument(
        "--no-scoring", action="store_true", help="serve --no-scoring: ingest alone, no scoring"
    )
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--keep", action="store_true", help="keep the databases made")
    parser.add_argument(
        "--grown",
        metavar="URL",
        help="grow and measure this database (kept) instead of a new one: an earlier --keep run's",
    )
    parser.add_argument(
        "--span-retention",
        default="forever",
        help="serve --span-retention (default forever: the grown spans, 1-31 days old, stay)",
    )
    args = parser.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    kinds = ([] if args.no_sqlite else ["sqlite"]) + (["postgresql"] if args.postgres else [])
    if args.grown:
        kinds = ["postgresql" if args.grown.startswith("postgresql") else "sqlite"]
    for kind in kinds:
        run_kind(kind, args, args.workdir)


if __name__ == "__main__":
    main()
