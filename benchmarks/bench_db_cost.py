"""What PostgreSQL spends per stored span and per scored conversation (docs/scaling.md).

The load of ``bench_pipeline.py`` (7-span GenAI agent traces, one conversation each, in 511-span
OTLP/HTTP requests at a fixed rate) goes to a ``serve`` app in this process, twice per run on a
fresh set of tables: once with scoring off (the receiver alone: the cost of a span) and once with
scoring on (the difference, divided by the conversations, is the cost of a conversation: its
row, the assignment of its spans, the claim, the reads and the revision written). Measured:

- statements, rows and WAL bytes from ``pg_stat_statements`` (the database's own statements only;
  needs the extension loaded: ``shared_preload_libraries = 'pg_stat_statements'``); without it,
  the cluster's WAL (``pg_current_wal_lsn()`` difference: includes other databases' writes);
- rows inserted / updated per table from ``pg_stat_user_tables``, transactions from
  ``pg_stat_database`` (read after the server stopped, when every backend has flushed them);
- CPU seconds of the serve process, its scoring processes and the database's backends (/proc).

    .venv/bin/python benchmarks/bench_db_cost.py --rate 5000 --duration 20 --runs 3 \\
        --postgres postgresql+psycopg://postgres@127.0.0.1:55432/bench
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing as mp
import os
import statistics
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from bench_pipeline import _children_cpu_s, _latencies, _prepare, _Server
from pipeline_load import SPANS_PER_TRACE
from pipeline_load import load as _load
from sqlalchemy import create_engine, text

TICKS = os.sysconf("SC_CLK_TCK")


def _pg(url: str, sql: str) -> list[Any]:
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            result = conn.execute(text(sql))
            return list(result.all()) if result.returns_rows else []
    finally:
        engine.dispose()


class BackendCpu:
    """CPU seconds of the database's backends during the run (sampled: a backend that ends
    between two samples loses its last interval; the pool keeps most of them alive)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _pids(self) -> list[int]:
        rows = _pg(self.url, "SELECT pid FROM pg_stat_activity WHERE datname = current_database()")
        return [int(r[0]) for r in rows if int(r[0])]

    @staticmethod
    def _cpu(pid: int) -> float | None:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / TICKS

    def _sample(self, initial: bool = False) -> None:
        for pid in self._pids():
            cpu = self._cpu(pid)
            if cpu is None:
                continue
            self.first.setdefault(pid, cpu if initial else 0.0)
            self.last[pid] = cpu

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            self._sample()

    def __enter__(self) -> BackendCpu:
        self._sample(initial=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._sample()
        self._stop.set()
        self._thread.join()

    @property
    def seconds(self) -> float:
        return sum(self.last[p] - self.first[p] for p in self.last)


def _statements(url: str) -> dict[str, tuple[int, int, int]] | None:
    """(calls, rows, WAL bytes) per statement kind since the last reset; None without the
    extension."""
    try:
        rows = _pg(
            url,
            "SELECT upper((regexp_split_to_array(ltrim(query), '\\s+'))[1]), sum(calls), "
            "sum(rows), sum(wal_bytes) FROM pg_stat_statements WHERE dbid = "
            "(SELECT oid FROM pg_database WHERE datname = current_database()) GROUP BY 1",
        )
    except Exception:
        return None
    return {kind: (int(c), int(r), int(w)) for kind, c, r, w in rows}


def _reset(url: str) -> None:
    with contextlib.suppress(Exception):  # not installed: the cluster's WAL is used instead
        _pg(url, "SELECT pg_stat_statements_reset()")
    _pg(url, "SELECT pg_stat_reset()")  # this database's table and transaction counters


def _table_rows(url: str) -> dict[str, tuple[int, int, int]]:
    rows = _pg(url, "SELECT relname, n_tup_ins, n_tup_upd, n_tup_del FROM pg_stat_user_tables")
    return {name: (int(i), int(u), int(d)) for name, i, u, d in rows if i or u or d}


def _wal_lsn(url: str) -> int:
    return int(_pg(url, "SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")[0][0])


def run_once(url: str, *, rate: float, duration: float, scoring: bool) -> dict[str, Any]:
    _prepare(url)  # empty tables, the expectation every conversation matches
    _pg(url, "CHECKPOINT")  # full-page images after a checkpoint would count for the next run
    time.sleep(0.5)
    _reset(url)
    prefix = f"c{uuid.uuid4().hex[:8]}"
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        result = manager.dict()
        server = _Server(url, 1.0, scoring)
        with server, BackendCpu(url) as backends:
            time.sleep(3)  # the scoring child starts before the clock does
            manager_pid = manager._process.pid  # type: ignore[attr-defined]
            child0 = _children_cpu_s({manager_pid})
            cpu0 = time.process_time()
            wal0 = _wal_lsn(url)
            load = ctx.Process(
                target=_load, args=(server.app.http_port, rate, duration, prefix, result)
            )
            load.start()
            load.join()
            sent = dict(result)
            scored = 0
            if scoring:
                scored = len(_latencies(url, prefix, sent["conversations"], timeout=90)[0])
            wal = _wal_lsn(url) - wal0
            server_cpu = time.process_time() - cpu0
            child_cpu = _children_cpu_s({manager_pid, load.pid or -1}) - child0
            statements = _statements(url)
    time.sleep(1.5)  # backends closed: their table and transaction counters are flushed
    xacts = _pg(
        url,
        "SELECT xact_commit + xact_rollback FROM pg_stat_database "
        "WHERE datname = current_database()",
    )[0][0]
    return {
        "spans": sent["spans"],
        "conversations": sent["conversations"],
        "scored": scored,
        "failed": sent["failed"],
        "spans_per_s": sent["spans"] / sent["seconds"],
        "cluster_wal": wal,
        "statements": statements,
        "tables": _table_rows(url),
        "transactions": int(xacts),
        "cpu": {"serve": server_cpu, "scoring": child_cpu, "postgres": backends.seconds},
    }


def _totals(run: dict[str, Any]) -> dict[str, float]:
    st = run["statements"] or {}
    out = {
        "statements": float(sum(c for c, _r, _w in st.values())),
        "rows": float(sum(r for _c, r, _w in st.values())),
        "wal": float(sum(w for _c, _r, w in st.values())) if st else float(run["cluster_wal"]),
        "transactions": float(run["transactions"]),
        "rows_written": float(sum(i + u + d for i, u, d in run["tables"].values())),
    }
    for what, seconds in run["cpu"].items():
        out[f"cpu_{what}"] = seconds
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--postgres", metavar="URL", required=True, help="a database to use")
    parser.add_argument("--rate", type=float, default=5_000, help="offered spans per second")
    parser.add_argument("--duration", type=float, default=20, help="seconds of load per run")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    per_span: dict[str, list[float]] = {}
    per_conv: dict[str, list[float]] = {}
    breakdown: list[dict[str, Any]] = []
    for i in range(args.runs):
        ingest = run_once(args.postgres, rate=args.rate, duration=args.duration, scoring=False)
        full = run_once(args.postgres, rate=args.rate, duration=args.duration, scoring=True)
        assert full["scored"] == full["conversations"], (full["scored"], full["conversations"])
        a, b = _totals(ingest), _totals(full)
        for key in a:
            per_span.setdefault(key, []).append(a[key] / ingest["spans"])
            scaled = a[key] * full["spans"] / ingest["spans"]  # the receiver's share of run b
            per_conv.setdefault(key, []).append((b[key] - scaled) / full["conversations"])
        breakdown.append({"ingest": ingest, "scoring": full})
        print(
            f"run {i + 1}: {ingest['spans']} spans ({ingest['spans_per_s']:.0f}/s) without "
            f"scoring, {full['spans']} ({full['spans_per_s']:.0f}/s) and "
            f"{full['scored']} conversations scored with; statements by kind: "
            f"{ingest['statements']} / {full['statements']}; rows written by table: "
            f"{ingest['tables']} / {full['tables']}",
            flush=True,
        )
    print(f"\nmedians of {args.runs} runs ({SPANS_PER_TRACE}-span conversations):")
    print(f"{'':24} {'per span':>14} {'per conversation':>18}")
    for key in per_span:
        unit = " s" if key.startswith("cpu") else ""
        scale = 1e6 if key.startswith("cpu") else 1.0
        label = key + (" (us)" if unit else "")
        print(
            f"{label:24} {statistics.median(per_span[key]) * scale:>14.3f} "
            f"{statistics.median(per_conv[key]) * scale:>18.3f}"
        )


if __name__ == "__main__":
    main()
