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
import http.client
import multiprocessing as mp
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from bench_pipeline import _latencies, _prepare
from growth_data import TABLES, Databases, grow, raw_rows
from growth_stats import Pooled, pooled
from pipeline_load import SPANS_PER_TRACE, TRACES_PER_REQUEST
from pipeline_load import payloads as _payloads
from sqlalchemy import select

from toolscore.storage.engine import create_engine
from toolscore.storage.pipeline import conversations


def _template(url: str) -> dict[str, tuple[list[str], list[list[Any]]]]:
    """One conversation's rows in every table as the database stores them (columns, values;
    PostgreSQL: COPY text fields), scored by a real server on ``url``."""
    _prepare(url)
    prefix = f"t{uuid.uuid4().hex[:6]}"
    with _Serve(url) as server:
        _post(server.port, _payloads(prefix, 1)[0])
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


class _Serve:
    """A real ``toolscore serve`` process on ``url`` (HTTP on a free port, scoring on)."""

    def __init__(self, url: str, retention: str = "forever", scoring: bool = True) -> None:
        self.url = url
        self.retention = retention
        self.scoring = scoring
        self.log = Path(tempfile.mkstemp(prefix="bench-growth-", suffix=".log")[1])

    def __enter__(self) -> _Serve:
        flags = ["--grpc", "off", "--http", "127.0.0.1:0", "--settle", "1", "--root-idle", "1"]
        flags += ["--span-retention", self.retention]  # forever: what is grown stays
        flags += [] if self.scoring else ["--no-scoring"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLSCORE_")}
        with self.log.open("wb") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "toolscore", "serve", "--db", self.url, *flags],
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=env,
            )
        deadline = time.monotonic() + 120
        while not (m := re.search(r"OTLP/HTTP on http://127\.0\.0\.1:(\d+)", self.log.read_text())):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(self.log.read_text())
            time.sleep(0.2)
        self.port = int(m.group(1))
        return self

    def rss_mb(self) -> tuple[float, float]:
        """Peak RSS (VmHWM) of the server and of its largest child, MB."""

        def hwm(pid: int) -> float:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
            return 0.0

        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
        return hwm(self.proc.pid), max((hwm(int(c)) for c in children), default=0.0)

    def cpu_s(self) -> tuple[float, float]:
        """CPU seconds (user + system) so far of the server and of its child processes."""

        def cpu(pid: int) -> float:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
        return cpu(self.proc.pid), sum(cpu(int(c)) for c in children)

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(60)
        self.log.unlink(missing_ok=True)


def _post(port: int, body: bytes) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    start = time.monotonic()
    conn.request(
        "POST", "/v1/traces", body=body, headers={"Content-Type": "application/x-protobuf"}
    )
    response = conn.getresponse()
    response.read()
    conn.close()
    if response.status != 200:
        raise RuntimeError(f"status {response.status}")
    return time.monotonic() - start


def _load(port: int, rate: float, duration: float, prefix: str, result: Any) -> None:
    """Post at ``rate`` spans/s for ``duration`` s from 4 connections; every request's latency."""
    per_request = SPANS_PER_TRACE * TRACES_PER_REQUEST
    payloads = _payloads(prefix, max(1, int(rate * duration / per_request)))
    interval = per_request / rate
    lock = threading.Lock()
    state: dict[str, Any] = {"next": 0, "latencies": [], "failed": 0}
    start = time.monotonic()

    def sender() -> None:
        while True:
            with lock:
                i = state["next"]
                state["next"] += 1
            if i >= len(payloads):
                return
            delay = start + i * interval - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            try:
                latency = _post(port, payloads[i])
            except Exception:
                with lock:
                    state["failed"] += 1
                continue
            with lock:
                state["latencies"].append(latency)

    threads = [threading.Thread(target=sender) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    result.update(
        latencies=state["latencies"], failed=state["failed"], seconds=time.monotonic() - start
    )


def _p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] if ordered else float("nan")


def measure(
    url: str, rate: float, duration: float, retention: str, scoring: bool = True
) -> tuple[dict[str, float], list[float]]:
    """One run: its figures, and every request's latency (seconds)."""
    prefix = f"m{uuid.uuid4().hex[:8]}"
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager, _Serve(url, retention, scoring) as server:
        result = manager.dict()
        time.sleep(3)  # scoring processes started
        cpu0, child_cpu0 = server.cpu_s()
        load = ctx.Process(target=_load, args=(server.port, rate, duration, prefix, result))
        load.start()
        load.join()
        sent = dict(result)
        expected = len(sent["latencies"]) * TRACES_PER_REQUEST
        # without scoring every conversation counts as scored at once (no latency to wait for)
        scored = _latencies(url, prefix, expected, timeout=120)[0] if scoring else [0.0] * expected
        rss, child_rss = server.rss_mb()
        cpu1, child_cpu1 = server.cpu_s()
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
        "child_rss_mb": child_rss,
    }
    return figures, list(sent["latencies"])


# --- databases ----------------------------------------------------------------------------------


METRICS = (  # (key, heading, format)
    ("spans_per_s", "stored spans/s", "{:,.0f}"),
    ("scoring_p99_s", "scoring p99 s", "{:.2f}"),
    ("server_us_per_span", "server CPU us/span", "{:.1f}"),
    ("scoring_ms_per_conv", "scoring CPU ms/conv", "{:.3f}"),
    ("rss_mb", "server peak RSS MB", "{:.0f}"),
    ("child_rss_mb", "scoring peak RSS MB", "{:.0f}"),
)


def measure_pairs(
    grown: str, dbs: Databases, args: argparse.Namespace
) -> tuple[dict[str, float], dict[str, float], dict[str, float], Pooled]:
    """``args.pairs`` grown/fresh pairs, alternating which runs first (the order effect then
    cancels); medians of each side, the median of the per-pair ratios, and the request
    latencies of every run pooled per side."""
    sides: dict[str, list[dict[str, float]]] = {"grown": [], "fresh": []}
    requests: dict[str, list[float]] = {"grown": [], "fresh": []}
    for i in range(args.pairs):
        fresh = dbs.new("fresh")
        _prepare(fresh)
        order = [("grown", grown), ("fresh", fresh)]
        for side, url in order if i % 2 == 0 else order[::-1]:
            figures, latencies = measure(
                url, args.rate, args.duration, args.span_retention, not args.no_scoring
            )
            sides[side].append(figures)
            requests[side] += latencies
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
        cells.append(f"{fmt.format(g[key])} / {fmt.format(f[key])} ({r[key]:.2f}x)")
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
    parser.add_argument("--duration", type=float, default=20, help="seconds of load")
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
